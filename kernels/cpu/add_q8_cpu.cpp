// CPU add_q8 and mul_q8: the operands broadcast to the output's shape (a copy only where they differ from it),
// then the ISA's loop (cpu/q8_requantize_impl.h) over chunks of elements in parallel.
#include <ATen/Parallel.h>
#include <torch/library.h>

#include "kernels/add_q8.h"
#include "kernels/cpu/linear_microkernels.h"

namespace pt2q {
namespace {

at::Tensor run(const at::Tensor& a, const at::Tensor& b, const AddQ8Args& p) {
  const AddQ8Operands o = addQ8Operands(a, b, p);
  at::Tensor out = at::empty(o.shape, a.options());
  const auto add = cpu::linearKernels().q8_add;
  const int8_t* pa = o.a.const_data_ptr<int8_t>();
  const int8_t* pb = o.b.const_data_ptr<int8_t>();
  int8_t* po = out.data_ptr<int8_t>();
  at::parallel_for(0, out.numel(), int64_t{1} << 15, [&](int64_t i0, int64_t i1) {
    add(pa + i0, pb + i0, i1 - i0, o.consts, po + i0);
  });
  return out;
}

at::Tensor addQ8Cpu(const at::Tensor& a, double a_scale, int64_t a_zero_point, const at::Tensor& b, double b_scale,
                    int64_t b_zero_point, double output_scale, int64_t output_zero_point, int64_t qmin, int64_t qmax) {
  return run(a, b, {a_scale, b_scale, output_scale, a_zero_point, b_zero_point, output_zero_point, qmin, qmax});
}

at::Tensor mulQ8Cpu(const at::Tensor& a, double a_scale, int64_t a_zero_point, const at::Tensor& b, double b_scale,
                    int64_t b_zero_point, double output_scale, int64_t output_zero_point, int64_t qmin, int64_t qmax) {
  return run(a, b, {a_scale, b_scale, output_scale, a_zero_point, b_zero_point, output_zero_point, qmin, qmax, true});
}

}  // namespace
}  // namespace pt2q

TORCH_LIBRARY_IMPL(pt2q, CPU, m) {
  m.impl("add_q8", &pt2q::addQ8Cpu);
  m.impl("mul_q8", &pt2q::mulQ8Cpu);
}
