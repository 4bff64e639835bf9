// Meta kernels of pack_weight_int8 / linear_w8a16: shapes and dtypes, with the real kernels'
// checks, so torch.export and torch.compile trace them.
#include <torch/library.h>

#include "kernels/linear_w8_args.h"

namespace pt2q {
namespace {

// Sizes stay symbolic (SymInt): export and compile trace with dynamic shapes.
at::Tensor packWeightInt8Meta(const at::Tensor& weight) {
  checkPackWeightInt8(weight);
  const c10::SymInt& n = weight.sym_size(0);
  const c10::SymInt& k = weight.sym_size(1);
  return at::empty_symint({(n + kPackRows - 1) / kPackRows, (k + kPackChunk - 1) / kPackChunk * kPackChunk * kPackRows},
                          weight.options());
}

at::Tensor linearW8a16Meta(const at::Tensor& input, const at::Tensor& packed, const at::Tensor& scales,
                           const c10::optional<at::Tensor>& zero_points, const c10::optional<at::Tensor>& bias) {
  checkLinearW8a16Types(input, packed, scales, zero_points);
  std::vector<c10::SymInt> sizes = input.sym_sizes().vec();
  sizes.back() = scales.sym_size(0);
  return at::empty_symint(sizes, input.options());
}

}  // namespace
}  // namespace pt2q

TORCH_LIBRARY_IMPL(pt2q, Meta, m) {
  m.impl("pack_weight_int8", &pt2q::packWeightInt8Meta);
  m.impl("linear_w8a16", &pt2q::linearW8a16Meta);
}
