// Argument checks and constants of add_q8 and mul_q8 (see add_q8.h).
#include "kernels/add_q8.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace pt2q {

std::vector<int64_t> checkAddQ8(const at::Tensor& a, const at::Tensor& b, const AddQ8Args& p) {
  TORCH_CHECK_VALUE(a.scalar_type() == at::kChar && b.scalar_type() == at::kChar,
                    p.op(), ": a and b must be int8 codes, got ", a.scalar_type(), " and ", b.scalar_type());
  TORCH_CHECK_VALUE(a.device() == b.device(), p.op(), ": a and b must be on one device, got ", a.device(), " and ",
                    b.device());
  // Bounds that keep every fp32 step finite and NaN-free (a code times its scale, 1 / output_scale),
  // where torch's chain would produce undefined codes.
  for (const auto& [name, scale] : {std::pair<const char*, double>{"a_scale", p.a_scale}, {"b_scale", p.b_scale}}) {
    TORCH_CHECK_VALUE(std::isfinite(scale) && scale > 0 && scale < 1e36, p.op(), ": ", name,
                      " must be positive and below 1e36, got ", scale);
  }
  TORCH_CHECK_VALUE(std::isfinite(p.out_scale) && p.out_scale > 0 && std::isfinite(static_cast<float>(1.0 / p.out_scale)),
                    p.op(), ": output_scale must be positive, finite and at least 1e-38 (1 / output_scale finite in "
                    "fp32), got ", p.out_scale);
  for (const auto& [name, zp] : {std::pair<const char*, int64_t>{"a_zero_point", p.a_zero_point},
                                 {"b_zero_point", p.b_zero_point}, {"output_zero_point", p.out_zero_point}}) {
    TORCH_CHECK_VALUE(zp >= -128 && zp <= 127, p.op(), ": ", name, " must be in [-128, 127], got ", zp);
  }
  TORCH_CHECK_VALUE(-128 <= p.quant_min && p.quant_min <= p.quant_max && p.quant_max <= 127,
                    p.op(), ": need -128 <= output_quant_min <= output_quant_max <= 127, got ", p.quant_min, " and ",
                    p.quant_max);
  // Broadcasting as torch's add: dimensions aligned from the right, each equal or 1.
  const int64_t dims = std::max(a.dim(), b.dim());
  std::vector<int64_t> shape(static_cast<size_t>(dims));
  for (int64_t i = 0; i < dims; ++i) {
    const int64_t da = i < dims - a.dim() ? 1 : a.size(i - (dims - a.dim()));
    const int64_t db = i < dims - b.dim() ? 1 : b.size(i - (dims - b.dim()));
    TORCH_CHECK_VALUE(da == db || da == 1 || db == 1, p.op(), ": a of shape ", a.sizes(), " and b of shape ", b.sizes(),
                      " do not broadcast");
    shape[static_cast<size_t>(i)] = da == 1 ? db : da;
  }
  return shape;
}

cpu::Q8AddConsts addQ8Consts(const AddQ8Args& p) {
  return {static_cast<float>(p.a_scale),
          static_cast<float>(p.a_zero_point),
          static_cast<float>(p.b_scale),
          static_cast<float>(p.b_zero_point),
          {1.0f, static_cast<float>(1.0 / p.out_scale), static_cast<float>(p.out_zero_point),
           static_cast<float>(p.quant_min), static_cast<float>(p.quant_max)},
          p.multiply};
}

AddQ8Operands addQ8Operands(const at::Tensor& a, const at::Tensor& b, const AddQ8Args& p) {
  std::vector<int64_t> shape = checkAddQ8(a, b, p);
  return {a.expand(shape).contiguous(), b.expand(shape).contiguous(), std::move(shape), addQ8Consts(p)};
}

}  // namespace pt2q
