// Meta kernel of max_pool2d_q8: codes of the pooled shape (aten's output-size rule on SymInts).
#include <torch/library.h>

#include <vector>

#include "kernels/pool_q8.h"

namespace pt2q {
namespace {

c10::SymInt outputSize(const c10::SymInt& in, int64_t k, int64_t pad, int64_t stride, int64_t dilation, bool ceil_mode) {
  c10::SymInt out = (in + 2 * pad - dilation * (k - 1) - 1 + (ceil_mode ? stride - 1 : 0)) / stride + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) out = out - 1;
  return out;
}

at::Tensor maxPoolQ8Meta(const at::Tensor& input, at::IntArrayRef ks, at::IntArrayRef st, at::IntArrayRef pad,
                         at::IntArrayRef dil, bool ceil_mode) {
  TORCH_CHECK_VALUE(input.scalar_type() == at::kChar || input.scalar_type() == at::kByte,
                    "max_pool2d_q8: input must be int8 or uint8 codes, got ", input.scalar_type());
  TORCH_CHECK_VALUE(input.dim() == 3 || input.dim() == 4, "max_pool2d_q8: input must be [N, C, H, W] or [C, H, W]");
  std::vector<c10::SymInt> sizes = input.sym_sizes().vec();
  const size_t d = sizes.size();
  for (size_t i = 0; i < 2; ++i) {
    const int64_t k = poolArg(ks, i, 1);
    sizes[d - 2 + i] = outputSize(input.sym_size(static_cast<int64_t>(d - 2 + i)), k, poolArg(pad, i, 0), poolArg(st, i, k),
                                  poolArg(dil, i, 1), ceil_mode);
  }
  return at::empty_symint(sizes, input.options());
}

}  // namespace
}  // namespace pt2q

TORCH_LIBRARY_IMPL(pt2q, Meta, m) { m.impl("max_pool2d_q8", &pt2q::maxPoolQ8Meta); }
