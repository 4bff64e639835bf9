// Reference pack_weight_int8 / linear_w8a16 in plain ATen (any device): the packed layout by
// reshapes, the linear as dequantize-then-F.linear in fp32.
#include <torch/library.h>

#include "kernels/linear_w8_args.h"

namespace pt2q {

at::Tensor packWeightInt8Ref(const at::Tensor& weight) {
  checkPackWeightInt8(weight);
  const int64_t n = weight.size(0), k = weight.size(1);
  const int64_t np = roundUp(n, kPackRows), kp = roundUp(k, kPackChunk);
  const at::Tensor padded = at::constant_pad_nd(weight, {0, kp - k, 0, np - n}, 0);
  // [np/4, 4, kp/16, 16] -> [np/4, kp/16, 4, 16]
  return padded.reshape({np / kPackRows, kPackRows, kp / kPackChunk, kPackChunk})
      .permute({0, 2, 1, 3})
      .contiguous()
      .reshape(packedWeightInt8Shape(n, k));
}

at::Tensor unpackWeightInt8(const at::Tensor& packed, int64_t n, int64_t k) {
  const int64_t kp = roundUp(k, kPackChunk);
  return packed.reshape({packed.size(0), kp / kPackChunk, kPackRows, kPackChunk})
      .permute({0, 2, 1, 3})
      .reshape({packed.size(0) * kPackRows, kp})
      .slice(0, 0, n)
      .slice(1, 0, k);
}

at::Tensor linearW8a16Ref(const at::Tensor& input, const at::Tensor& packed, const at::Tensor& scales,
                          const c10::optional<at::Tensor>& zero_points, const c10::optional<at::Tensor>& bias) {
  const LinearW8Geometry g = checkLinearW8a16(input, packed, scales, zero_points, bias);
  at::Tensor w = unpackWeightInt8(packed, g.n, g.k).to(at::kFloat).reshape({g.n, g.groups, g.group_size});
  const at::Tensor s = scales.to(at::kFloat).reshape({g.n, g.groups, 1});
  if (zero_points.has_value()) w = w - zero_points->to(at::kFloat).reshape({g.n, g.groups, 1});
  const at::Tensor weight = (w * s).reshape({g.n, g.k});
  const c10::optional<at::Tensor> b = bias.has_value() ? c10::optional<at::Tensor>(bias->to(at::kFloat)) : c10::nullopt;
  return at::linear(input.to(at::kFloat), weight, b).to(input.scalar_type());
}

}  // namespace pt2q

TORCH_LIBRARY_IMPL(pt2q, CompositeExplicitAutograd, m) {
  m.impl("pack_weight_int8", &pt2q::packWeightInt8Ref);
  m.impl("linear_w8a16", &pt2q::linearW8a16Ref);
}
