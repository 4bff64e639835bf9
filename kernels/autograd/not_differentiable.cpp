// The Autograd kernel of every pt2q op that has no derivative: torch's "not implemented"
// fallback, as ATen's own non-differentiable ops get.
//
// Without it, a custom op falls to torch's generic warn-only fallback, which runs the kernel with
// view tracking still on. Kernels that reshape their result (linear_q8_float's [M, N] -> [..., N])
// then return a view, and when an input requires grad (an nn.Parameter bias, grad mode on: a
// lowered model called outside no_grad) the next in-place op in the graph (hardswish_, relu_)
// raises "a view of a leaf Variable that requires grad is being used in an in-place operation".
// The fallback registered here runs the kernel below view tracking, so outputs are plain tensors,
// and a backward through the op raises "the derivative for 'pt2q::<op>' is not implemented"
// instead of silently giving no gradient.
//
// Ops with real derivatives are not listed: fake_quantize_affine and mx_fake_quantize
// (autograd/*_autograd.cpp), bfp_fake_quantize (CompositeImplicitAutograd, differentiated through
// mx_fake_quantize). tests/kernels/test_autograd_registration.py checks that every op in ops.cpp
// is one or the other.
#include <torch/csrc/autograd/autograd_not_implemented_fallback.h>
#include <torch/library.h>

TORCH_LIBRARY_IMPL(pt2q, Autograd, m) {
  for (const char* op : {
           "choose_qparams_affine", "quantize_affine", "dequantize_affine", "fake_quantize_affine_cachemask",
           "pack_int4", "unpack_int4",
           "mx_quantize", "mx_dequantize", "linear_mx",
           "pack_weight_int8", "pack_weight_int4", "linear_w8a16", "linear_w4a16", "linear_w8a8", "linear_w4a8",
           "quantize_per_token_int8",
           "linear_q8", "conv2d_q8", "linear_q8_float", "conv2d_q8_float", "add_q8", "max_pool2d_q8",
       }) {
    m.impl(op, torch::autograd::autogradNotImplementedFallback());
  }
}
