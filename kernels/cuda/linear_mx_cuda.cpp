// CUDA glue of linear_mx. Not yet a fused kernel: the weight is dequantized by mx_dequantize's
// CUDA kernel and x fake-quantized by mx_fake_quantize's (both bit-identical to the CPU and to the
// reference), then the fp32 matmul the reference runs. The reference's result, bit for bit, from
// three kernels and a cuBLAS call instead of the reference's chain of elementwise ATen ops; it
// still writes the whole fp32 weight every call (a fused GEMV over the MX codes is issue 8's).
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "kernels/linear_mx.h"

namespace pt2q {
namespace {

at::Tensor linearMxCuda(const at::Tensor& input, const at::Tensor& weight_codes, const at::Tensor& weight_scales,
                        c10::string_view weight_format, int64_t block_size, const c10::optional<at::Tensor>& bias,
                        const std::optional<std::string>& input_format, int64_t input_block_size,
                        c10::string_view input_rounding, c10::string_view input_scale_mode,
                        bool input_flush_fp32_subnorms) {
  const LinearMxArgs a = checkLinearMx(input, weight_codes, weight_scales, weight_format, block_size, bias,
                                       input_format, input_block_size, input_rounding, input_scale_mode);
  const c10::cuda::CUDAGuard guard(input.device());
  static const auto dequantize =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("pt2q::mx_dequantize", "")
          .typed<at::Tensor(const at::Tensor&, const at::Tensor&, c10::string_view, int64_t, int64_t,
                            std::optional<int64_t>, at::ScalarType)>();
  static const auto fake_quantize =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("pt2q::mx_fake_quantize", "")
          .typed<at::Tensor(const at::Tensor&, c10::string_view, int64_t, int64_t, c10::string_view, c10::string_view,
                            bool, std::optional<int64_t>)>();
  const at::Tensor w = dequantize.call(weight_codes, weight_scales, weight_format, block_size, -1, a.k, at::kFloat);
  const at::Tensor x = a.quantize_input ? fake_quantize.call(input, *input_format, input_block_size, -1, input_rounding,
                                                             input_scale_mode, input_flush_fp32_subnorms, std::nullopt)
                                        : input;
  const c10::optional<at::Tensor> b = bias.has_value() ? c10::optional<at::Tensor>(bias->to(at::kFloat)) : c10::nullopt;
  return at::linear(x.to(at::kFloat), w, b).to(input.scalar_type());
}

}  // namespace
}  // namespace pt2q

TORCH_LIBRARY_IMPL(pt2q, CUDA, m) { m.impl("linear_mx", &pt2q::linearMxCuda); }
