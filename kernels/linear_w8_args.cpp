// Argument checks of pack_weight_int8 / linear_w8a16 (see linear_w8_args.h).
#include "kernels/linear_w8_args.h"

namespace pt2q {

void checkPackWeightInt8(const at::Tensor& weight) {
  TORCH_CHECK_VALUE(weight.scalar_type() == at::kChar, "pack_weight_int8: weight must be int8 (the codes of a "
                    "quantized weight), got ", weight.scalar_type());
  TORCH_CHECK_VALUE(weight.dim() == 2, "pack_weight_int8: weight must be 2-d [out_features, in_features], got ",
                    weight.dim(), "-d");
}

std::vector<int64_t> packedWeightInt8Shape(int64_t n, int64_t k) {
  return {(n + kPackRows - 1) / kPackRows, roundUp(k, kPackChunk) * kPackRows};
}

void checkLinearW8a16Types(const at::Tensor& input, const at::Tensor& packed, const at::Tensor& scales,
                           const c10::optional<at::Tensor>& zero_points) {
  constexpr const char* op = "linear_w8a16";
  const auto dt = input.scalar_type();
  TORCH_CHECK_VALUE(dt == at::kFloat || dt == at::kBFloat16 || dt == at::kHalf, op,
                    ": input must be float32, bfloat16 or float16, got ", dt);
  TORCH_CHECK_VALUE(input.dim() >= 1, op, ": input must have at least 1 dimension");
  TORCH_CHECK_VALUE(packed.scalar_type() == at::kChar && packed.dim() == 2, op,
                    ": packed_weight must be the 2-d int8 tensor pack_weight_int8 returns, got ", packed.scalar_type(),
                    " with ", packed.dim(), " dimensions");
  TORCH_CHECK_VALUE(scales.dim() == 1 || scales.dim() == 2, op,
                    ": scales must be [out_features] (per channel) or [out_features, groups], got ", scales.dim(),
                    " dimensions");
  TORCH_CHECK_VALUE(at::isFloatingType(scales.scalar_type()), op, ": scales must be floating point, got ",
                    scales.scalar_type());
  if (zero_points.has_value()) {
    TORCH_CHECK_VALUE(at::isIntegralType(zero_points->scalar_type(), /*includeBool=*/false), op,
                      ": zero_points must be integer, got ", zero_points->scalar_type());
  }
}

LinearW8Geometry checkLinearW8a16(const at::Tensor& input, const at::Tensor& packed, const at::Tensor& scales,
                                  const c10::optional<at::Tensor>& zero_points, const c10::optional<at::Tensor>& bias) {
  constexpr const char* op = "linear_w8a16";
  checkLinearW8a16Types(input, packed, scales, zero_points);
  LinearW8Geometry g;
  g.n = scales.size(0);
  g.k = input.size(-1);
  g.m = g.k == 0 ? input.numel() : input.numel() / g.k;
  if (input.numel() == 0) g.m = 0;
  g.groups = scales.dim() == 2 ? scales.size(1) : 1;
  TORCH_CHECK_VALUE(g.n > 0 && g.k > 0, op, ": out_features (scales.size(0)) and in_features (input.size(-1)) "
                    "must be positive, got ", g.n, " and ", g.k);
  const std::vector<int64_t> want = packedWeightInt8Shape(g.n, g.k);
  TORCH_CHECK_VALUE(packed.size(0) == want[0] && packed.size(1) == want[1], op, ": packed_weight has shape ",
                    packed.sizes(), " but a packed [", g.n, ", ", g.k, "] weight (out_features from scales, "
                    "in_features from input) has shape [", want[0], ", ", want[1], "]");
  TORCH_CHECK_VALUE(g.groups >= 1 && g.k % g.groups == 0, op, ": scales has ", g.groups,
                    " groups per row, which does not divide in_features ", g.k);
  g.group_size = g.k / g.groups;
  TORCH_CHECK_VALUE(g.groups == 1 || g.group_size % kPackChunk == 0, op, ": the group size (", g.group_size,
                    " = in_features / groups) must be a multiple of ", kPackChunk);
  if (zero_points.has_value()) {
    const at::Tensor& zp = *zero_points;
    TORCH_CHECK_VALUE(zp.sizes() == scales.sizes(), op, ": zero_points must have the scales' shape ", scales.sizes(),
                      ", got ", zp.sizes());
  }
  if (bias.has_value()) {
    TORCH_CHECK_VALUE(bias->dim() == 1 && bias->size(0) == g.n, op, ": bias must be [", g.n, "], got ",
                      bias->sizes());
  }
  TORCH_CHECK_VALUE(packed.device() == input.device() && scales.device() == input.device(), op,
                    ": input, packed_weight and scales must be on one device, got ", input.device(), ", ",
                    packed.device(), " and ", scales.device());
  return g;
}

std::vector<int64_t> linearOutputShape(at::IntArrayRef input_sizes, int64_t n) {
  std::vector<int64_t> out(input_sizes.begin(), input_sizes.end());
  out.back() = n;
  return out;
}

}  // namespace pt2q
