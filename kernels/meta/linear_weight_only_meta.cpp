// Meta kernels of the weight-only linear ops: shapes and dtypes with the real kernels' type
// checks, sizes kept symbolic (SymInt) so export and compile trace them with dynamic shapes.
#include <torch/library.h>

#include "kernels/linear_weight_only_args.h"

namespace pt2q {
namespace {

template <int Bits>
at::Tensor packWeightMeta(const at::Tensor& weight) {
  checkPackWeight(weight, Bits);
  const c10::SymInt& n = weight.sym_size(0);
  const c10::SymInt& k = weight.sym_size(1);
  const int64_t chunk = packChunk(Bits);
  return at::empty_symint({(n + kPackRows - 1) / kPackRows, (k + chunk - 1) / chunk * chunk * kPackRows * Bits / 8},
                          weight.options());
}

template <int Bits>
at::Tensor linearWeightOnlyMeta(const at::Tensor& input, const at::Tensor& packed, const at::Tensor& scales,
                                const c10::optional<at::Tensor>& zero_points, const c10::optional<at::Tensor>& /*bias*/) {
  checkLinearWeightOnlyTypes(Bits == 4 ? "linear_w4a16" : "linear_w8a16", input, packed, scales, zero_points);
  std::vector<c10::SymInt> sizes = input.sym_sizes().vec();
  sizes.back() = scales.sym_size(0);
  return at::empty_symint(sizes, input.options());
}

}  // namespace
}  // namespace pt2q

TORCH_LIBRARY_IMPL(pt2q, Meta, m) {
  m.impl("pack_weight_int8", &pt2q::packWeightMeta<8>);
  m.impl("pack_weight_int4", &pt2q::packWeightMeta<4>);
  m.impl("linear_w8a16", &pt2q::linearWeightOnlyMeta<8>);
  m.impl("linear_w4a16", &pt2q::linearWeightOnlyMeta<4>);
}
