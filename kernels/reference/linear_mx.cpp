// Reference linear_mx: the weight dequantized by mx_dequantize's reference, the input MX
// fake-quantized, then F.linear in fp32.
#include <torch/library.h>

#include "kernels/linear_mx.h"

namespace pt2q {

at::Tensor linearMxRef(const at::Tensor& input, const at::Tensor& weight_codes, const at::Tensor& weight_scales,
                       c10::string_view weight_format, int64_t block_size, const c10::optional<at::Tensor>& bias,
                       const std::optional<std::string>& input_format, int64_t input_block_size,
                       c10::string_view input_rounding, c10::string_view input_scale_mode,
                       bool input_flush_fp32_subnorms) {
  const LinearMxArgs a = checkLinearMx(input, weight_codes, weight_scales, weight_format, block_size, bias,
                                       input_format, input_block_size, input_rounding, input_scale_mode);
  const at::Tensor w =
      mx::mxDequantizeRef(weight_codes, weight_scales, weight_format, block_size, -1, a.k, at::kFloat);
  const at::Tensor x = input_format.has_value()
                           ? mx::mxFakeQuantizeRef(input, *input_format, input_block_size, -1, input_rounding,
                                                   input_scale_mode, input_flush_fp32_subnorms, std::nullopt)
                           : input;
  const c10::optional<at::Tensor> b = bias.has_value() ? c10::optional<at::Tensor>(bias->to(at::kFloat)) : c10::nullopt;
  return at::linear(x.to(at::kFloat), w, b).to(input.scalar_type());
}

}  // namespace pt2q

TORCH_LIBRARY_IMPL(pt2q, CompositeExplicitAutograd, m) { m.impl("linear_mx", &pt2q::linearMxRef); }
