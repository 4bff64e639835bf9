// CUDA glue of add_q8: the shared checks, the operands broadcast to the output's shape (a copy only
// where they differ from it), then add_q8_cuda_kernels.h with the fp32 constants the CPU uses.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "kernels/add_q8.h"
#include "kernels/cuda/add_q8_cuda_kernels.h"
#include "kernels/cuda/glue.h"

namespace pt2q {
namespace {

at::Tensor run(const at::Tensor& a, const at::Tensor& b, const AddQ8Args& p) {
  checkAddQ8(a, b, p);  // names a device mismatch before the guard takes a's device
  const c10::cuda::CUDAGuard guard(a.device());
  const AddQ8Operands o = addQ8Operands(a, b, p);
  at::Tensor out = at::empty(o.shape, a.options());
  const cpu::Q8AddConsts& k = o.consts;
  cuda::AddQ8 args;
  args.a = o.a.const_data_ptr<int8_t>();
  args.b = o.b.const_data_ptr<int8_t>();
  args.out = out.data_ptr<int8_t>();
  args.n = out.numel();
  args.sa = k.sa, args.za = k.za, args.sb = k.sb, args.zb = k.zb;
  args.inv = k.out.inv, args.zo = k.out.zo, args.lo = k.out.lo, args.hi = k.out.hi;
  args.multiply = k.multiply;
  cuda::checkLaunch(cuda::addQ8(args, at::cuda::getCurrentCUDAStream()), p.op());
  return out;
}

at::Tensor addQ8Cuda(const at::Tensor& a, double a_scale, int64_t a_zero_point, const at::Tensor& b, double b_scale,
                     int64_t b_zero_point, double output_scale, int64_t output_zero_point, int64_t qmin, int64_t qmax) {
  return run(a, b, {a_scale, b_scale, output_scale, a_zero_point, b_zero_point, output_zero_point, qmin, qmax});
}

at::Tensor mulQ8Cuda(const at::Tensor& a, double a_scale, int64_t a_zero_point, const at::Tensor& b, double b_scale,
                     int64_t b_zero_point, double output_scale, int64_t output_zero_point, int64_t qmin, int64_t qmax) {
  return run(a, b, {a_scale, b_scale, output_scale, a_zero_point, b_zero_point, output_zero_point, qmin, qmax, true});
}

}  // namespace
}  // namespace pt2q

TORCH_LIBRARY_IMPL(pt2q, CUDA, m) {
  m.impl("add_q8", &pt2q::addQ8Cuda);
  m.impl("mul_q8", &pt2q::mulQ8Cuda);
}
