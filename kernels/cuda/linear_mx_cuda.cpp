// CUDA glue of linear_mx. x is fake-quantized by mx_fake_quantize's CUDA kernel when an input
// format is given. Up to kLinearMxGemvMaxRows rows (decode) a GEMV decodes the weight's codes in
// registers (linear_mx_cuda_kernels.h): each weight value mx_dequantize's, summed in fp32 in the
// kernel's order. Otherwise, and for layouts the GEMV does not read (ragged chunks, codes wider
// than 8 bits, unaligned storage), the weight is dequantized by mx_dequantize's CUDA kernel and
// the reference's fp32 matmul runs: the reference's result bit for bit, but the whole fp32 weight
// is written every call. PT2Q_CUDA_LINEAR_MX_GEMV=0 keeps that path for every call (the benchmark's
// A/B).
#include <cstdlib>

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "kernels/cuda/glue.h"
#include "kernels/cuda/linear_mx_cuda_kernels.h"
#include "kernels/linear_mx.h"
#include "kernels/linear_weight_only_args.h"

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
  const at::Tensor x = a.quantize_input ? fake_quantize.call(input, *input_format, input_block_size, -1, input_rounding,
                                                             input_scale_mode, input_flush_fp32_subnorms, std::nullopt)
                                        : input;
  const c10::optional<at::Tensor> b = bias.has_value() ? c10::optional<at::Tensor>(bias->to(at::kFloat)) : c10::nullopt;
  const char* gemv_env = std::getenv("PT2Q_CUDA_LINEAR_MX_GEMV");
  if (a.m >= 1 && a.m <= cuda::kLinearMxGemvMaxRows && !(gemv_env != nullptr && std::atoi(gemv_env) == 0)) {
    const at::Tensor xr = x.reshape({a.m, a.k}).contiguous();
    const at::Tensor codes = weight_codes.contiguous(), scales = weight_scales.contiguous();
    const at::Tensor bf = b.has_value() ? b->contiguous() : at::Tensor();
    at::Tensor y = at::empty({a.m, a.n}, x.options());
    cuda::LinearMxGemv g;
    g.codes = static_cast<const uint8_t*>(codes.const_data_ptr());
    g.row_bytes = a.row_bytes;
    g.scales = scales.const_data_ptr<uint8_t>();
    g.blocks = scales.size(-1);
    g.block = a.block;
    g.packing.bits = a.layout.packed() ? a.layout.bits : static_cast<int>(codes.element_size()) * 8;
    g.packing.per_group = a.layout.per_group;
    g.packing.group_bytes = a.layout.group_bytes;
    g.x = xr.const_data_ptr();
    g.xt = cuda::floatTypeOf(x.scalar_type());
    g.m = a.m, g.n = a.n, g.k = a.k;
    g.bias = bf.defined() ? bf.const_data_ptr<float>() : nullptr;
    g.y = y.data_ptr();
    if (cuda::linearMxGemvTakes(g)) {
      cuda::MxCodeTable table;
      const std::array<float, 256> t = mx::codeTable(a.weight_format, a.layout);
      std::copy(t.begin(), t.end(), table.v);
      cuda::checkLaunch(cuda::linearMxGemv(g, table, at::cuda::getCurrentCUDAStream()), "linear_mx");
      return y.reshape(linearOutputShape(input.sizes(), a.n));
    }
  }
  const at::Tensor w = dequantize.call(weight_codes, weight_scales, weight_format, block_size, -1, a.k, at::kFloat);
  return at::linear(x.to(at::kFloat), w, b).to(input.scalar_type());
}

}  // namespace
}  // namespace pt2q

TORCH_LIBRARY_IMPL(pt2q, CUDA, m) { m.impl("linear_mx", &pt2q::linearMxCuda); }
