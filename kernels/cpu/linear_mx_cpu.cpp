// CPU linear_mx. Few input rows (decode): each thread streams a range of weight rows through the
// vector row kernel (AVX-512 or AVX2, linear_mx_rows_impl.h: codes decoded in registers, never
// stored as floats), up to 4 x rows per pass; codes the kernel does not cover (a ragged tail of
// K, a block size that is not a multiple of 32, formats without a vector decode) go through a
// portable loop that decodes one code at a time as mx_dequantize does (one x row; more rows
// without vector kernels take the tiled path below). Many rows (prefill): 256-row tiles of the
// weight are dequantized by the same decoders and multiplied by ATen's fp32 GEMM (bf16 GEMM for
// bf16 x, from 12 rows), so the float weight never exists whole. MXINT8 weights with MXINT8 x skip all of that from 5 rows:
// integer dot products per block (cpu/x86_avx512/linear_mx_vnni.cpp).
#include <ATen/Parallel.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

#if defined(__x86_64__) || defined(_M_X64)
#include <xmmintrin.h>
#endif

#include "kernels/cpu/linear_microkernels.h"
#include "kernels/cpu/linear_mx_microkernels.h"
#include "kernels/linear_mx.h"
#include "kernels/linear_weight_only_args.h"

namespace pt2q {
namespace {

using cpu::MxUnitKind;

constexpr int64_t kUnit = 32;
constexpr int64_t kMaxKernelRows = 4;  // x rows per pass of the row kernel
constexpr int64_t kGemmRows = 17;      // from this many x rows on, dequantized tiles and a GEMM
constexpr int64_t kGemmRowsBf16 = 12;  // the same for bf16 x, whose GEMM is faster (bench_linear_mx.py)
constexpr int64_t kGemmTile = 256;

// Denormals-are-zero would turn the FP8 decode's subnormal intermediates into zeros.
bool denormalsAreZero() {
#if defined(__x86_64__) || defined(_M_X64)
  return (_mm_getcsr() & 0x0040) != 0;
#else
  return false;
#endif
}

// The vector decode of a format, if it has one.
std::optional<MxUnitKind> unitKind(const mx::ElemFormat& f, const mx::CodeLayout& l) {
  if (f.name == "int8") return MxUnitKind::kInt8;
  if (l.packed() && l.per_group == 2 && l.bits == 4) return MxUnitKind::kNibble;
  if (l.packed() && l.per_group == 4 && l.group_bytes == 3) return MxUnitKind::kSixBit;
  if (f.name == "fp8_e4m3" || f.name == "fp8_e5m2") return MxUnitKind::kFp8;
  return std::nullopt;
}

// Code k of a weight row in any layout of at most 8 bits per code.
inline uint32_t codeAt(const uint8_t* row, int64_t k, const mx::CodeLayout& l) {
  if (!l.packed()) return row[k];
  const int64_t g = k / l.per_group, i = k % l.per_group;
  uint32_t word = row[g * l.group_bytes];
  if (l.group_bytes == 3) word |= (uint32_t(row[g * 3 + 1]) << 8) | (uint32_t(row[g * 3 + 2]) << 16);
  return (word >> (i * l.bits)) & ((1u << l.bits) - 1u);
}

inline float scaleOf(uint8_t s) {
  return s == 255 ? std::numeric_limits<float>::quiet_NaN() : std::ldexp(1.0f, static_cast<int>(s) - 127);
}

// What the kernels need about one weight: its codes, scales, tables and vector kernels.
struct MxWeight {
  const LinearMxArgs* a;
  const uint8_t* codes;
  const uint8_t* scales;
  int64_t nb;                        // scales per row
  std::array<float, 256> table{};    // code -> value before the block scale (codes of <= 8 bits)
  std::array<float, 256> scale_values{};
  float wide_step = 1.0f;            // BFP codes wider than 8 bits: value = code * wide_step
  const cpu::LinearMxKernels* kernels = nullptr;
  cpu::MxLinearRows rows;            // the kernels' view (x fields set per call)
  int64_t k0 = 0;                    // the kernels cover [0, k0) of every row, the loop [k0, k)

  MxWeight(const LinearMxArgs& args, const at::Tensor& c, const at::Tensor& s) : a(&args) {
    const mx::CodeLayout& l = args.layout;
    codes = reinterpret_cast<const uint8_t*>(c.const_data_ptr());
    scales = s.const_data_ptr<uint8_t>();
    nb = s.size(1);
    if (l.bits <= 8) table = mx::codeTable(args.weight_format, l);
    wide_step = std::ldexp(1.0f, -args.weight_format.stored_mbits());
    const auto kind = unitKind(args.weight_format, l);
    kernels = kind ? cpu::linearMxKernels(*kind) : nullptr;
    if (kind == MxUnitKind::kFp8 && denormalsAreZero()) kernels = nullptr;
    const float block_mult = kind == MxUnitKind::kInt8 ? table[1] : 1.0f;  // int8: the code step 2^-6
    for (int v = 0; v < 256; ++v) scale_values[v] = scaleOf(static_cast<uint8_t>(v)) * block_mult;
    const int64_t units = kernels != nullptr && args.block % kUnit == 0 ? args.k / kUnit : 0;
    k0 = units * kUnit;
    if (units == 0) return;
    rows.kind = *kind;
    rows.codes = codes;
    rows.row_bytes = args.row_bytes;
    rows.scales = scales;
    rows.scale_stride = nb;
    rows.scale_values = scale_values.data();
    rows.units = units;
    rows.units_per_block = args.block / kUnit;
    rows.table = *kind == MxUnitKind::kNibble || *kind == MxUnitKind::kSixBit ? table.data() : nullptr;
    const bool e4m3 = args.weight_format.name == "fp8_e4m3";
    rows.fp8_shift = e4m3 ? 20 : 21;
    rows.fp8_mult = std::ldexp(1.0f, 127 - (e4m3 ? 7 : 15));
    rows.x_stride = k0;
  }

  // The value of code kk of row n, before its block scale.
  float value(int64_t n, int64_t kk) const {
    const bool wide = a->layout.bits > 8;
    const uint8_t* rp = codes + n * a->row_bytes * (wide ? 2 : 1);
    return wide ? static_cast<float>(reinterpret_cast<const int16_t*>(rp)[kk]) * wide_step
                : table[codeAt(rp, kk, a->layout)];
  }

  // Element kk of row n as mx_dequantize gives it (value times scale, in fp32).
  float at(int64_t n, int64_t kk) const { return value(n, kk) * scaleOf(scales[n * nb + kk / a->block]); }

  // Rows [n0, n1) dequantized into out [n1 - n0, k] (ld k).
  void decode(int64_t n0, int64_t n1, float* out) const {
    const int64_t k = a->k;
    if (k0 > 0) kernels->decode(rows, n0, n1, out, k);
    for (int64_t n = n0; n < n1; ++n) {
      for (int64_t kk = k0; kk < k; ++kk) out[(n - n0) * k + kk] = at(n, kk);
    }
  }
};

// bf16 x: every MX weight value of at most 8 significant bits is a bf16 exactly, so ATen's bf16
// GEMM (fp32 accumulation, one rounding to bf16: what this op returns for bf16 x) gives the fp32
// path's result at bf16 speed; a bf16 bias joins before that rounding. Only where that GEMM is
// native (cpu::nativeBf16Gemm): without AVX512_BF16 it is slower than the fp32 one.
bool bf16Gemm(const at::Tensor& input, const LinearMxArgs& a, const c10::optional<at::Tensor>& bias) {
  return input.scalar_type() == at::kBFloat16 && a.layout.bits <= 8 && cpu::nativeBf16Gemm() &&
         (!bias.has_value() || bias->scalar_type() == at::kBFloat16);
}

// MXINT8 weights and MXINT8 x on the same blocks along K: the integer kernel (its contract and why
// it is shaped so: MxInt8Gemm in cpu/linear_mx_microkernels.h), from this many x rows.
constexpr int64_t kInt8GemmRows = 5;

bool int8GemmApplies(const LinearMxArgs& a, const std::optional<std::string>& input_format, int64_t input_block_size) {
  if (!input_format.has_value() || a.weight_format.name != "int8" || cpu::linearMxInt8Gemm() == nullptr) return false;
  mx::ElemFormat f;
  if (!mx::parseElemFormat(*input_format, &f) || f.name != "int8") return false;
  const int64_t input_block = input_block_size == 0 ? a.k : input_block_size;
  return input_block == a.block && a.block % 4 == 0 && a.k % 4 == 0 && a.block <= cpu::kMxInt8GemmMaxBlock;
}

// x quantized to MXINT8 codes (mx_quantize, the same numerics as linearMxInput's fake quantization)
// and packed as MxInt8Gemm wants; out [m, n] fp32, without bias.
at::Tensor linearMxInt8(const at::Tensor& input, const LinearMxArgs& a, const at::Tensor& codes,
                        const at::Tensor& scales, int64_t input_block_size, c10::string_view rounding,
                        c10::string_view scale_mode, bool flush) {
  static const auto quantize =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("pt2q::mx_quantize", "")
          .typed<std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, c10::string_view, int64_t, int64_t,
                                                    c10::string_view, c10::string_view, bool, std::optional<int64_t>)>();
  const int64_t m = a.m, n = a.n, k = a.k, k4 = a.k / 4, groups = (m + 15) / 16;
  auto [xc_, xs_] = quantize.call(input.reshape({m, k}), "int8", input_block_size, -1, rounding, scale_mode, flush,
                                  std::nullopt);
  const at::Tensor xc = xc_.contiguous(), xs = xs_.contiguous();
  const int64_t blocks = xs.size(1);
  std::array<float, 256> sv{};
  for (int e = 0; e < 256; ++e) sv[e] = scaleOf(static_cast<uint8_t>(e)) * (1.0f / 64);  // the int8 code step
  const auto bytes = at::TensorOptions().dtype(at::kByte);
  at::Tensor xu = at::empty({groups * k4 * 64}, bytes);
  at::Tensor sx = at::zeros({groups * blocks * 16}, at::TensorOptions().dtype(at::kFloat));
  uint32_t* xw = reinterpret_cast<uint32_t*>(xu.data_ptr<uint8_t>());
  float* sxp = sx.data_ptr<float>();
  const int8_t* xcp = xc.const_data_ptr<int8_t>();
  const uint8_t* xsp = xs.const_data_ptr<uint8_t>();
  at::parallel_for(0, groups, 1, [&](int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1; ++g) {
      const int64_t rows = std::min<int64_t>(16, m - g * 16);
      for (int64_t c = 0; c < k4; ++c) {
        uint32_t* dst = xw + (g * k4 + c) * 16;
        for (int64_t l = 0; l < 16; ++l) {
          uint32_t word = 0;  // padding rows: code 0
          if (l < rows) std::memcpy(&word, xcp + (g * 16 + l) * k + 4 * c, 4);
          dst[l] = word ^ 0x80808080u;
        }
      }
      for (int64_t l = 0; l < rows; ++l) {
        for (int64_t b = 0; b < blocks; ++b) sxp[(g * blocks + b) * 16 + l] = sv[xsp[(g * 16 + l) * blocks + b]];
      }
    }
  });
  at::Tensor out = at::empty({m, n}, at::TensorOptions().dtype(at::kFloat));
  cpu::MxInt8Gemm g;
  g.xu = xu.const_data_ptr<uint8_t>();
  g.sx = sxp;
  g.groups = groups;
  g.w = codes.const_data_ptr<int8_t>();
  g.k = k;
  g.block = a.block;
  g.blocks = blocks;
  g.w_scales = scales.const_data_ptr<uint8_t>();
  g.scale_stride = scales.size(1);
  g.scale_values = sv.data();
  g.out = out.data_ptr<float>();
  g.m = m;
  g.ldo = n;
  const auto gemm = cpu::linearMxInt8Gemm();
  constexpr int64_t kCols = 12;  // a multiple of the kernel's column tiles, so only the last range has a tail
  at::parallel_for(0, (n + kCols - 1) / kCols, 1, [&](int64_t t0, int64_t t1) {
    gemm(g, t0 * kCols, std::min(n, t1 * kCols));
  });
  return out;
}

at::Tensor linearMxCpu(const at::Tensor& input, const at::Tensor& weight_codes, const at::Tensor& weight_scales,
                       c10::string_view weight_format, int64_t block_size, const c10::optional<at::Tensor>& bias,
                       const std::optional<std::string>& input_format, int64_t input_block_size,
                       c10::string_view input_rounding, c10::string_view input_scale_mode,
                       bool input_flush_fp32_subnorms) {
  const LinearMxArgs a = checkLinearMx(input, weight_codes, weight_scales, weight_format, block_size, bias,
                                       input_format, input_block_size, input_rounding, input_scale_mode);
  const int64_t n = a.n, k = a.k, m = a.m;
  if (m >= kInt8GemmRows && n > 0 && k > 0 && int8GemmApplies(a, input_format, input_block_size)) {
    at::Tensor out = linearMxInt8(input, a, weight_codes.contiguous(), weight_scales.contiguous(), input_block_size,
                                  input_rounding, input_scale_mode, input_flush_fp32_subnorms);
    if (bias.has_value()) out.add_(bias->to(at::kFloat));
    return out.to(input.scalar_type()).reshape(linearOutputShape(input.sizes(), n));
  }
  const at::Tensor xq = linearMxInput(input, input_format, input_block_size, input_rounding, input_scale_mode,
                                      input_flush_fp32_subnorms);
  const at::Tensor x = xq.reshape({m, k}).to(at::kFloat).contiguous();
  at::Tensor out = at::zeros({m, n}, x.options());
  const at::Tensor codes = weight_codes.contiguous();
  const at::Tensor scales = weight_scales.contiguous();
  const bool bf16 = bf16Gemm(input, a, bias);
  const MxWeight w(a, codes, scales);
  // Without a vector kernel (k0 == 0) the row loop decodes every code once per x row and adds
  // into strided outputs: 1 s for 16 rows of a 4096 x 4096 weight, where decoding the weight
  // once for the GEMM takes 60 ms.
  if (m == 0 || n == 0 || k == 0) {
    // nothing to sum
  } else if (m >= (bf16 ? kGemmRowsBf16 : kGemmRows) || (w.k0 == 0 && m > 1)) {
    const at::Tensor xb = bf16 ? xq.reshape({m, k}).contiguous() : at::Tensor();
    at::Tensor tile = at::empty({std::min(n, kGemmTile), k}, x.options());
    for (int64_t n0 = 0; n0 < n; n0 += kGemmTile) {
      const int64_t n1 = std::min(n, n0 + kGemmTile);
      float* t = tile.data_ptr<float>();
      at::parallel_for(n0, n1, 8, [&](int64_t r0, int64_t r1) { w.decode(r0, r1, t + (r0 - n0) * k); });
      const at::Tensor wt = tile.slice(0, 0, n1 - n0);
      if (!bf16) {
        out.slice(1, n0, n1).copy_(at::mm(x, wt.t()));
      } else if (bias.has_value()) {
        out.slice(1, n0, n1).copy_(at::addmm(bias->slice(0, n0, n1), xb, wt.to(at::kBFloat16).t()));
      } else {
        out.slice(1, n0, n1).copy_(at::mm(xb, wt.to(at::kBFloat16).t()));
      }
    }
    if (bf16) return out.to(at::kBFloat16).reshape(linearOutputShape(input.sizes(), n));
  } else {
    const int64_t k0 = w.k0;
    // x permuted unit by unit into the kernels' lane order.
    at::Tensor xp;
    if (k0 > 0) {
      int perm[kUnit];
      for (int j = 0; j < kUnit; ++j) perm[j] = cpu::mxUnitElement(w.rows.kind, j);
      xp = at::empty({m, k0}, x.options());
      const float* xs = x.const_data_ptr<float>();
      float* xd = xp.data_ptr<float>();
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t u = 0; u < k0 / kUnit; ++u) {
          for (int j = 0; j < kUnit; ++j) xd[i * k0 + u * kUnit + j] = xs[i * k + u * kUnit + perm[j]];
        }
      }
    }
    float* o = out.data_ptr<float>();
    const float* xs = x.const_data_ptr<float>();
    at::parallel_for(0, n, 16, [&](int64_t n0, int64_t n1) {
      std::vector<float> tmp(static_cast<size_t>((n1 - n0) * kMaxKernelRows));
      for (int64_t i0 = 0; i0 < m && k0 > 0; i0 += kMaxKernelRows) {
        cpu::MxLinearRows r = w.rows;
        r.m = std::min(kMaxKernelRows, m - i0);
        r.x = xp.const_data_ptr<float>() + i0 * k0;
        w.kernels->rows(r, n0, n1, tmp.data());
        for (int64_t row = n0; row < n1; ++row) {
          for (int64_t i = 0; i < r.m; ++i) o[(i0 + i) * n + row] = tmp[(row - n0) * r.m + i];
        }
      }
      for (int64_t row = n0; row < n1; ++row) {
        for (int64_t kk = k0; kk < k; ++kk) {
          const float wv = w.at(row, kk);
          for (int64_t i = 0; i < m; ++i) o[i * n + row] += wv * xs[i * k + kk];
        }
      }
    });
  }
  if (bias.has_value()) out.add_(bias->to(at::kFloat));
  return out.to(input.scalar_type()).reshape(linearOutputShape(input.sizes(), n));
}

}  // namespace

namespace {

// decode(r0, r1, buf) fills rows [r0, r1) of out [R, k] as fp32, in parallel; bf16 / fp16 outputs
// are decoded into a small buffer and rounded by ATen's vectorized conversion, so no fp32 copy of
// the whole tensor is made.
template <typename Decode>
void decodeInto(at::Tensor& out, int64_t rows, int64_t k, const Decode& decode) {
  if (out.scalar_type() == at::kFloat) {
    float* o = out.data_ptr<float>();
    at::parallel_for(0, rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(k, 1)),
                     [&](int64_t r0, int64_t r1) { decode(r0, r1, o + r0 * k); });
    return;
  }
  const int64_t chunk = std::max<int64_t>(1, 65536 / std::max<int64_t>(k, 1));  // 256 KiB of fp32 per conversion
  at::parallel_for(0, rows, chunk, [&](int64_t r0, int64_t r1) {
    std::vector<float> buf(static_cast<size_t>(chunk * k));
    for (int64_t c0 = r0; c0 < r1; c0 += chunk) {
      const int64_t c1 = std::min(r1, c0 + chunk);
      decode(c0, c1, buf.data());
      out.slice(0, c0, c1).copy_(at::from_blob(buf.data(), {c1 - c0, k}, at::TensorOptions().dtype(at::kFloat)));
    }
  });
}

}  // namespace

void mxDecodeRowsCpu(const LinearMxArgs& a, const at::Tensor& codes, const at::Tensor& scales, at::Tensor& out) {
  const MxWeight w(a, codes, scales);
  decodeInto(out, a.n, a.k, [&](int64_t r0, int64_t r1, float* o) { w.decode(r0, r1, o); });
}

bool mxDecodeInnerCpu(const LinearMxArgs& a, const at::Tensor& codes, const at::Tensor& scales, int64_t len,
                      int64_t blocks, int64_t block, int64_t qn, at::Tensor& out) {
  LinearMxArgs unit = a;
  unit.block = kUnit;  // the kernels' units follow the codes' rows; each element has its own scale
  const MxWeight w(unit, codes, scales);
  if (w.k0 == 0) return false;
  cpu::MxInnerRows g;
  g.len = len;
  g.blocks = blocks;
  g.block = block;
  g.qn = qn;
  g.len_last = a.k;
  const int64_t k = a.k, k0 = w.k0;
  decodeInto(out, a.n, k, [&](int64_t r0, int64_t r1, float* o) {
    w.kernels->decode_inner(w.rows, g, r0, r1, o, k);
    for (int64_t r = r0; r < r1 && k0 < k; ++r) {
      const int64_t q = r % qn, l = (r / qn) % len, oo = r / qn / len;
      const uint8_t* srow = w.scales + ((oo * blocks + l / block) * qn + q) * k;
      for (int64_t j = k0; j < k; ++j) o[(r - r0) * k + j] = w.value(r, j) * scaleOf(srow[j]);
    }
  });
  return true;
}

}  // namespace pt2q

TORCH_LIBRARY_IMPL(pt2q, CPU, m) { m.impl("linear_mx", &pt2q::linearMxCpu); }
