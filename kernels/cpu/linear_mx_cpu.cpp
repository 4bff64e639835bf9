// CPU linear_mx. Few input rows (decode): each thread streams a range of weight rows through the
// AVX-512 row kernel (codes decoded in registers, never stored as floats), up to 4 x rows per
// pass; codes the kernel does not cover (a ragged tail of K, a block size that is not a multiple
// of 32, formats without a vector decode) go through a portable loop that decodes one code at a
// time as mx_dequantize does. Many rows (prefill): 256-row tiles of the weight are dequantized
// (mx_dequantize) and multiplied by ATen's fp32 GEMM, so the float weight never exists whole.
#include <ATen/Parallel.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <array>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#if defined(__x86_64__) || defined(_M_X64)
#include <xmmintrin.h>
#endif

#include "kernels/cpu/linear_mx_microkernels.h"
#include "kernels/linear_mx.h"
#include "kernels/linear_weight_only_args.h"

namespace pt2q {
namespace {

using cpu::MxUnitKind;

constexpr int64_t kUnit = 32;
constexpr int64_t kMaxKernelRows = 4;  // x rows per pass of the row kernel
constexpr int64_t kGemmRows = 17;      // from this many x rows on, dequantized tiles and a GEMM
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

at::Tensor dequantizeRows(const at::Tensor& codes, const at::Tensor& scales, c10::string_view format, int64_t block,
                          int64_t k) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("pt2q::mx_dequantize", "")
                             .typed<at::Tensor(const at::Tensor&, const at::Tensor&, c10::string_view, int64_t,
                                               int64_t, std::optional<int64_t>, at::ScalarType)>();
  return op.call(codes, scales, format, block, -1, k, at::kFloat);
}

at::Tensor linearMxCpu(const at::Tensor& input, const at::Tensor& weight_codes, const at::Tensor& weight_scales,
                       c10::string_view weight_format, int64_t block_size, const c10::optional<at::Tensor>& bias,
                       const std::optional<std::string>& input_format, int64_t input_block_size,
                       c10::string_view input_rounding, c10::string_view input_scale_mode,
                       bool input_flush_fp32_subnorms) {
  const LinearMxArgs a = checkLinearMx(input, weight_codes, weight_scales, weight_format, block_size, bias,
                                       input_format, input_block_size, input_rounding, input_scale_mode);
  const int64_t n = a.n, k = a.k, m = a.m;
  const at::Tensor xq = linearMxInput(input, input_format, input_block_size, input_rounding, input_scale_mode,
                                      input_flush_fp32_subnorms);
  const at::Tensor x = xq.reshape({m, k}).to(at::kFloat).contiguous();
  at::Tensor out = at::zeros({m, n}, x.options());
  const at::Tensor codes = weight_codes.contiguous();
  const at::Tensor scales = weight_scales.contiguous();
  if (m > 0 && n > 0 && m >= kGemmRows) {
    for (int64_t n0 = 0; n0 < n; n0 += kGemmTile) {
      const int64_t n1 = std::min(n, n0 + kGemmTile);
      const at::Tensor w = dequantizeRows(codes.slice(0, n0, n1), scales.slice(0, n0, n1), weight_format, block_size, k);
      out.slice(1, n0, n1).copy_(at::mm(x, w.t()));
    }
  } else if (m > 0 && n > 0 && k > 0) {
    const mx::CodeLayout& l = a.layout;
    const auto kind = unitKind(a.weight_format, l);
    cpu::LinearMxRowsFn kernel = kind ? cpu::linearMxRowsKernel(*kind) : nullptr;
    if (kind == MxUnitKind::kFp8 && denormalsAreZero()) kernel = nullptr;
    const int64_t units = kernel != nullptr && a.block % kUnit == 0 ? k / kUnit : 0;
    const int64_t k0 = units * kUnit;  // the portable loop covers [k0, k)
    const bool wide = l.bits > 8;      // BFP codes stored as int16
    const std::array<float, 256> table = wide ? std::array<float, 256>{} : mx::codeTable(a.weight_format, l);
    const float wide_step = std::ldexp(1.0f, -a.weight_format.stored_mbits());
    std::array<float, 256> scale_values;
    const float block_mult = kind == MxUnitKind::kInt8 ? table[1] : 1.0f;  // int8: the code step 2^-6
    for (int s = 0; s < 256; ++s) scale_values[s] = scaleOf(static_cast<uint8_t>(s)) * block_mult;
    const auto* cp = reinterpret_cast<const uint8_t*>(codes.const_data_ptr());
    const uint8_t* sp = scales.const_data_ptr<uint8_t>();
    const int64_t nb = scales.size(1);
    // x permuted unit by unit into the kernel's lane order.
    at::Tensor xp;
    cpu::MxLinearRows rows;
    if (units > 0) {
      int perm[kUnit];
      for (int j = 0; j < kUnit; ++j) perm[j] = cpu::mxUnitElement(*kind, j);
      xp = at::empty({m, k0}, x.options());
      const float* xs = x.const_data_ptr<float>();
      float* xd = xp.data_ptr<float>();
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t u = 0; u < units; ++u) {
          for (int j = 0; j < kUnit; ++j) xd[i * k0 + u * kUnit + j] = xs[i * k + u * kUnit + perm[j]];
        }
      }
      rows.kind = *kind;
      rows.codes = cp;
      rows.row_bytes = a.row_bytes;
      rows.scales = sp;
      rows.scale_stride = nb;
      rows.scale_values = scale_values.data();
      rows.units = units;
      rows.units_per_block = a.block / kUnit;
      rows.table = *kind == MxUnitKind::kNibble || *kind == MxUnitKind::kSixBit ? table.data() : nullptr;
      const bool e4m3 = a.weight_format.name == "fp8_e4m3";
      rows.fp8_shift = e4m3 ? 20 : 21;
      rows.fp8_mult = std::ldexp(1.0f, 127 - (e4m3 ? 7 : 15));
      rows.x_stride = k0;
    }
    float* o = out.data_ptr<float>();
    const float* xs = x.const_data_ptr<float>();
    at::parallel_for(0, n, 16, [&](int64_t n0, int64_t n1) {
      std::vector<float> tmp(static_cast<size_t>((n1 - n0) * kMaxKernelRows));
      for (int64_t i0 = 0; i0 < m && units > 0; i0 += kMaxKernelRows) {
        cpu::MxLinearRows r = rows;
        r.m = std::min(kMaxKernelRows, m - i0);
        r.x = xp.const_data_ptr<float>() + i0 * k0;
        kernel(r, n0, n1, tmp.data());
        for (int64_t row = n0; row < n1; ++row) {
          for (int64_t i = 0; i < r.m; ++i) o[(i0 + i) * n + row] = tmp[(row - n0) * r.m + i];
        }
      }
      if (k0 == k) return;
      for (int64_t row = n0; row < n1; ++row) {
        const uint8_t* rp = cp + row * a.row_bytes * (wide ? 2 : 1);
        for (int64_t kk = k0; kk < k; ++kk) {
          const float v = wide ? static_cast<float>(reinterpret_cast<const int16_t*>(rp)[kk]) * wide_step
                               : table[codeAt(rp, kk, l)];
          const float w = v * scaleOf(sp[row * nb + kk / a.block]);
          for (int64_t i = 0; i < m; ++i) o[i * n + row] += w * xs[i * k + kk];
        }
      }
    });
  }
  if (bias.has_value()) out.add_(bias->to(at::kFloat));
  return out.to(input.scalar_type()).reshape(linearOutputShape(input.sizes(), n));
}

}  // namespace
}  // namespace pt2q

TORCH_LIBRARY_IMPL(pt2q, CPU, m) { m.impl("linear_mx", &pt2q::linearMxCpu); }
