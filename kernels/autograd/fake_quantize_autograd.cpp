// Autograd of fake_quantize_affine: straight-through estimator. The forward runs the
// cachemask variant below autograd and keeps only the boolean mask for backward, as
// torch.fake_quantize_per_tensor_affine does; scale and zero_point get no gradient (they are
// qparams chosen by an observer, not learned; a learnable variant is a separate op).
#include <torch/autograd.h>
#include <torch/library.h>

#include <ATen/core/dispatch/Dispatcher.h>

namespace pt2q {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

std::tuple<at::Tensor, at::Tensor> callCachemask(const at::Tensor& input, c10::SymIntArrayRef block_size,
                                                 const at::Tensor& scale, const std::optional<at::Tensor>& zp,
                                                 at::ScalarType quant_dtype, std::optional<int64_t> qmin,
                                                 std::optional<int64_t> qmax, c10::string_view domain) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("pt2q::fake_quantize_affine_cachemask", "")
                       .typed<std::tuple<at::Tensor, at::Tensor>(
                           const at::Tensor&, c10::SymIntArrayRef, const at::Tensor&, const std::optional<at::Tensor>&,
                           at::ScalarType, std::optional<int64_t>, std::optional<int64_t>, c10::string_view)>();
  return op.call(input, block_size, scale, zp, quant_dtype, qmin, qmax, domain);
}

at::Tensor callForward(const at::Tensor& input, c10::SymIntArrayRef block_size, const at::Tensor& scale,
                       const std::optional<at::Tensor>& zp, at::ScalarType quant_dtype, std::optional<int64_t> qmin,
                       std::optional<int64_t> qmax, c10::string_view domain) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("pt2q::fake_quantize_affine", "")
                       .typed<at::Tensor(const at::Tensor&, c10::SymIntArrayRef, const at::Tensor&,
                                         const std::optional<at::Tensor>&, at::ScalarType, std::optional<int64_t>,
                                         std::optional<int64_t>, c10::string_view)>();
  return op.call(input, block_size, scale, zp, quant_dtype, qmin, qmax, domain);
}

class FakeQuantizeAffineFunction : public torch::autograd::Function<FakeQuantizeAffineFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input, c10::SymIntArrayRef block_size,
                            const at::Tensor& scale, const std::optional<at::Tensor>& zp,
                            at::ScalarType quant_dtype, std::optional<int64_t> qmin, std::optional<int64_t> qmax,
                            c10::string_view domain) {
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [out, mask] = callCachemask(input, block_size, scale, zp, quant_dtype, qmin, qmax, domain);
    ctx->save_for_backward({mask});
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const at::Tensor mask = ctx->get_saved_variables()[0];
    const at::Tensor& g = grad_outputs[0];
    return {g * mask, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(),
            at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor fakeQuantizeAffineAutograd(const at::Tensor& input, c10::SymIntArrayRef block_size,
                                      const at::Tensor& scale, const std::optional<at::Tensor>& zero_point,
                                      at::ScalarType quant_dtype, std::optional<int64_t> quant_min,
                                      std::optional<int64_t> quant_max, c10::string_view zero_point_domain) {
  if (!input.requires_grad() || !at::GradMode::is_enabled()) {
    // No graph to record: skip the mask entirely.
    at::AutoDispatchBelowADInplaceOrView guard;
    return callForward(input, block_size, scale, zero_point, quant_dtype, quant_min, quant_max, zero_point_domain);
  }
  return FakeQuantizeAffineFunction::apply(input, block_size, scale, zero_point, quant_dtype, quant_min, quant_max,
                                           zero_point_domain);
}

}  // namespace
}  // namespace pt2q

TORCH_LIBRARY_IMPL(pt2q, Autograd, m) {
  m.impl("fake_quantize_affine", &pt2q::fakeQuantizeAffineAutograd);
}
