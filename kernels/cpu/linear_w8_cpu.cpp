// CPU pack_weight_int8 / linear_w8a16. Few input rows (decode): every weight block streams once
// through the ISA's block microkernel, two input rows at a time, in parallel over blocks of 4
// output rows. Many rows (prefill): tiles of the weight are dequantized to fp32 once and
// multiplied by ATen's GEMM, which is compute-bound there and better blocked than a GEMV.
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <vector>

#include "kernels/cpu/linear_microkernels.h"
#include "kernels/linear_w8_args.h"

namespace pt2q {
namespace {

// From this many input rows on, dequantize-then-GEMM beats the block kernel (benchmarks/kernels/
// bench_linear_woq.py on the 2-core AVX-512 VM).
constexpr int64_t kGemmRows = 64;
constexpr int64_t kGemmTile = 64;  // weight rows dequantized per tile (multiple of 4)

at::Tensor packWeightInt8Cpu(const at::Tensor& weight) {
  checkPackWeightInt8(weight);
  const int64_t n = weight.size(0), k = weight.size(1);
  const int64_t kp = roundUp(k, kPackChunk);
  const at::Tensor w = weight.contiguous();
  at::Tensor out = at::zeros(packedWeightInt8Shape(n, k), w.options());
  const int8_t* src = w.const_data_ptr<int8_t>();
  int8_t* dst = out.data_ptr<int8_t>();
  at::parallel_for(0, n, 64, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      int8_t* block = dst + (r / kPackRows) * kp * kPackRows + (r % kPackRows) * kPackChunk;
      for (int64_t c = 0; c * kPackChunk < k; ++c) {
        const int64_t len = std::min(kPackChunk, k - c * kPackChunk);
        std::copy_n(src + r * k + c * kPackChunk, len, block + c * kPackRows * kPackChunk);
      }
    }
  });
  return out;
}

// Rows [n0, n1) of the dequantized weight, (w - zp) * s in fp32, row-major [n1 - n0, kp] (the
// padding columns come out zero). One chunk of 16 codes shares one group, so the inner loop is
// a plain widen-subtract-scale the compiler vectorizes.
void dequantizeRows(const int8_t* packed, int64_t kp, int64_t n0, int64_t n1, const float* s, const float* zp,
                    int64_t groups, int64_t group_chunks, float* out) {
  for (int64_t r = n0; r < n1; ++r) {
    const int8_t* block = packed + (r / kPackRows) * kp * kPackRows + (r % kPackRows) * kPackChunk;
    float* o = out + (r - n0) * kp;
    for (int64_t c = 0; c * kPackChunk < kp; ++c) {
      const int64_t g = r * groups + c / group_chunks;
      const float scale = s[g], zero = zp != nullptr ? zp[g] : 0.0f;
      const int8_t* codes = block + c * kPackRows * kPackChunk;
      for (int64_t l = 0; l < kPackChunk; ++l) o[c * kPackChunk + l] = (static_cast<float>(codes[l]) - zero) * scale;
    }
  }
}

at::Tensor linearW8a16Cpu(const at::Tensor& input, const at::Tensor& packed, const at::Tensor& scales,
                          const c10::optional<at::Tensor>& zero_points, const c10::optional<at::Tensor>& bias) {
  const LinearW8Geometry g = checkLinearW8a16(input, packed, scales, zero_points, bias);
  const int64_t n = g.n, k = g.k, m = g.m, kp = roundUp(k, kPackChunk);
  const int64_t np = roundUp(n, kPackRows);
  const at::Tensor pw = packed.contiguous();
  // Scales (and zero points) padded to whole blocks of 4 rows, fp32.
  at::Tensor s = at::zeros({np, g.groups}, scales.options().dtype(at::kFloat));
  s.slice(0, 0, n).copy_(scales.reshape({n, g.groups}));
  at::Tensor zp;
  if (zero_points.has_value()) {
    zp = at::zeros({np, g.groups}, s.options());
    zp.slice(0, 0, n).copy_(zero_points->reshape({n, g.groups}));
  }
  at::Tensor out = at::empty({m, n}, input.options().dtype(at::kFloat));
  if (m == 0) return out.to(input.scalar_type()).reshape(linearOutputShape(input.sizes(), n));
  const at::Tensor x2 = input.reshape({m, k});

  const int64_t chunks = kp / kPackChunk;
  const int64_t group_chunks = g.groups == 1 ? chunks : g.group_size / kPackChunk;
  if (m >= kGemmRows) {
    at::Tensor xf = at::zeros({m, kp}, out.options());
    xf.slice(1, 0, k).copy_(x2);
    at::parallel_for(0, (n + kGemmTile - 1) / kGemmTile, 1, [&](int64_t t0, int64_t t1) {
      at::Tensor tile = at::empty({kGemmTile, kp}, xf.options());
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t n0 = t * kGemmTile, n1 = std::min(n, n0 + kGemmTile);
        dequantizeRows(pw.const_data_ptr<int8_t>(), kp, n0, n1, s.const_data_ptr<float>(),
                       zp.defined() ? zp.const_data_ptr<float>() : nullptr, g.groups, group_chunks,
                       tile.data_ptr<float>());
        out.slice(1, n0, n1).copy_(at::mm(xf, tile.slice(0, 0, n1 - n0).t()));
      }
    });
  } else {
    // x in fp32, zero-padded to whole chunks: the microkernel reads whole chunks.
    at::Tensor xp = at::zeros({m, kp}, out.options());
    xp.slice(1, 0, k).copy_(x2);
    const auto fn = cpu::linearKernels().w8_block4;
    const int8_t* w = pw.const_data_ptr<int8_t>();
    const float* xs = xp.const_data_ptr<float>();
    const float* sp = s.const_data_ptr<float>();
    float* o = out.data_ptr<float>();
    at::parallel_for(0, np / kPackRows, 8, [&](int64_t b0, int64_t b1) {
      float tmp[2 * kPackRows];
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t rows = std::min(kPackRows, n - b * kPackRows);
        for (int64_t m0 = 0; m0 < m; m0 += 2) {
          const int64_t mx = std::min<int64_t>(2, m - m0);
          fn(w + b * kp * kPackRows, xs + m0 * kp, kp, mx, chunks, group_chunks, sp + b * kPackRows * g.groups,
             g.groups, tmp);
          for (int64_t i = 0; i < mx; ++i) {
            for (int64_t r = 0; r < rows; ++r) o[(m0 + i) * n + b * kPackRows + r] = tmp[i * kPackRows + r];
          }
        }
      }
    });
    if (zp.defined()) {
      // sum_k (w - zp) s x = sum_k w s x - sum_g s zp (sum_{k in g} x)
      const at::Tensor xsum = xp.slice(1, 0, k).reshape({m, g.groups, g.group_size}).sum(-1);  // [m, groups]
      out.sub_(at::mm(xsum, (s * zp).slice(0, 0, n).t()));
    }
  }
  if (bias.has_value()) out.add_(bias->to(at::kFloat));
  return out.to(input.scalar_type()).reshape(linearOutputShape(input.sizes(), n));
}

}  // namespace
}  // namespace pt2q

TORCH_LIBRARY_IMPL(pt2q, CPU, m) {
  m.impl("pack_weight_int8", &pt2q::packWeightInt8Cpu);
  m.impl("linear_w8a16", &pt2q::linearW8a16Cpu);
}
