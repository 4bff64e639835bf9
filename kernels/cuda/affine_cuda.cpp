// CUDA glue of the affine ops: the shared checks, then the torch-free kernels on the current
// stream. Built only against a CUDA build of torch.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "kernels/affine_ops.h"
#include "kernels/cuda/affine_cuda_kernels.h"

namespace pt2q {
namespace {

cuda::FloatType floatType(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return cuda::FloatType::kF32;
    case at::kBFloat16: return cuda::FloatType::kBF16;
    default: return cuda::FloatType::kF16;
  }
}

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
  const cuda::Domain d = a.domain == ZeroPointDomain::kFloat ? cuda::Domain::kFloat
                         : a.domain == ZeroPointDomain::kNone ? cuda::Domain::kNone
                                                              : cuda::Domain::kInt;
  return cuda::Params{a.range.qmin, a.range.qmax, d};
}

void checkLaunch(cudaError_t err, const char* op) {
  TORCH_CHECK(err == cudaSuccess, op, ": CUDA kernel launch failed: ", cudaGetErrorString(err));
}

at::Tensor quantizeAffineCuda(const at::Tensor& input, at::IntArrayRef block_size, const at::Tensor& scale,
                              const std::optional<at::Tensor>& zero_point, at::ScalarType output_dtype,
                              std::optional<int64_t> quant_min, std::optional<int64_t> quant_max,
                              c10::string_view zero_point_domain) {
  const char* op = "quantize_affine";
  checkFloatInput(input, op, "input");
  c10::cuda::CUDAGuard guard(input.device());
  const AffineArgs a = prepareAffineArgs(op, input, block_size, scale, zero_point, output_dtype, quant_min,
                                         quant_max, zero_point_domain);
  const at::Tensor x = input.contiguous();
  at::Tensor q = at::empty(input.sizes(), input.options().dtype(a.qdtype.storage));
  checkLaunch(cuda::quantizeAffine(x.const_data_ptr(), floatType(x.scalar_type()), q.data_ptr(),
                                   codeType(a.qdtype.storage), x.numel(), cudaLayout(a.layout, op),
                                   a.scale.const_data_ptr<float>(), a.zp.defined() ? a.zp.const_data_ptr<float>() : nullptr,
                                   cudaParams(a), at::cuda::getCurrentCUDAStream()),
              op);
  return q;
}

at::Tensor dequantizeAffineCuda(const at::Tensor& input, at::IntArrayRef block_size, const at::Tensor& scale,
                                const std::optional<at::Tensor>& zero_point, at::ScalarType input_dtype,
                                std::optional<int64_t> quant_min, std::optional<int64_t> quant_max,
                                c10::string_view zero_point_domain, at::ScalarType output_dtype) {
  const char* op = "dequantize_affine";
  checkFloatDtype(output_dtype, op, "output_dtype");
  c10::cuda::CUDAGuard guard(input.device());
  const AffineArgs a = prepareAffineArgs(op, input, block_size, scale, zero_point, input_dtype, quant_min,
                                         quant_max, zero_point_domain);
  TORCH_CHECK_TYPE(input.scalar_type() == a.qdtype.storage, op, ": input holds ", input.scalar_type(),
                   " but input_dtype ", input_dtype, " is stored as ", a.qdtype.storage);
  const at::Tensor q = input.contiguous();
  at::Tensor y = at::empty(input.sizes(), input.options().dtype(output_dtype));
  checkLaunch(cuda::dequantizeAffine(q.const_data_ptr(), codeType(q.scalar_type()), y.data_ptr(),
                                     floatType(output_dtype), q.numel(), cudaLayout(a.layout, op),
                                     a.scale.const_data_ptr<float>(),
                                     a.zp.defined() ? a.zp.const_data_ptr<float>() : nullptr, cudaParams(a),
                                     at::cuda::getCurrentCUDAStream()),
              op);
  return y;
}

std::tuple<at::Tensor, at::Tensor> fakeQuantizeCuda(const at::Tensor& input, at::IntArrayRef block_size,
                                                    const at::Tensor& scale,
                                                    const std::optional<at::Tensor>& zero_point,
                                                    at::ScalarType quant_dtype, std::optional<int64_t> quant_min,
                                                    std::optional<int64_t> quant_max,
                                                    c10::string_view zero_point_domain, bool want_mask) {
  const char* op = "fake_quantize_affine";
  checkFloatInput(input, op, "input");
  c10::cuda::CUDAGuard guard(input.device());
  const AffineArgs a = prepareAffineArgs(op, input, block_size, scale, zero_point, quant_dtype, quant_min,
                                         quant_max, zero_point_domain);
  const at::Tensor x = input.contiguous();
  at::Tensor y = at::empty(input.sizes(), input.options());
  at::Tensor mask = want_mask ? at::empty(input.sizes(), input.options().dtype(at::kBool)) : at::Tensor();
  checkLaunch(cuda::fakeQuantizeAffine(x.const_data_ptr(), floatType(x.scalar_type()), y.data_ptr(),
                                       want_mask ? mask.data_ptr<bool>() : nullptr, x.numel(),
                                       cudaLayout(a.layout, op), a.scale.const_data_ptr<float>(),
                                       a.zp.defined() ? a.zp.const_data_ptr<float>() : nullptr, cudaParams(a),
                                       at::cuda::getCurrentCUDAStream()),
              op);
  return {y, mask};
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
