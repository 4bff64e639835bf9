// pt2q::linear_mx: a linear whose weight is held as MX codes + E8M0 scales (mx_quantize's storage
// of a [N, K] weight blocked along K) and whose input is optionally MX fake-quantized along K:
//   y = F.linear(mx_fake_quantize(x, input_format, ...) or x,
//                mx_dequantize(weight_codes, weight_scales, weight_format, block_size, -1, K), bias)
// accumulated in fp32, returned in x's dtype. Shared by the reference, CPU and Meta kernels.
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <string>

#include "kernels/mx/mx_args.h"

namespace pt2q {

struct LinearMxArgs {
  mx::ElemFormat weight_format;
  mx::CodeLayout layout;
  int64_t n = 0, k = 0, m = 0;
  int64_t block = 0;       // weight block size along K (0 resolved to K)
  int64_t row_bytes = 0;   // bytes of one weight row's codes
  bool quantize_input = false;
};

/// Dtypes and ranks only (the Meta kernel under symbolic shapes).
void checkLinearMxTypes(const at::Tensor& input, const at::Tensor& weight_codes, const at::Tensor& weight_scales,
                        c10::string_view weight_format, const std::optional<std::string>& input_format,
                        c10::string_view input_rounding, c10::string_view input_scale_mode);

/// Every check; errors name linear_mx, the argument and what was expected.
LinearMxArgs checkLinearMx(const at::Tensor& input, const at::Tensor& weight_codes, const at::Tensor& weight_scales,
                           c10::string_view weight_format, int64_t block_size, const c10::optional<at::Tensor>& bias,
                           const std::optional<std::string>& input_format, int64_t input_block_size,
                           c10::string_view input_rounding, c10::string_view input_scale_mode);

/// x, MX fake-quantized along its last axis when input_format is given (mx_fake_quantize through
/// the dispatcher), in x's dtype.
at::Tensor linearMxInput(const at::Tensor& input, const std::optional<std::string>& input_format,
                         int64_t input_block_size, c10::string_view input_rounding, c10::string_view input_scale_mode,
                         bool input_flush_fp32_subnorms);

/// CPU: every row of an MX weight (codes [N, row_bytes], scales [N, blocks], `a`'s geometry)
/// dequantized into out [N, K] of `out`'s dtype (fp32, bf16, fp16) through linear_mx's
/// decoders, in parallel; the values mx_dequantize gives (kernels/cpu/linear_mx_cpu.cpp).
void mxDecodeRowsCpu(const LinearMxArgs& a, const at::Tensor& codes, const at::Tensor& scales, at::Tensor& out);
/// The same for blocks along an earlier axis (each element its own scale byte): `a.n` code rows of
/// `a.k` elements, the blocked axis of length `len` in `blocks` blocks of `block`, `qn` code rows
/// per position of it. Returns false (nothing written) where the vector decoders do not apply.
bool mxDecodeInnerCpu(const LinearMxArgs& a, const at::Tensor& codes, const at::Tensor& scales, int64_t len,
                      int64_t blocks, int64_t block, int64_t qn, at::Tensor& out);

/// Reference implementation (plain ATen: dequantize, then F.linear in fp32);
/// kernels/reference/linear_mx.cpp.
at::Tensor linearMxRef(const at::Tensor& input, const at::Tensor& weight_codes, const at::Tensor& weight_scales,
                       c10::string_view weight_format, int64_t block_size, const c10::optional<at::Tensor>& bias,
                       const std::optional<std::string>& input_format, int64_t input_block_size,
                       c10::string_view input_rounding, c10::string_view input_scale_mode,
                       bool input_flush_fp32_subnorms);

}  // namespace pt2q
