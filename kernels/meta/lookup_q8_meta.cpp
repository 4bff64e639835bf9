// Meta kernel of lookup_q8: the codes' shape in the table's dtype.
#include <torch/library.h>

#include "kernels/lookup_q8.h"

namespace pt2q {
namespace {

at::Tensor lookupQ8Meta(const at::Tensor& codes, const at::Tensor& table) {
  checkLookupQ8(codes, table);
  return lookupQ8Output(codes, table);
}

}  // namespace
}  // namespace pt2q

TORCH_LIBRARY_IMPL(pt2q, Meta, m) { m.impl("lookup_q8", &pt2q::lookupQ8Meta); }
