// Meta kernel of mx_fake_quantize: same shape and dtype, same argument checks.
#include <torch/library.h>

#include "kernels/mx/mx_args.h"

namespace pt2q::mx {
namespace {

at::Tensor mxFakeQuantizeMeta(const at::Tensor& x, c10::string_view elem_format, int64_t block_size, int64_t axis,
                              c10::string_view rounding, c10::string_view scale_mode, bool flush_fp32_subnorms,
                              std::optional<int64_t> seed) {
  // Checks only; a Meta call never draws from the generator (seed 0 stands in).
  prepareMx(x, elem_format, block_size, axis, rounding, scale_mode, flush_fp32_subnorms, seed.value_or(0),
            "mx_fake_quantize");
  return at::empty_symint(x.sym_sizes(), x.options());
}

std::tuple<at::Tensor, at::Tensor> mxQuantizeMeta(const at::Tensor& x, c10::string_view elem_format,
                                                  int64_t block_size, int64_t axis, c10::string_view rounding,
                                                  c10::string_view scale_mode, bool flush_fp32_subnorms,
                                                  std::optional<int64_t> seed) {
  const MxSpec spec = prepareMxQuantize(x, elem_format, block_size, axis, rounding, scale_mode, flush_fp32_subnorms,
                                        seed.value_or(0));
  const CodeLayout layout = codeLayout(spec.format);
  return {at::empty(codesShape(x.sizes(), layout), x.options().dtype(layout.dtype)),
          at::empty(scalesShape(x.sizes(), spec), x.options().dtype(at::kByte))};
}

}  // namespace
}  // namespace pt2q::mx

TORCH_LIBRARY_IMPL(pt2q, Meta, m) {
  m.impl("mx_fake_quantize", &pt2q::mx::mxFakeQuantizeMeta);
  m.impl("mx_quantize", &pt2q::mx::mxQuantizeMeta);
}
