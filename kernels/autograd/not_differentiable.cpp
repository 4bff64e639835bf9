// The Autograd kernel of every pt2q op that has no derivative: run the op below autograd and view
// tracking and return its outputs as they are, as torch's opcheck asks of non-differentiable ops
// (torch/testing/_internal/optests/autograd_registration.py). Outputs never require grad, as with
// ATen's non-differentiable outputs (argmax, quantize_per_tensor's codes).
//
// Without it a custom op falls to torch's generic fallback, which runs the kernel with view tracking
// on and gives outputs a grad_fn when an input requires grad (an nn.Parameter bias: a lowered model
// called outside no_grad). Kernels that reshape their result (linear_q8_float's [M, N] -> [..., N])
// then returned a view, and the next in-place op in the graph (hardswish_, relu_) raised "a view of
// a leaf Variable that requires grad is being used in an in-place operation". torch's
// "not implemented" fallback fixes that but makes torch.compile of such a model fail: AOTAutograd
// traces the backward and meets the error.
//
// Ops with real derivatives are not listed: fake_quantize_affine and mx_fake_quantize
// (autograd/*_autograd.cpp), bfp_fake_quantize (CompositeImplicitAutograd, differentiated through
// mx_fake_quantize). tests/kernels/test_autograd_registration.py checks that every op in ops.cpp is
// one or the other.
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

namespace pt2q {
namespace {

void belowAutograd(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  const at::AutoDispatchBelowADInplaceOrView guard;
  op.redispatchBoxed(keys & c10::after_ADInplaceOrView_keyset, stack);
}

}  // namespace
}  // namespace pt2q

TORCH_LIBRARY_IMPL(pt2q, Autograd, m) {
  for (const char* op : {
           "choose_qparams_affine", "quantize_affine", "dequantize_affine", "fake_quantize_affine_cachemask",
           "pack_int4", "unpack_int4",
           "mx_quantize", "mx_dequantize", "linear_mx",
           "pack_weight_int8", "pack_weight_int4", "linear_w8a16", "linear_w4a16", "linear_w8a8", "linear_w4a8",
           "quantize_per_token_int8",
           "linear_q8", "conv2d_q8", "linear_q8_float", "conv2d_q8_float", "add_q8", "mul_q8", "max_pool2d_q8", "lookup_q8",
       }) {
    m.impl(op, torch::CppFunction::makeFromBoxedFunction<&pt2q::belowAutograd>());
  }
}
