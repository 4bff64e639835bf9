// Reference pack_weight_int8/int4 and linear_w8a16/w4a16 in plain ATen (any device): the packed
// layouts by reshapes, the linear as dequantize-then-F.linear in fp32.
#include <torch/library.h>

#include "kernels/linear_weight_only_args.h"

namespace pt2q {

at::Tensor packWeightRef(const at::Tensor& weight, int bits) {
  checkPackWeight(weight, bits);
  const int64_t n = weight.size(0), k = weight.size(1), chunk = packChunk(bits);
  if (bits == 4) {
    const at::Tensor bad = (weight < -8) | (weight > 7);
    if (bad.any().item<bool>()) failPackInt4Value(weight, bad.reshape({-1}).nonzero().index({0, 0}).item<int64_t>());
  }
  const int64_t np = roundUp(n, kPackRows), kp = roundUp(k, chunk);
  const at::Tensor padded = at::constant_pad_nd(weight, {0, kp - k, 0, np - n}, 0);
  if (bits == 8) {
    // [np/4, 4, kp/16, 16] -> [np/4, kp/16, 4, 16]
    return padded.reshape({np / kPackRows, kPackRows, kp / chunk, chunk})
        .permute({0, 2, 1, 3})
        .contiguous()
        .reshape(packedWeightShape(n, k, bits));
  }
  // Nibbles hold v + 8 (padding: 8, i.e. zero); byte l of a chunk row: k = l low, k = 16 + l high.
  const at::Tensor u = padded.to(at::kInt).add(8).to(at::kByte);
  const at::Tensor t = u.reshape({np / kPackRows, kPackRows, kp / chunk, 2, kPackChunkBytes}).permute({0, 2, 1, 3, 4});
  const at::Tensor bytes = t.select(3, 0).bitwise_or(t.select(3, 1).bitwise_left_shift(4));
  return bytes.contiguous().view(at::kChar).reshape(packedWeightShape(n, k, bits));
}

at::Tensor unpackWeightRef(const at::Tensor& packed, int64_t n, int64_t k, int bits) {
  const int64_t chunk = packChunk(bits), kp = roundUp(k, chunk), nb = packed.size(0);
  if (bits == 8) {
    return packed.reshape({nb, kp / chunk, kPackRows, chunk})
        .permute({0, 2, 1, 3})
        .reshape({nb * kPackRows, kp})
        .slice(0, 0, n)
        .slice(1, 0, k);
  }
  const at::Tensor b = packed.view(at::kByte).reshape({nb, kp / chunk, kPackRows, kPackChunkBytes});
  const at::Tensor halves = at::stack({b.bitwise_and(15), b.bitwise_right_shift(4)}, 3);  // [nb, c, r, 2, 16]
  return halves.permute({0, 2, 1, 3, 4})
      .reshape({nb * kPackRows, kp})
      .to(at::kChar)
      .sub(8)
      .slice(0, 0, n)
      .slice(1, 0, k);
}

at::Tensor linearWeightOnlyRef(const char* op, int bits, const at::Tensor& input, const at::Tensor& packed,
                               const at::Tensor& scales, const c10::optional<at::Tensor>& zero_points,
                               const c10::optional<at::Tensor>& bias) {
  const LinearWeightOnlyGeometry g = checkLinearWeightOnly(op, bits, input, packed, scales, zero_points, bias);
  at::Tensor w = unpackWeightRef(packed, g.n, g.k, bits).to(at::kFloat).reshape({g.n, g.groups, g.group_size});
  const at::Tensor s = scales.to(at::kFloat).reshape({g.n, g.groups, 1});
  if (zero_points.has_value()) w = w - zero_points->to(at::kFloat).reshape({g.n, g.groups, 1});
  const at::Tensor weight = (w * s).reshape({g.n, g.k});
  const c10::optional<at::Tensor> b = bias.has_value() ? c10::optional<at::Tensor>(bias->to(at::kFloat)) : c10::nullopt;
  return at::linear(input.to(at::kFloat), weight, b).to(input.scalar_type());
}

namespace {

at::Tensor packInt8(const at::Tensor& w) { return packWeightRef(w, 8); }
at::Tensor packInt4(const at::Tensor& w) { return packWeightRef(w, 4); }
at::Tensor linearW8(const at::Tensor& x, const at::Tensor& p, const at::Tensor& s, const c10::optional<at::Tensor>& z,
                    const c10::optional<at::Tensor>& b) {
  return linearWeightOnlyRef("linear_w8a16", 8, x, p, s, z, b);
}
at::Tensor linearW4(const at::Tensor& x, const at::Tensor& p, const at::Tensor& s, const c10::optional<at::Tensor>& z,
                    const c10::optional<at::Tensor>& b) {
  return linearWeightOnlyRef("linear_w4a16", 4, x, p, s, z, b);
}

}  // namespace
}  // namespace pt2q

TORCH_LIBRARY_IMPL(pt2q, CompositeExplicitAutograd, m) {
  m.impl("pack_weight_int8", &pt2q::packInt8);
  m.impl("pack_weight_int4", &pt2q::packInt4);
  m.impl("linear_w8a16", &pt2q::linearW8);
  m.impl("linear_w4a16", &pt2q::linearW4);
}
