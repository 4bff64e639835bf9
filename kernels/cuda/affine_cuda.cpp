// CUDA glue of the affine ops: the shared checks, then the torch-free kernels on the current
// stream. Built only against a CUDA build of torch.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "kernels/affine_ops.h"
#include "kernels/cuda/affine_cuda_kernels.h"
#include "kernels/cuda/glue.h"

namespace pt2q {
namespace {

cuda::CodeType codeType(at::ScalarType t) {
  switch (t) {
    case at::kChar: return cuda::CodeType::kI8;
    case at::kByte: return cuda::CodeType::kU8;
    case at::kShort: return cuda::CodeType::kI16;
    case at::kUInt16: return cuda::CodeType::kU16;
    default: return cuda::CodeType::kI32;
  }
}

cuda::Layout cudaLayout(const BlockLayout& l, const char* op) {
  TORCH_CHECK_VALUE(l.sizes.size() <= static_cast<size_t>(cuda::kMaxDims), op, ": CUDA kernels take at most ",
                    cuda::kMaxDims, " dimensions, got ", l.sizes.size());
  cuda::Layout c{};
  c.ndim = static_cast<int>(l.sizes.size());
  for (int d = 0; d < c.ndim; ++d) {
    c.sizes[d] = l.sizes[d];
    c.block[d] = l.block[d];
    c.qstride[d] = l.qstride[d];
  }
  return c;
}

cuda::Params cudaParams(const AffineArgs& a) {
  return cuda::Params{a.range.qmin, a.range.qmax, cuda::domainOf(a.domain)};
}


const float* zpPtr(const AffineArgs& a) {
  return a.zp.defined() ? a.zp.const_data_ptr<float>() : nullptr;
}

at::Tensor quantizeAffineCuda(const at::Tensor& input, at::IntArrayRef block_size, const at::Tensor& scale,
                              const std::optional<at::Tensor>& zero_point, at::ScalarType output_dtype,
                              std::optional<int64_t> quant_min, std::optional<int64_t> quant_max,
                              c10::string_view zero_point_domain) {
  const char* op = "quantize_affine";
  c10::cuda::CUDAGuard guard(input.device());
  const AffineCall c = prepareQuantize(input, block_size, scale, zero_point, output_dtype, quant_min, quant_max,
                                       zero_point_domain);
  cuda::checkLaunch(cuda::quantizeAffine(c.in.const_data_ptr(), cuda::floatTypeOf(c.in.scalar_type()), c.out.data_ptr(),
                                   codeType(c.out.scalar_type()), c.in.numel(), cudaLayout(c.args.layout, op),
                                   c.args.scale.const_data_ptr<float>(), zpPtr(c.args), cudaParams(c.args),
                                   at::cuda::getCurrentCUDAStream()),
              op);
  return c.out;
}

at::Tensor dequantizeAffineCuda(const at::Tensor& input, at::IntArrayRef block_size, const at::Tensor& scale,
                                const std::optional<at::Tensor>& zero_point, at::ScalarType input_dtype,
                                std::optional<int64_t> quant_min, std::optional<int64_t> quant_max,
                                c10::string_view zero_point_domain, at::ScalarType output_dtype) {
  const char* op = "dequantize_affine";
  c10::cuda::CUDAGuard guard(input.device());
  const AffineCall c = prepareDequantize(input, block_size, scale, zero_point, input_dtype, quant_min, quant_max,
                                         zero_point_domain, output_dtype);
  cuda::checkLaunch(cuda::dequantizeAffine(c.in.const_data_ptr(), codeType(c.in.scalar_type()), c.out.data_ptr(),
                                     cuda::floatTypeOf(output_dtype), c.in.numel(), cudaLayout(c.args.layout, op),
                                     c.args.scale.const_data_ptr<float>(), zpPtr(c.args), cudaParams(c.args),
                                     at::cuda::getCurrentCUDAStream()),
              op);
  return c.out;
}

std::tuple<at::Tensor, at::Tensor> fakeQuantizeCuda(const at::Tensor& input, at::IntArrayRef block_size,
                                                    const at::Tensor& scale,
                                                    const std::optional<at::Tensor>& zero_point,
                                                    at::ScalarType quant_dtype, std::optional<int64_t> quant_min,
                                                    std::optional<int64_t> quant_max,
                                                    c10::string_view zero_point_domain, bool want_mask) {
  const char* op = "fake_quantize_affine";
  c10::cuda::CUDAGuard guard(input.device());
  const AffineCall c = prepareFakeQuantize(input, block_size, scale, zero_point, quant_dtype, quant_min, quant_max,
                                           zero_point_domain, want_mask);
  cuda::checkLaunch(cuda::fakeQuantizeAffine(c.in.const_data_ptr(), cuda::floatTypeOf(c.in.scalar_type()), c.out.data_ptr(),
                                       want_mask ? c.mask.data_ptr<bool>() : nullptr, c.in.numel(),
                                       cudaLayout(c.args.layout, op), c.args.scale.const_data_ptr<float>(),
                                       zpPtr(c.args), cudaParams(c.args), at::cuda::getCurrentCUDAStream()),
              op);
  return {c.out, c.mask};
}

at::Tensor fakeQuantizeAffineCuda(const at::Tensor& input, at::IntArrayRef block_size, const at::Tensor& scale,
                                  const std::optional<at::Tensor>& zero_point, at::ScalarType quant_dtype,
                                  std::optional<int64_t> quant_min, std::optional<int64_t> quant_max,
                                  c10::string_view zero_point_domain) {
  return std::get<0>(fakeQuantizeCuda(input, block_size, scale, zero_point, quant_dtype, quant_min, quant_max,
                                      zero_point_domain, false));
}

std::tuple<at::Tensor, at::Tensor> fakeQuantizeAffineCachemaskCuda(
    const at::Tensor& input, at::IntArrayRef block_size, const at::Tensor& scale,
    const std::optional<at::Tensor>& zero_point, at::ScalarType quant_dtype, std::optional<int64_t> quant_min,
    std::optional<int64_t> quant_max, c10::string_view zero_point_domain) {
  return fakeQuantizeCuda(input, block_size, scale, zero_point, quant_dtype, quant_min, quant_max,
                          zero_point_domain, true);
}

}  // namespace
}  // namespace pt2q

// choose_qparams_affine and the int4 packing ops use the reference (CompositeExplicitAutograd)
// on CUDA until issue #8 gives them kernels.
TORCH_LIBRARY_IMPL(pt2q, CUDA, m) {
  m.impl("quantize_affine", &pt2q::quantizeAffineCuda);
  m.impl("dequantize_affine", &pt2q::dequantizeAffineCuda);
  m.impl("fake_quantize_affine", &pt2q::fakeQuantizeAffineCuda);
  m.impl("fake_quantize_affine_cachemask", &pt2q::fakeQuantizeAffineCachemaskCuda);
}
