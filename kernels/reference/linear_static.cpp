// Reference linear_q8 / conv2d_q8 and their float-output forms in plain ATen (any device): products of codes summed exactly in
// fp64, scaled, biased and requantized in fp64 with quantize_per_tensor's rounding (half to even).
#include <torch/library.h>

#include "kernels/linear_static.h"
#include "kernels/linear_weight_only_args.h"

namespace pt2q {
namespace {

// y = s_x * s_w * acc + bias in fp64, the scales and bias along channel_dim.
at::Tensor scaled(const at::Tensor& acc, double input_scale, const at::Tensor& weight_scales,
                  const c10::optional<at::Tensor>& bias, int64_t channel_dim) {
  std::vector<int64_t> shape(acc.dim(), 1);
  shape[channel_dim] = -1;
  at::Tensor y = acc * input_scale * weight_scales.to(at::kDouble).reshape(shape);
  if (bias.has_value()) y = y + bias->to(at::kDouble).reshape(shape);
  return y;
}

at::Tensor requantize(at::Tensor y, const Q8Output& out, const Q8Residual& residual = {}) {
  if (residual.on()) y = y + (residual.codes->to(at::kDouble) - static_cast<double>(residual.zero_point)) * residual.scale;
  return (y * (1.0 / out.scale)).round().add(out.zero_point).clamp(out.quant_min, out.quant_max).to(at::kChar);
}

// The exact sums of (q - z_x) w, in fp64: [m, n] for a linear.
at::Tensor linearSums(const at::Tensor& input, int64_t m, int64_t k, int64_t n, int64_t input_zero_point,
                      const at::Tensor& packed) {
  const at::Tensor x = input.reshape({m, k}).to(at::kDouble) - static_cast<double>(input_zero_point);
  return at::mm(x, unpackWeightRef(packed, n, k, 8).to(at::kDouble).t());
}

// The same for a convolution, [N, OC, OH, OW].
at::Tensor convSums(const Conv2dQ8Geometry& g, const at::Tensor& input, int64_t input_zero_point,
                    const at::Tensor& packed, at::IntArrayRef stride, at::IntArrayRef padding,
                    at::IntArrayRef dilation) {
  // Zero padding of x - zp is padding the codes with zp: a float zero.
  const at::Tensor x = input.to(at::kDouble) - static_cast<double>(input_zero_point);
  // The packed rows hold the weight in (kh, kw, c) order, c over the row's group.
  const at::Tensor w =
      unpackWeightRef(packed, g.oc, g.k(), 8).to(at::kDouble).reshape({g.oc, g.kh, g.kw, g.cg()}).permute({0, 3, 1, 2});
  return at::conv2d(x, w, c10::nullopt, stride, padding, dilation, g.groups);
}

}  // namespace

at::Tensor linearQ8Ref(const at::Tensor& input, double input_scale, int64_t input_zero_point,
                       const at::Tensor& packed, const at::Tensor& weight_scales, const c10::optional<at::Tensor>& bias,
                       const Q8Output& out) {
  const auto [m, k, n] = checkLinearQ8(input, input_scale, input_zero_point, packed, weight_scales, bias, out);
  const at::Tensor acc = linearSums(input, m, k, n, input_zero_point, packed);
  return requantize(scaled(acc, input_scale, weight_scales, bias, 1), out).reshape(linearOutputShape(input.sizes(), n));
}

at::Tensor conv2dQ8Ref(const at::Tensor& input, double input_scale, int64_t input_zero_point,
                       const at::Tensor& packed, const at::Tensor& weight_scales, const c10::optional<at::Tensor>& bias,
                       at::IntArrayRef kernel_size, at::IntArrayRef stride, at::IntArrayRef padding,
                       at::IntArrayRef dilation, const Q8Output& out, int64_t groups, const Q8Residual& residual) {
  const Conv2dQ8Geometry g = checkConv2dQ8(input, input_scale, input_zero_point, packed, weight_scales, bias,
                                           kernel_size, stride, padding, dilation, out, groups, residual);
  const at::Tensor acc = convSums(g, input, input_zero_point, packed, stride, padding, dilation);
  return requantize(scaled(acc, input_scale, weight_scales, bias, 1), out, residual);
}

at::Tensor linearQ8FloatRef(const at::Tensor& input, double input_scale, int64_t input_zero_point,
                            const at::Tensor& packed, const at::Tensor& weight_scales,
                            const c10::optional<at::Tensor>& bias) {
  const auto [m, k, n] =
      checkLinearQ8(input, input_scale, input_zero_point, packed, weight_scales, bias, Q8Output{}, "linear_q8_float");
  const at::Tensor acc = linearSums(input, m, k, n, input_zero_point, packed);
  return scaled(acc, input_scale, weight_scales, bias, 1).to(at::kFloat).reshape(linearOutputShape(input.sizes(), n));
}

at::Tensor conv2dQ8FloatRef(const at::Tensor& input, double input_scale, int64_t input_zero_point,
                            const at::Tensor& packed, const at::Tensor& weight_scales,
                            const c10::optional<at::Tensor>& bias, at::IntArrayRef kernel_size,
                            at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups) {
  const Conv2dQ8Geometry g = checkConv2dQ8(input, input_scale, input_zero_point, packed, weight_scales, bias,
                                           kernel_size, stride, padding, dilation, Q8Output{}, groups, {},
                                           "conv2d_q8_float");
  const at::Tensor acc = convSums(g, input, input_zero_point, packed, stride, padding, dilation);
  return scaled(acc, input_scale, weight_scales, bias, 1).to(at::kFloat);
}

namespace {

at::Tensor linearQ8Float(const at::Tensor& x, double sx, int64_t zx, const at::Tensor& p, const at::Tensor& s,
                         const c10::optional<at::Tensor>& b) {
  return linearQ8FloatRef(x, sx, zx, p, s, b);
}

at::Tensor conv2dQ8Float(const at::Tensor& x, double sx, int64_t zx, const at::Tensor& p, const at::Tensor& s,
                         const c10::optional<at::Tensor>& b, at::IntArrayRef ks, at::IntArrayRef st,
                         at::IntArrayRef pad, at::IntArrayRef dil, int64_t groups) {
  return conv2dQ8FloatRef(x, sx, zx, p, s, b, ks, st, pad, dil, groups);
}

at::Tensor linearQ8(const at::Tensor& x, double sx, int64_t zx, const at::Tensor& p, const at::Tensor& s,
                    const c10::optional<at::Tensor>& b, double so, int64_t zo, int64_t qmin, int64_t qmax) {
  return linearQ8Ref(x, sx, zx, p, s, b, Q8Output{so, zo, qmin, qmax});
}

at::Tensor conv2dQ8(const at::Tensor& x, double sx, int64_t zx, const at::Tensor& p, const at::Tensor& s,
                    const c10::optional<at::Tensor>& b, at::IntArrayRef ks, at::IntArrayRef st, at::IntArrayRef pad,
                    at::IntArrayRef dil, double so, int64_t zo, int64_t qmin, int64_t qmax, int64_t groups,
                    const c10::optional<at::Tensor>& r, double sr, int64_t zr) {
  return conv2dQ8Ref(x, sx, zx, p, s, b, ks, st, pad, dil, Q8Output{so, zo, qmin, qmax}, groups, Q8Residual{r, sr, zr});
}

}  // namespace
}  // namespace pt2q

TORCH_LIBRARY_IMPL(pt2q, CompositeExplicitAutograd, m) {
  m.impl("linear_q8", &pt2q::linearQ8);
  m.impl("conv2d_q8", &pt2q::conv2dQ8);
  m.impl("conv2d_q8_float", &pt2q::conv2dQ8Float);
  m.impl("linear_q8_float", &pt2q::linearQ8Float);
}
