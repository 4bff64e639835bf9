// CUDA glue of max_pool2d_q8: the shared checks and geometry, then pool_q8_cuda_kernels.h.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "kernels/cuda/glue.h"
#include "kernels/cuda/pool_q8_cuda_kernels.h"
#include "kernels/pool_q8.h"

namespace pt2q {
namespace {

at::Tensor maxPoolQ8Cuda(const at::Tensor& input, at::IntArrayRef kernel_size, at::IntArrayRef stride,
                         at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode) {
  const MaxPoolQ8Geometry g = checkMaxPoolQ8(input, kernel_size, stride, padding, dilation, ceil_mode);
  const c10::cuda::CUDAGuard guard(input.device());
  const at::Tensor x = input.contiguous();
  at::Tensor out = at::empty(maxPoolQ8Shape(input, g), input.options());
  cuda::MaxPoolQ8 a;
  a.x = x.const_data_ptr();
  a.out = out.data_ptr();
  a.is_signed = input.scalar_type() == at::kChar;
  a.planes = g.planes, a.h = g.h, a.w = g.w, a.oh = g.oh, a.ow = g.ow;
  a.kh = g.kh, a.kw = g.kw, a.sh = g.sh, a.sw = g.sw, a.ph = g.ph, a.pw = g.pw, a.dh = g.dh, a.dw = g.dw;
  cuda::checkLaunch(cuda::maxPoolQ8(a, at::cuda::getCurrentCUDAStream()), "max_pool2d_q8");
  return out;
}

}  // namespace
}  // namespace pt2q

TORCH_LIBRARY_IMPL(pt2q, CUDA, m) { m.impl("max_pool2d_q8", &pt2q::maxPoolQ8Cuda); }
