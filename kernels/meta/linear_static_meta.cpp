// Meta kernels of linear_q8 / conv2d_q8: int8 outputs of the real kernels' shapes, sizes kept
// symbolic (SymInt) so export and compile trace them with dynamic shapes.
#include <torch/library.h>

#include <vector>

namespace pt2q {
namespace {

void checkCodes(const char* op, const at::Tensor& input) {
  TORCH_CHECK_VALUE(input.scalar_type() == at::kChar, op, ": input must be int8 codes, got ", input.scalar_type());
}

at::Tensor linearQ8Meta(const at::Tensor& input, double, int64_t, const at::Tensor&, const at::Tensor& weight_scales,
                        const c10::optional<at::Tensor>&, double, int64_t, int64_t, int64_t) {
  checkCodes("linear_q8", input);
  std::vector<c10::SymInt> sizes = input.sym_sizes().vec();
  sizes.back() = weight_scales.sym_size(0);
  return at::empty_symint(sizes, input.options());
}

at::Tensor conv2dQ8Meta(const at::Tensor& input, double, int64_t, const at::Tensor&, const at::Tensor& weight_scales,
                        const c10::optional<at::Tensor>&, at::IntArrayRef ks, at::IntArrayRef st, at::IntArrayRef pad,
                        at::IntArrayRef dil, double, int64_t, int64_t, int64_t, int64_t,
                        const c10::optional<at::Tensor>& residual, double, int64_t) {
  checkCodes("conv2d_q8", input);
  TORCH_CHECK_VALUE(!residual.has_value() || residual->scalar_type() == at::kChar,
                    "conv2d_q8: residual must be int8 codes, got ", residual->scalar_type());
  TORCH_CHECK_VALUE(input.dim() == 4 && ks.size() == 2 && st.size() == 2 && pad.size() == 2 && dil.size() == 2,
                    "conv2d_q8: input must be 4-d and kernel_size, stride, padding, dilation 2 values each");
  std::vector<c10::SymInt> sizes{input.sym_size(0), weight_scales.sym_size(0)};
  for (int d = 0; d < 2; ++d) {
    sizes.push_back((input.sym_size(2 + d) + 2 * pad[d] - dil[d] * (ks[d] - 1) - 1) / st[d] + 1);
  }
  return at::empty_symint(sizes, input.options());
}

at::Tensor linearQ8FloatMeta(const at::Tensor& input, double sx, int64_t zx, const at::Tensor& p,
                             const at::Tensor& weight_scales, const c10::optional<at::Tensor>& b) {
  return linearQ8Meta(input, sx, zx, p, weight_scales, b, 1.0, 0, -128, 127).to(at::kFloat);
}

at::Tensor conv2dQ8FloatMeta(const at::Tensor& input, double sx, int64_t zx, const at::Tensor& p,
                             const at::Tensor& weight_scales, const c10::optional<at::Tensor>& b, at::IntArrayRef ks,
                             at::IntArrayRef st, at::IntArrayRef pad, at::IntArrayRef dil, int64_t groups) {
  return conv2dQ8Meta(input, sx, zx, p, weight_scales, b, ks, st, pad, dil, 1.0, 0, -128, 127, groups, c10::nullopt,
                      1.0, 0)
      .to(at::kFloat);
}

}  // namespace
}  // namespace pt2q

TORCH_LIBRARY_IMPL(pt2q, Meta, m) {
  m.impl("linear_q8", &pt2q::linearQ8Meta);
  m.impl("conv2d_q8", &pt2q::conv2dQ8Meta);
  m.impl("conv2d_q8_float", &pt2q::conv2dQ8FloatMeta);
  m.impl("linear_q8_float", &pt2q::linearQ8FloatMeta);
}
