// Meta kernel of add_q8 and mul_q8: int8 codes of the broadcast shape, sizes kept symbolic (SymInt).
#include <ATen/ExpandUtils.h>
#include <torch/library.h>

namespace pt2q {
namespace {

at::Tensor addQ8Meta(const at::Tensor& a, double, int64_t, const at::Tensor& b, double, int64_t, double, int64_t,
                     int64_t, int64_t) {
  TORCH_CHECK_VALUE(a.scalar_type() == at::kChar && b.scalar_type() == at::kChar,
                    "add_q8 / mul_q8: a and b must be int8 codes, got ", a.scalar_type(), " and ", b.scalar_type());
  return at::empty_symint(at::infer_size_symdimvector(a.sym_sizes(), b.sym_sizes()), a.options());
}

}  // namespace
}  // namespace pt2q

TORCH_LIBRARY_IMPL(pt2q, Meta, m) {
  m.impl("add_q8", &pt2q::addQ8Meta);
  m.impl("mul_q8", &pt2q::addQ8Meta);
}
