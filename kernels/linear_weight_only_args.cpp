// Argument checks of the weight-only linear ops (see linear_weight_only_args.h).
#include "kernels/linear_weight_only_args.h"

namespace pt2q {

void checkPackWeight(const at::Tensor& weight, int bits) {
  const char* op = bits == 4 ? "pack_weight_int4" : "pack_weight_int8";
  TORCH_CHECK_VALUE(weight.scalar_type() == at::kChar, op, ": weight must be int8 (the codes of a quantized weight",
                    bits == 4 ? ", in [-8, 7]" : "", "), got ", weight.scalar_type());
  TORCH_CHECK_VALUE(weight.dim() == 2, op, ": weight must be 2-d [out_features, in_features], got ", weight.dim(),
                    "-d");
}

std::vector<int64_t> packedWeightShape(int64_t n, int64_t k, int bits) {
  return {(n + kPackRows - 1) / kPackRows, roundUp(k, packChunk(bits)) * kPackRows * bits / 8};
}

void failPackInt4Value(const at::Tensor& weight, int64_t flat_index) {
  const int64_t k = weight.size(1);
  TORCH_CHECK_VALUE(false, "pack_weight_int4: weight[", flat_index / k, ", ", flat_index % k, "] = ",
                    static_cast<int>(weight.reshape({-1})[flat_index].item<int8_t>()),
                    " is outside the int4 range [-8, 7] (unsigned codes q in [0, 15] pack as q - 8, with "
                    "zero_point - 8)");
}

void checkLinearWeightOnlyTypes(const char* op, const at::Tensor& input, const at::Tensor& packed,
                                const at::Tensor& scales, const c10::optional<at::Tensor>& zero_points) {
  const auto dt = input.scalar_type();
  TORCH_CHECK_VALUE(dt == at::kFloat || dt == at::kBFloat16 || dt == at::kHalf, op,
                    ": input must be float32, bfloat16 or float16, got ", dt);
  TORCH_CHECK_VALUE(input.dim() >= 1, op, ": input must have at least 1 dimension");
  TORCH_CHECK_VALUE(packed.scalar_type() == at::kChar && packed.dim() == 2, op,
                    ": packed_weight must be the 2-d int8 tensor of the matching pack op, got ", packed.scalar_type(),
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

LinearWeightOnlyGeometry checkLinearWeightOnly(const char* op, int bits, const at::Tensor& input,
                                               const at::Tensor& packed, const at::Tensor& scales,
                                               const c10::optional<at::Tensor>& zero_points,
                                               const c10::optional<at::Tensor>& bias) {
  checkLinearWeightOnlyTypes(op, input, packed, scales, zero_points);
  LinearWeightOnlyGeometry g;
  g.n = scales.size(0);
  g.k = input.size(-1);
  g.m = input.numel() == 0 ? 0 : input.numel() / g.k;
  g.groups = scales.dim() == 2 ? scales.size(1) : 1;
  TORCH_CHECK_VALUE(g.n > 0 && g.k > 0, op, ": out_features (scales.size(0)) and in_features (input.size(-1)) "
                    "must be positive, got ", g.n, " and ", g.k);
  const std::vector<int64_t> want = packedWeightShape(g.n, g.k, bits);
  TORCH_CHECK_VALUE(packed.size(0) == want[0] && packed.size(1) == want[1], op, ": packed_weight has shape ",
                    packed.sizes(), " but a packed [", g.n, ", ", g.k, "] weight (out_features from scales, "
                    "in_features from input) has shape [", want[0], ", ", want[1], "]");
  TORCH_CHECK_VALUE(g.groups >= 1 && g.k % g.groups == 0, op, ": scales has ", g.groups,
                    " groups per row, which does not divide in_features ", g.k);
  g.group_size = g.k / g.groups;
  TORCH_CHECK_VALUE(g.groups == 1 || g.group_size % packChunk(bits) == 0, op, ": the group size (", g.group_size,
                    " = in_features / groups) must be a multiple of ", packChunk(bits));
  if (zero_points.has_value()) {
    TORCH_CHECK_VALUE(zero_points->sizes() == scales.sizes(), op, ": zero_points must have the scales' shape ",
                      scales.sizes(), ", got ", zero_points->sizes());
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
