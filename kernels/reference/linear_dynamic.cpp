// Reference linear_w8a8 / linear_w4a8 / quantize_per_token_int8 in plain ATen (any device): the
// activation quantization written op for op from quantized_decomposed's per-token pair, the
// linear in fp64 (exact products of codes, so the CPU kernels' only error is their fp32 epilogue).
#include <torch/library.h>

#include <limits>

#include "kernels/linear_dynamic.h"
#include "kernels/linear_weight_only_args.h"

namespace pt2q {

void failNonFiniteToken(const char* op, const at::Tensor& input, int64_t row) {
  const int64_t k = input.size(-1);
  TORCH_CHECK_VALUE(false, op, ": input row ", row, " (of ", input.numel() / k,
                    " rows of length ", k, ") holds NaN or Inf, for which per-token int8 quantization has no scale");
}

void checkPerTokenInput(const at::Tensor& input) {
  const auto dt = input.scalar_type();
  TORCH_CHECK_VALUE(dt == at::kFloat || dt == at::kBFloat16 || dt == at::kHalf,
                    "quantize_per_token_int8: input must be float32, bfloat16 or float16, got ", dt);
  TORCH_CHECK_VALUE(input.dim() >= 1 && input.size(-1) > 0,
                    "quantize_per_token_int8: input must have a non-empty last dimension, got shape ", input.sizes());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> quantizePerTokenRef(const at::Tensor& input) {
  checkPerTokenInput(input);
  const at::Tensor x = input.to(at::kFloat);
  if (x.numel() > 0) {
    const at::Tensor bad = x.isfinite().logical_not().any(-1).reshape({-1});
    if (bad.any().item<bool>()) {
      failNonFiniteToken("quantize_per_token_int8", input, bad.nonzero().index({0, 0}).item<int64_t>());
    }
  }
  const double qmin = -128, qmax = 127;
  const at::Tensor mn = at::minimum(at::amin(x, {-1}, true), at::zeros({}, x.options()));
  const at::Tensor mx = at::maximum(at::amax(x, {-1}, true), at::zeros({}, x.options()));
  // Divided by a tensor on x's device: CUDA turns a division by a scalar into a product with its
  // reciprocal, which differs from the CPU's quotient in the last bit.
  const at::Tensor scale =
      ((mx - mn) / at::full({}, qmax - qmin, x.options())).clamp_min(std::numeric_limits<float>::epsilon());
  const at::Tensor dmin = mn / scale, dmax = mx / scale;
  const at::Tensor zp = at::where((dmin + qmin) + (dmax + qmax) > 0, qmin - dmin, qmax - dmax).clamp(qmin, qmax).round();
  const at::Tensor s64 = scale.to(at::kDouble), z64 = zp.to(at::kLong);
  const at::Tensor codes = x.to(at::kDouble).mul(s64.reciprocal()).add(z64).round().clamp(qmin, qmax).to(at::kChar);
  return {codes, s64, z64};
}

std::tuple<at::Tensor, double, int64_t> quantizePerTensorRef(const char* op, const at::Tensor& input, double eps) {
  const at::Tensor x = input.to(at::kFloat);
  const int64_t k = x.size(-1);
  if (x.numel() > 0) {
    const at::Tensor bad = x.reshape({-1, k}).isfinite().logical_not().any(-1);
    if (bad.any().item<bool>()) failNonFiniteToken(op, input, bad.nonzero().index({0, 0}).item<int64_t>());
  }
  // determine_qparams for per_tensor_affine as torch computes it from a bf16/fp16 input too: min,
  // max, their difference and its 255th part are rounded to the input's dtype, and only the fp32
  // eps promotes the scale to fp32 (the zero point then divides in fp32).
  const at::TensorOptions in = input.options();
  const at::Tensor zero = at::zeros({}, in);
  const auto [lo, hi] = input.numel() > 0 ? at::aminmax(input) : std::make_tuple(zero, zero);
  const at::Tensor mn = at::minimum(lo, zero), mx = at::maximum(hi, zero);
  const at::Tensor scale =
      at::maximum((mx - mn) / at::full({}, 255.0, in), at::full({1}, eps, in.dtype(at::kFloat)));
  const at::Tensor zp = (-128 - at::round(mn / scale).to(at::kInt)).clamp(-128, 127);
  const double s = scale.item<float>();
  const int64_t z = zp.item<int64_t>();
  // quantize_per_tensor: x upcast to fp32, times 1.0 / scale taken to fp32 as a scalar operand is.
  const at::Tensor codes = x.mul(1.0 / s).round().add(z).clamp(-128, 127).to(at::kChar);
  return {codes, s, z};
}

at::Tensor linearDynamicRef(const char* op, int bits, const at::Tensor& input, const at::Tensor& packed,
                            const at::Tensor& scales, const c10::optional<at::Tensor>& zero_points,
                            const c10::optional<at::Tensor>& bias, c10::optional<double> per_tensor_eps) {
  const LinearWeightOnlyGeometry g = checkLinearWeightOnly(op, bits, input, packed, scales, zero_points, bias);
  const at::Tensor x2 = input.reshape({g.m, g.k});
  if (g.m > 0) {
    const at::Tensor bad = x2.to(at::kFloat).isfinite().logical_not().any(-1);
    if (bad.any().item<bool>()) failNonFiniteToken(op, input, bad.nonzero().index({0, 0}).item<int64_t>());
  }
  at::Tensor xd;
  if (per_tensor_eps.has_value()) {
    const auto [codes, sx, zx] = quantizePerTensorRef(op, x2, *per_tensor_eps);
    xd = (codes.to(at::kDouble) - static_cast<double>(zx)) * sx;
  } else {
    const auto [codes, sx, zx] = quantizePerTokenRef(x2);
    xd = (codes.to(at::kDouble) - zx.to(at::kDouble)) * sx;
  }
  at::Tensor w = unpackWeightRef(packed, g.n, g.k, bits).to(at::kDouble).reshape({g.n, g.groups, g.group_size});
  if (zero_points.has_value()) w = w - zero_points->to(at::kDouble).reshape({g.n, g.groups, 1});
  const at::Tensor wd = (w * scales.to(at::kDouble).reshape({g.n, g.groups, 1})).reshape({g.n, g.k});
  at::Tensor y = at::mm(xd, wd.t());
  if (bias.has_value()) y = y + bias->to(at::kDouble);
  return y.to(input.scalar_type()).reshape(linearOutputShape(input.sizes(), g.n));
}

namespace {

at::Tensor linearW8(const at::Tensor& x, const at::Tensor& p, const at::Tensor& s, const c10::optional<at::Tensor>& z,
                    const c10::optional<at::Tensor>& b, c10::optional<double> eps) {
  return linearDynamicRef("linear_w8a8", 8, x, p, s, z, b, eps);
}
at::Tensor linearW4(const at::Tensor& x, const at::Tensor& p, const at::Tensor& s, const c10::optional<at::Tensor>& z,
                    const c10::optional<at::Tensor>& b, c10::optional<double> eps) {
  return linearDynamicRef("linear_w4a8", 4, x, p, s, z, b, eps);
}

}  // namespace
}  // namespace pt2q

TORCH_LIBRARY_IMPL(pt2q, CompositeExplicitAutograd, m) {
  m.impl("linear_w8a8", &pt2q::linearW8);
  m.impl("linear_w4a8", &pt2q::linearW4);
  m.impl("quantize_per_token_int8", &pt2q::quantizePerTokenRef);
}
