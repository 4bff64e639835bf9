// Meta kernel of linear_mx: the output shape with the real kernel's type checks, sizes symbolic.
#include <torch/library.h>

#include "kernels/linear_mx.h"

namespace pt2q {
namespace {

at::Tensor linearMxMeta(const at::Tensor& input, const at::Tensor& weight_codes, const at::Tensor& weight_scales,
                        c10::string_view weight_format, int64_t /*block_size*/,
                        const c10::optional<at::Tensor>& /*bias*/, const std::optional<std::string>& input_format,
                        int64_t /*input_block_size*/, c10::string_view input_rounding,
                        c10::string_view input_scale_mode, bool /*input_flush_fp32_subnorms*/) {
  checkLinearMxTypes(input, weight_codes, weight_scales, weight_format, input_format, input_rounding,
                     input_scale_mode);
  std::vector<c10::SymInt> sizes = input.sym_sizes().vec();
  sizes.back() = weight_codes.sym_size(0);
  return at::empty_symint(sizes, input.options());
}

}  // namespace
}  // namespace pt2q

TORCH_LIBRARY_IMPL(pt2q, Meta, m) { m.impl("linear_mx", &pt2q::linearMxMeta); }
