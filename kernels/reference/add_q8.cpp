// Reference add_q8 / mul_q8 in plain ATen (any device): torch's dequantize_per_tensor on each
// operand, their sum (product) and quantize_per_tensor, the same fp32 operations in the same order.
#include <torch/library.h>

#include "kernels/add_q8.h"

namespace pt2q {
namespace {

at::Tensor dequantized(const at::Tensor& codes, int64_t zero_point, double scale) {
  return (codes.to(at::kFloat) - zero_point) * scale;
}

at::Tensor addQ8(const at::Tensor& a, double a_scale, int64_t a_zero_point, const at::Tensor& b, double b_scale,
                 int64_t b_zero_point, double output_scale, int64_t output_zero_point, int64_t qmin, int64_t qmax) {
  return addQ8Ref(a, b, {a_scale, b_scale, output_scale, a_zero_point, b_zero_point, output_zero_point, qmin, qmax});
}

at::Tensor mulQ8(const at::Tensor& a, double a_scale, int64_t a_zero_point, const at::Tensor& b, double b_scale,
                 int64_t b_zero_point, double output_scale, int64_t output_zero_point, int64_t qmin, int64_t qmax) {
  return addQ8Ref(a, b,
                  {a_scale, b_scale, output_scale, a_zero_point, b_zero_point, output_zero_point, qmin, qmax, true});
}

}  // namespace

at::Tensor addQ8Ref(const at::Tensor& a, const at::Tensor& b, const AddQ8Args& p) {
  checkAddQ8(a, b, p);
  const at::Tensor da = dequantized(a, p.a_zero_point, p.a_scale), db = dequantized(b, p.b_zero_point, p.b_scale);
  const at::Tensor y = p.multiply ? da * db : da + db;
  return at::clamp(at::round(y * (1.0 / p.out_scale)) + p.out_zero_point, p.quant_min, p.quant_max).to(at::kChar);
}

}  // namespace pt2q

TORCH_LIBRARY_IMPL(pt2q, CompositeExplicitAutograd, m) {
  m.impl("add_q8", &pt2q::addQ8);
  m.impl("mul_q8", &pt2q::mulQ8);
}
