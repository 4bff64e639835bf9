// Argument checks of linear_q8 / conv2d_q8 (see linear_static.h).
#include <cmath>

#include "kernels/linear_static.h"
#include "kernels/linear_weight_only_args.h"

namespace pt2q {
namespace {

void checkCommon(const char* op, const at::Tensor& input, double input_scale, int64_t input_zero_point,
                 const at::Tensor& packed, const at::Tensor& weight_scales, const c10::optional<at::Tensor>& bias,
                 const Q8Output& out) {
  TORCH_CHECK_VALUE(input.scalar_type() == at::kChar, op, ": input must be int8 codes, got ", input.scalar_type());
  TORCH_CHECK_VALUE(packed.scalar_type() == at::kChar && packed.dim() == 2, op,
                    ": packed_weight must be the 2-d int8 tensor of pack_weight_int8, got ", packed.scalar_type(),
                    " with ", packed.dim(), " dimensions");
  TORCH_CHECK_VALUE(weight_scales.dim() == 1 && at::isFloatingType(weight_scales.scalar_type()), op,
                    ": weight_scales must be a 1-d float tensor [out_features], got ", weight_scales.scalar_type(),
                    " of shape ", weight_scales.sizes());
  TORCH_CHECK_VALUE(std::isfinite(input_scale) && input_scale > 0, op, ": input_scale must be positive and finite, got ",
                    input_scale);
  TORCH_CHECK_VALUE(std::isfinite(out.scale) && out.scale > 0, op, ": output_scale must be positive and finite, got ",
                    out.scale);
  TORCH_CHECK_VALUE(input_zero_point >= -128 && input_zero_point <= 127, op,
                    ": input_zero_point must be in [-128, 127], got ", input_zero_point);
  TORCH_CHECK_VALUE(-128 <= out.quant_min && out.quant_min <= out.quant_max && out.quant_max <= 127, op,
                    ": need -128 <= output_quant_min <= output_quant_max <= 127, got ", out.quant_min, " and ",
                    out.quant_max);
  const int64_t n = weight_scales.size(0);
  if (bias.has_value()) {
    TORCH_CHECK_VALUE(bias->dim() == 1 && bias->size(0) == n && at::isFloatingType(bias->scalar_type()), op,
                      ": bias must be a float [", n, "], got ", bias->scalar_type(), " of shape ", bias->sizes());
  }
  TORCH_CHECK_VALUE(packed.device() == input.device() && weight_scales.device() == input.device() &&
                        (!bias.has_value() || bias->device() == input.device()),
                    op, ": input, packed_weight, weight_scales and bias must be on one device, got ", input.device(),
                    ", ", packed.device(), ", ", weight_scales.device(), " and ",
                    bias.has_value() ? bias->device().str() : std::string("no bias"));
}

void checkPacked(const char* op, const at::Tensor& packed, int64_t n, int64_t k, const char* k_from) {
  const std::vector<int64_t> want = packedWeightShape(n, k, 8);
  TORCH_CHECK_VALUE(packed.size(0) == want[0] && packed.size(1) == want[1], op, ": packed_weight has shape ",
                    packed.sizes(), " but a packed [", n, ", ", k, "] weight (out_features from weight_scales, ",
                    "in_features from ", k_from, ") has shape [", want[0], ", ", want[1], "]");
}

}  // namespace

std::array<int64_t, 3> checkLinearQ8(const at::Tensor& input, double input_scale, int64_t input_zero_point,
                                     const at::Tensor& packed, const at::Tensor& weight_scales,
                                     const c10::optional<at::Tensor>& bias, const Q8Output& out,
                                     const char* op) {
  checkCommon(op, input, input_scale, input_zero_point, packed, weight_scales, bias, out);
  TORCH_CHECK_VALUE(input.dim() >= 1 && input.size(-1) > 0, op, ": input must have a non-empty last dimension");
  const int64_t k = input.size(-1), n = weight_scales.size(0);
  TORCH_CHECK_VALUE(n > 0, op, ": weight_scales must not be empty");
  checkPacked(op, packed, n, k, "input.size(-1)");
  return {input.numel() / k, k, n};
}

Conv2dQ8Geometry checkConv2dQ8(const at::Tensor& input, double input_scale, int64_t input_zero_point,
                               const at::Tensor& packed, const at::Tensor& weight_scales,
                               const c10::optional<at::Tensor>& bias, at::IntArrayRef kernel_size,
                               at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                               const Q8Output& out, int64_t groups, const Q8Residual& residual, const char* op) {
  checkCommon(op, input, input_scale, input_zero_point, packed, weight_scales, bias, out);
  TORCH_CHECK_VALUE(input.dim() == 4, op, ": input must be 4-d [N, C, H, W], got ", input.dim(), "-d");
  for (const auto& [name, v] : {std::pair<const char*, at::IntArrayRef>{"kernel_size", kernel_size},
                                {"stride", stride}, {"padding", padding}, {"dilation", dilation}}) {
    TORCH_CHECK_VALUE(v.size() == 2, op, ": ", name, " must have 2 values, got ", v.size());
  }
  Conv2dQ8Geometry g;
  g.n = input.size(0), g.c = input.size(1), g.h = input.size(2), g.w = input.size(3);
  g.oc = weight_scales.size(0), g.kh = kernel_size[0], g.kw = kernel_size[1];
  g.sh = stride[0], g.sw = stride[1], g.ph = padding[0], g.pw = padding[1], g.dh = dilation[0], g.dw = dilation[1];
  TORCH_CHECK_VALUE(g.kh > 0 && g.kw > 0 && g.sh > 0 && g.sw > 0 && g.dh > 0 && g.dw > 0 && g.ph >= 0 && g.pw >= 0,
                    op, ": kernel_size, stride and dilation must be positive and padding non-negative, got ",
                    kernel_size, ", ", stride, ", ", dilation, " and ", padding);
  g.oh = (g.h + 2 * g.ph - g.dh * (g.kh - 1) - 1) / g.sh + 1;
  g.ow = (g.w + 2 * g.pw - g.dw * (g.kw - 1) - 1) / g.sw + 1;
  TORCH_CHECK_VALUE(g.oh > 0 && g.ow > 0, op, ": the output would be empty: input ", input.sizes(),
                    " is smaller than the dilated kernel");
  TORCH_CHECK_VALUE(g.oc > 0 && g.c > 0, op, ": channels must be positive");
  TORCH_CHECK_VALUE(groups > 0 && g.c % groups == 0 && g.oc % groups == 0, op, ": groups (", groups,
                    ") must be positive and divide both the input channels (", g.c,
                    ") and the output channels (", g.oc, ", from weight_scales)");
  g.groups = groups;
  checkPacked(op, packed, g.oc, g.k(), "input channels / groups x kernel_size");
  if (residual.on()) {
    const at::Tensor& r = *residual.codes;
    TORCH_CHECK_VALUE(r.scalar_type() == at::kChar, op, ": residual must be int8 codes, got ", r.scalar_type());
    TORCH_CHECK_VALUE(r.sizes() == at::IntArrayRef({g.n, g.oc, g.oh, g.ow}), op, ": residual must have the ",
                      "output's shape [", g.n, ", ", g.oc, ", ", g.oh, ", ", g.ow, "], got ", r.sizes());
    TORCH_CHECK_VALUE(r.device() == input.device(), op, ": residual must be on the input's device (",
                      input.device(), "), got ", r.device());
    TORCH_CHECK_VALUE(std::isfinite(residual.scale) && residual.scale > 0,
                      op, ": residual_scale must be positive and finite, got ", residual.scale);
    TORCH_CHECK_VALUE(residual.zero_point >= -128 && residual.zero_point <= 127,
                      op, ": residual_zero_point must be in [-128, 127], got ", residual.zero_point);
  }
  return g;
}

}  // namespace pt2q
