// CPU pack_weight_int8/int4 and linear_w8a16/w4a16. Few input rows (decode): every weight block
// streams once through the ISA's block microkernel, two input rows at a time, in parallel over
// blocks of 4 output rows (int4 with one long row of x: 4 blocks at a time, runQuads). Many rows
// (prefill): tiles of the weight are dequantized to fp32 once and multiplied by ATen's GEMM,
// which is compute-bound there and better blocked than a GEMV.
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <torch/library.h>
#include <torch/version.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "kernels/cpu/linear_microkernels.h"
#include "kernels/linear_weight_only_args.h"

namespace pt2q {
namespace {

// From this many input rows on, dequantize-then-GEMM beats the block kernel (benchmarks/kernels/
// bench_linear_woq.py on the 2-core AVX-512 VM).
constexpr int64_t kGemmRows = 64;
constexpr int64_t kGemmTile = 64;  // weight rows dequantized per tile (multiple of 4)
constexpr int64_t kBf16Tile = 512;  // the same for the bf16 path, whose GEMMs use every thread
// One row of x runs 4 blocks at a time (runQuads) where that pays: on CPUs that split 512-bit
// ops in two (Zen 4) the single-block kernel is compute-bound and rereads x for every block, and
// once x plus its 16 KiB prefetch window outgrow the L1 the shared x loads save more than 4 weight
// streams per thread cost. Same-process A/B, W4A16 M = 1, N = 4096, new / old time:
// - 2-core Zen 4 VM (32 KiB L1): bf16 x of 8-9 KiB 0.80-0.92x, 10-11 KiB 0.94-1.00x, 12-28 KiB
//   1.10-1.52x; fp32 x of 8-12 KiB 0.88-0.95x, 16 KiB 0.97-1.09x, 24-44 KiB 1.13-1.23x. So the
//   crossovers scale with the L1: 11/32 of it for bf16 x, 1/2 for fp32 x.
// - 2-core Zen 5 VM (48 KiB L1, full-width 512-bit units): bf16 x of 8-56 KiB 0.55-0.86x, fp32
//   x of 12-44 KiB 0.72-0.91x, 56 KiB 1.01x, 112 KiB 1.09x; with the weights in the L2/L3 block16
//   ran 1.16-1.23x, and reading its 16 rows as one stream (a layout pack_weight_int4 does not
//   write) 0.96-1.13x, so the loss is the 4 streams.
// - the GPU machine's Xeon (48 KiB L1), 2 threads: bf16 8 KiB 1.01x, 12 KiB 1.05x, 22-28 KiB
//   1.12x; fp32 16 KiB 0.88x, 24 KiB 0.95x, 44 KiB 1.10x; 16 threads (all): 0.90x to 1.03x.
// PT2Q_CPU_W4_QUAD=0 / 1 forces block16 off / on for every single row (tests, benchmarks).
bool useQuads(int64_t x_bytes, bool bf16) {
  if (const char* env = std::getenv("PT2Q_CPU_W4_QUAD"); env != nullptr && (env[0] == '0' || env[0] == '1')) {
    return env[0] == '1';
  }
  const int64_t l1 = cpu::l1DataCacheBytes();
  return cpu::cpuSplits512BitOps() && x_bytes > (bf16 ? l1 * 11 / 32 : l1 / 2);
}

template <int Bits>
at::Tensor packWeightCpu(const at::Tensor& weight) {
  checkPackWeight(weight, Bits);
  const int64_t n = weight.size(0), k = weight.size(1), chunk = packChunk(Bits);
  const int64_t kp = roundUp(k, chunk);
  const at::Tensor w = weight.contiguous();
  if (Bits == 4) {
    const at::Tensor bad = (w < -8) | (w > 7);
    if (bad.any().item<bool>()) failPackInt4Value(w, bad.reshape({-1}).nonzero().index({0, 0}).item<int64_t>());
  }
  at::Tensor out = at::empty(packedWeightShape(n, k, Bits), w.options());
  const int8_t* src = w.const_data_ptr<int8_t>();
  auto* dst = reinterpret_cast<uint8_t*>(out.data_ptr<int8_t>());
  const int64_t row_bytes = kp * Bits / 8;  // one row's bytes in its block
  // Padding rows of the last block: zero codes (int4: the nibble 8).
  std::fill(dst + (n / kPackRows) * kPackRows * row_bytes, dst + out.numel(), Bits == 4 ? 0x88 : 0);
  at::parallel_for(0, n, 64, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      uint8_t* block = dst + (r / kPackRows) * kPackRows * row_bytes + (r % kPackRows) * kPackChunkBytes;
      const int8_t* row = src + r * k;
      for (int64_t c = 0; c * chunk < kp; ++c) {
        uint8_t* o = block + c * kPackRows * kPackChunkBytes;
        for (int64_t l = 0; l < kPackChunkBytes; ++l) {
          if (Bits == 8) {
            const int64_t j = c * chunk + l;
            o[l] = static_cast<uint8_t>(j < k ? row[j] : 0);
          } else {
            const int64_t j = c * chunk + l, h = j + kPackChunkBytes;
            const int lo = (j < k ? row[j] : 0) + 8, hi = (h < k ? row[h] : 0) + 8;
            o[l] = static_cast<uint8_t>(lo | (hi << 4));
          }
        }
      }
    }
  });
  return out;
}

// block(b, m0, mx, tmp) for every block b of 4 weight rows (in parallel) and every pair of x rows
// from m0 (mx of them), writing tmp[i * 4 + r]; gathered into out [m, n] fp32.
template <typename Block>
void runBlocks(const Block& block, int64_t m, int64_t n, float* out) {
  at::parallel_for(0, roundUp(n, kPackRows) / kPackRows, 8, [&](int64_t b0, int64_t b1) {
    float tmp[2 * kPackRows];
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t rows = std::min(kPackRows, n - b * kPackRows);
      for (int64_t m0 = 0; m0 < m; m0 += 2) {
        const int64_t mx = std::min<int64_t>(2, m - m0);
        block(b, m0, mx, tmp);
        for (int64_t i = 0; i < mx; ++i) {
          for (int64_t r = 0; r < rows; ++r) out[(m0 + i) * n + b * kPackRows + r] = tmp[i * kPackRows + r];
        }
      }
    }
  });
}

// One row of x (decode): quad(b, tmp) runs the 4 blocks from b (16 weight rows) in one pass,
// sharing x's loads; the blocks of a last partial quad go through block(b, 0, 1, tmp) one by one.
template <typename Block, typename Quad>
void runQuads(const Block& block, const Quad& quad, int64_t n, float* out) {
  constexpr int64_t kQuad = 4;
  const int64_t blocks = roundUp(n, kPackRows) / kPackRows, full = blocks / kQuad;
  at::parallel_for(0, (blocks + kQuad - 1) / kQuad, 2, [&](int64_t q0, int64_t q1) {
    float tmp[kQuad * kPackRows];
    for (int64_t q = q0; q < q1; ++q) {
      const int64_t b0 = q * kQuad;
      if (q < full) {
        quad(b0, tmp);
      } else {
        for (int64_t b = b0; b < blocks; ++b) block(b, 0, 1, tmp + (b - b0) * kPackRows);
      }
      std::copy(tmp, tmp + std::min(kQuad * kPackRows, n - b0 * kPackRows), out + b0 * kPackRows);
    }
  });
}

// `t` ([n] or [n, groups]) as fp32 [np, groups] with zero rows past n (the kernels read whole
// blocks of 4 rows); no copy when it already is one.
at::Tensor blockRows(const at::Tensor& t, int64_t n, int64_t np, int64_t groups) {
  if (np == n && t.scalar_type() == at::kFloat && t.is_contiguous()) return t.reshape({n, groups});
  at::Tensor out = at::zeros({np, groups}, t.options().dtype(at::kFloat));
  out.slice(0, 0, n).copy_(t.reshape({n, groups}));
  return out;
}

// What the int4 block kernels read of a packed weight (w4Bf16Rows).
struct W4Blocks {
  const int8_t* w;
  int64_t kp, chunks, group_chunks, groups;
  const at::Tensor& scales;       // fp32 [np, groups]
  const at::Tensor& zero_points;  // the same, or undefined
};

// `rows` rows of x, each `parts` bf16 parts interleaved by 32-value chunk (xb [rows, kp * parts],
// zero-padded, as split_x writes them; the parts of a row add up to it), through the AVX512_BF16
// int4 kernels into out [rows, n] fp32: bf16-decoded nibbles meet x in vdpbf16ps; the kernel
// subtracts the decode's offset and the zero points per group.
void w4Bf16Rows(const cpu::LinearW4Bf16Kernels* kern, const W4Blocks& wb, const at::Tensor& xb, int64_t rows,
                int parts, int64_t n, float* out) {
  const int64_t kp = wb.kp, gs = wb.groups;
  at::Tensor xperm = at::empty_like(xb);
  at::Tensor xsum = at::empty({rows, gs}, xb.options().dtype(at::kFloat));
  auto* xp = reinterpret_cast<uint16_t*>(xperm.data_ptr());
  // Each chunk is permuted on its own and each group's sum spans its chunks' parts: the sums of x.
  kern->prepare_x(reinterpret_cast<const uint16_t*>(xb.const_data_ptr()), rows, kp * parts, wb.group_chunks * parts,
                  xp, xsum.data_ptr<float>());
  const at::Tensor offsets = wb.zero_points.defined() ? (wb.zero_points + 136.0) * 0.25 : at::Tensor();
  const float* sp = wb.scales.const_data_ptr<float>();
  const float* offp = offsets.defined() ? offsets.const_data_ptr<float>() : nullptr;
  const float* xsp = xsum.const_data_ptr<float>();
  const int64_t block_bytes = kPackRows * kp / 2;
  const auto block = [&](int64_t b, int64_t m0, int64_t mx, float* tmp) {
    const int64_t at = b * kPackRows * gs;
    kern->block4(wb.w + b * block_bytes, xp + m0 * parts * kp, kp * parts, mx, parts, wb.chunks, wb.group_chunks,
                 sp + at, offp == nullptr ? nullptr : offp + at, gs, xsp + m0 * gs, tmp);
  };
  if (rows == 1 && parts == 1 && useQuads(kp * 2, true)) {
    const auto quad = [&](int64_t b, float* tmp) {
      const int64_t at = b * kPackRows * gs;
      kern->block16(wb.w + b * block_bytes, xp, wb.chunks, wb.group_chunks, sp + at,
                    offp == nullptr ? nullptr : offp + at, gs, xsp, tmp);
    };
    runQuads(block, quad, n, out);
  } else {
    runBlocks(block, rows, n, out);
  }
}

// torch's fp32 matmul precision for oneDNN matmuls (torch.set_float32_matmul_precision, or
// torch.backends.mkldnn.matmul.fp32_precision), as the bf16 parts fp32 x may be split into for
// the AVX512_BF16 int4 kernel: 0 at "highest" / "ieee" (fp32 products), 2 at "high" / "tf32"
// (x = hi + lo, the ~16-bit split torch documents for "high", finer than tf32's 11 bits), 1 at
// "medium" / "bf16". Two parts of a row of kp values take 4 * kp bytes, as fp32 x does; past half
// the L1 they lose to the fp32 kernel (W4A16 M = 1, N = 4096, K = 11008, 48 KiB L1: 0.544 ms
// against 0.498 on the 2-core Zen 5 VM), which "high" allows, so that row stays fp32.
int fp32MatmulBf16Parts(int64_t kp) {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 10)
  switch (at::globalContext().float32Precision(at::Float32Backend::MKLDNN, at::Float32Op::MATMUL)) {
    case at::Float32Precision::TF32:
      return 4 * kp <= cpu::l1DataCacheBytes() / 2 ? 2 : 0;
    case at::Float32Precision::BF16:
      return 1;
    default:
      return 0;
  }
#else
  return 0;  // older torch: its per-backend precision API differs; stay exact
#endif
}

template <int Bits>
at::Tensor linearWeightOnlyCpu(const at::Tensor& input, const at::Tensor& packed, const at::Tensor& scales,
                               const c10::optional<at::Tensor>& zero_points, const c10::optional<at::Tensor>& bias) {
  const char* op = Bits == 4 ? "linear_w4a16" : "linear_w8a16";
  const LinearWeightOnlyGeometry g = checkLinearWeightOnly(op, Bits, input, packed, scales, zero_points, bias);
  const int64_t n = g.n, k = g.k, m = g.m, chunk = packChunk(Bits), kp = roundUp(k, chunk);
  const int64_t np = roundUp(n, kPackRows);
  const at::Tensor pw = packed.contiguous();
  const auto* wp = reinterpret_cast<const uint8_t*>(pw.const_data_ptr<int8_t>());
  // Scales (and zero points) padded to whole blocks of 4 rows, fp32.
  const at::Tensor s = blockRows(scales, n, np, g.groups);
  const at::Tensor zp = zero_points.has_value() ? blockRows(*zero_points, n, np, g.groups) : at::Tensor();
  at::Tensor out = at::empty({m, n}, input.options().dtype(at::kFloat));
  if (m == 0) return out.to(input.scalar_type()).reshape(linearOutputShape(input.sizes(), n));
  const at::Tensor x2 = input.reshape({m, k});
  // x zero-padded to whole chunks (the kernels read whole chunks), in its own dtype; the fp32
  // paths widen it (a no-op for fp32 x), the bf16 ones read it as it is.
  at::Tensor xpad = at::zeros({m, kp}, input.options());
  xpad.slice(1, 0, k).copy_(x2);
  const int64_t chunks = kp / chunk;
  const int64_t group_chunks = g.groups == 1 ? chunks : g.group_size / chunk;

  // bf16 parts of x for the AVX512_BF16 int4 kernel: bf16 x is one; fp32 x is split as torch's
  // fp32 matmul precision allows (none at the default "highest").
  const int bf16_parts = input.scalar_type() == at::kBFloat16 ? 1
                         : input.scalar_type() == at::kFloat  ? fp32MatmulBf16Parts(kp)
                                                              : 0;
  const auto dequant = Bits == 4 ? cpu::linearKernels().w4_dequant : cpu::linearKernels().w8_dequant;
  const auto* w8p = reinterpret_cast<const int8_t*>(wp);
  if (m >= kGemmRows && input.scalar_type() == at::kBFloat16 && cpu::nativeBf16Gemm()) {
    // bf16 activations: F.linear's numerics (weights in bf16, fp32 accumulation, one rounding of
    // the result) at the speed of its bf16 GEMM; tiles dequantize in parallel, then each GEMM
    // uses every thread. Without AVX512_BF16 that GEMM is slower than the fp32 one, so bf16 x
    // takes the fp32 path below (fp32 weights: within the same bound, one rounding at the end).
    at::Tensor y = at::empty({m, n}, input.options());
    const at::Tensor& xb = xpad;
    at::Tensor tile = at::empty({kBf16Tile, kp}, xb.options());
    const c10::optional<at::Tensor> b16 =
        bias.has_value() ? c10::optional<at::Tensor>(bias->to(at::kBFloat16)) : c10::nullopt;
    for (int64_t n0 = 0; n0 < n; n0 += kBf16Tile) {
      const int64_t n1 = std::min(n, n0 + kBf16Tile);
      auto* t = reinterpret_cast<uint16_t*>(tile.data_ptr());
      at::parallel_for(n0, n1, 16, [&](int64_t r0, int64_t r1) {
        dequant(w8p, kp, r0, r1, s.const_data_ptr<float>(), zp.defined() ? zp.const_data_ptr<float>() : nullptr,
                g.groups, group_chunks, t + (r0 - n0) * kp, /*bf16=*/true);
      });
      const at::Tensor wt = tile.slice(0, 0, n1 - n0).t();
      if (b16.has_value()) {
        y.slice(1, n0, n1).copy_(at::addmm(b16->slice(0, n0, n1), xb, wt));
      } else {
        y.slice(1, n0, n1).copy_(at::mm(xb, wt));
      }
    }
    return y.reshape(linearOutputShape(input.sizes(), n));
  }
  if (m >= kGemmRows) {
    const at::Tensor xp = xpad.to(at::kFloat);
    at::parallel_for(0, (n + kGemmTile - 1) / kGemmTile, 1, [&](int64_t t0, int64_t t1) {
      at::Tensor tile = at::empty({kGemmTile, kp}, xp.options());
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t n0 = t * kGemmTile, n1 = std::min(n, n0 + kGemmTile);
        dequant(w8p, kp, n0, n1, s.const_data_ptr<float>(), zp.defined() ? zp.const_data_ptr<float>() : nullptr,
                g.groups, group_chunks, tile.data_ptr<float>(), /*bf16=*/false);
        out.slice(1, n0, n1).copy_(at::mm(xp, tile.slice(0, 0, n1 - n0).t()));
      }
    });
  } else if (Bits == 4 && bf16_parts > 0 && cpu::linearW4Bf16Kernel() != nullptr) {
    const auto* kern = cpu::linearW4Bf16Kernel();
    const W4Blocks wb{w8p, kp, chunks, group_chunks, g.groups, s, zp};
    if (input.scalar_type() == at::kBFloat16) {
      w4Bf16Rows(kern, wb, xpad, m, 1, n, out.data_ptr<float>());
    } else {
      // fp32 x under torch's "high" (or "medium") fp32 matmul precision: x = hi + lo (or hi) in
      // bf16; the kernel decodes each weight chunk once for both parts and sums them in its
      // accumulators.
      at::Tensor xs = at::empty({m, kp * bf16_parts}, input.options().dtype(at::kBFloat16));
      kern->split_x(xpad.const_data_ptr<float>(), m, kp, bf16_parts, reinterpret_cast<uint16_t*>(xs.data_ptr()));
      w4Bf16Rows(kern, wb, xs, m, bf16_parts, n, out.data_ptr<float>());
    }
  } else {
    const at::Tensor xp = xpad.to(at::kFloat);
    const auto& table = cpu::linearKernels();
    // int4 on AVX-512: nibbles decode by table lookup to the signed codes, from x in the
    // kernel's order; the other ISAs multiply the stored u = v + 8.
    const cpu::LinearW4F32Kernels* w4f32 = Bits == 4 ? cpu::linearW4F32Kernel() : nullptr;
    at::Tensor xperm;
    if (w4f32 != nullptr) {
      xperm = at::empty_like(xp);
      w4f32->prepare_x(xp.const_data_ptr<float>(), m, kp, xperm.data_ptr<float>());
    }
    const auto fn = w4f32 != nullptr ? w4f32->block4 : Bits == 4 ? table.w4_block4 : table.w8_block4;
    const float* xf = (w4f32 != nullptr ? xperm : xp).const_data_ptr<float>();
    const float* sp = s.const_data_ptr<float>();
    const int64_t block_bytes = kPackRows * kp * Bits / 8, gs = g.groups;
    const auto block = [&](int64_t b, int64_t m0, int64_t mx, float* tmp) {
      fn(w8p + b * block_bytes, xf + m0 * kp, kp, mx, chunks, group_chunks, sp + b * kPackRows * gs, gs, tmp);
    };
    if (m == 1 && w4f32 != nullptr && useQuads(kp * 4, false)) {
      const auto quad = [&](int64_t b, float* tmp) {
        w4f32->block16(w8p + b * block_bytes, xf, chunks, group_chunks, sp + b * kPackRows * gs, gs, tmp);
      };
      runQuads(block, quad, n, out.data_ptr<float>());
    } else {
      runBlocks(block, m, n, out.data_ptr<float>());
    }
    // sum_k (v - zp) s x = sum_k u s x - sum_g s (zp + offset) (sum_{k in g} x), where the kernels
    // multiplied the stored u = v + offset (offset 8 for int4 nibbles read as stored, 0 for int8
    // and for the table-decoded nibbles).
    const double offset = Bits == 4 && w4f32 == nullptr ? 8.0 : 0.0;
    if (zp.defined() || offset != 0.0) {
      const at::Tensor xsum = xp.slice(1, 0, k).reshape({m, g.groups, g.group_size}).sum(-1);  // [m, groups]
      // Without zero points the shift is the offset alone: offset * (xsum @ s^T), which is
      // xsum @ (s * offset)^T (a power of two) up to the GEMM's summation order, without two
      // [n, groups] temporaries a call (about a tenth of W4A16's M = 1 time at 4096 x 4096 on
      // AVX2, where the offset is 8: 1.5 MB of fresh pages written and read).
      const at::Tensor shifted = zp.defined() ? s * (zp + offset) : s;
      out.sub_(at::mm(xsum, shifted.slice(0, 0, n).t()), zp.defined() ? 1.0 : offset);
    }
  }
  if (bias.has_value()) out.add_(bias->to(at::kFloat));
  return out.to(input.scalar_type()).reshape(linearOutputShape(input.sizes(), n));
}

}  // namespace
}  // namespace pt2q

TORCH_LIBRARY_IMPL(pt2q, CPU, m) {
  m.impl("pack_weight_int8", &pt2q::packWeightCpu<8>);
  m.impl("pack_weight_int4", &pt2q::packWeightCpu<4>);
  m.impl("linear_w8a16", &pt2q::linearWeightOnlyCpu<8>);
  m.impl("linear_w4a16", &pt2q::linearWeightOnlyCpu<4>);
}
