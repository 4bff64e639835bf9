// Autograd of mx_fake_quantize: straight-through, the gradient passes unchanged (as
// microxcaling's and dmx's casts do); no mask is kept, so training costs no extra memory.
#include <torch/autograd.h>
#include <torch/library.h>

#include <ATen/core/dispatch/Dispatcher.h>

namespace pt2q {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

at::Tensor callMx(const at::Tensor& x, c10::string_view fmt, int64_t block, int64_t axis, c10::string_view rounding,
                  c10::string_view scale_mode, bool flush, std::optional<int64_t> seed) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("pt2q::mx_fake_quantize", "")
                       .typed<at::Tensor(const at::Tensor&, c10::string_view, int64_t, int64_t, c10::string_view,
                                         c10::string_view, bool, std::optional<int64_t>)>();
  return op.call(x, fmt, block, axis, rounding, scale_mode, flush, seed);
}

class MxFakeQuantizeFunction : public torch::autograd::Function<MxFakeQuantizeFunction> {
 public:
  static at::Tensor forward(AutogradContext*, const at::Tensor& x, c10::string_view fmt, int64_t block, int64_t axis,
                            c10::string_view rounding, c10::string_view scale_mode, bool flush,
                            std::optional<int64_t> seed) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return callMx(x, fmt, block, axis, rounding, scale_mode, flush, seed);
  }
  static variable_list backward(AutogradContext*, variable_list grads) {
    return {grads[0], at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(),
            at::Tensor()};
  }
};

at::Tensor mxFakeQuantizeAutograd(const at::Tensor& x, c10::string_view fmt, int64_t block, int64_t axis,
                                  c10::string_view rounding, c10::string_view scale_mode, bool flush,
                                  std::optional<int64_t> seed) {
  if (!x.requires_grad() || !at::GradMode::is_enabled()) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return callMx(x, fmt, block, axis, rounding, scale_mode, flush, seed);
  }
  return MxFakeQuantizeFunction::apply(x, fmt, block, axis, rounding, scale_mode, flush, seed);
}

}  // namespace
}  // namespace pt2q

TORCH_LIBRARY_IMPL(pt2q, Autograd, m) {
  m.impl("mx_fake_quantize", &pt2q::mxFakeQuantizeAutograd);
}
