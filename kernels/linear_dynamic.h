// linear_w8a8 / linear_w4a8 and quantize_per_token_int8: the reference implementations (plain
// ATen, any device), shared by the op registrations and the Python bindings. The arguments are
// the weight-only ops' (kernels/linear_weight_only_args.h).
#pragma once

#include <ATen/ATen.h>

#include <tuple>

namespace pt2q {

/// Per-token asymmetric int8 quantization of input (upcast to fp32): codes int8 (input's
/// shape), scales fp64 and zero points int64 ([..., 1]); quantized_decomposed's
/// choose_qparams_per_token_asymmetric + quantize_per_token, op for op.
std::tuple<at::Tensor, at::Tensor, at::Tensor> quantizePerTokenRef(const at::Tensor& input);

/// Per-tensor int8 quantization of input (as fp32) by torch's choose_qparams.tensor(x, -128,
/// 127, eps, int8) -> quantize_per_tensor.tensor: (codes [input's shape], scale, zero point).
/// NaN or Inf anywhere is an error naming the first row holding one.
std::tuple<at::Tensor, double, int64_t> quantizePerTensorRef(const char* op, const at::Tensor& input, double eps);

/// The dynamic linear in fp64: dequantized per-token (or, with per_tensor_eps, per-tensor)
/// codes times the dequantized weight, plus bias, cast to input's dtype.
at::Tensor linearDynamicRef(const char* op, int bits, const at::Tensor& input, const at::Tensor& packed,
                            const at::Tensor& scales, const c10::optional<at::Tensor>& zero_points,
                            const c10::optional<at::Tensor>& bias, c10::optional<double> per_tensor_eps);

/// quantize_per_token_int8's input: float32 / bfloat16 / float16 with a non-empty last dimension.
void checkPerTokenInput(const at::Tensor& input);

/// "input has NaN or Inf in row r": per-token scales are undefined there.
[[noreturn]] void failNonFiniteToken(const char* op, const at::Tensor& input, int64_t row);

}  // namespace pt2q
