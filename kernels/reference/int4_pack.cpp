// Reference pack_int4 / unpack_int4 in plain ATen (any device).
#include <torch/library.h>

#include "kernels/int4_pack_args.h"

namespace pt2q {

at::Tensor packInt4Ref(const at::Tensor& input, c10::string_view nibble_order) {
  const bool high_first = parseNibbleOrder(nibble_order, "pack_int4");
  checkPackInt4Input(input);
  const bool is_signed = input.scalar_type() == at::kChar;
  const at::Tensor bad = is_signed ? (input < -8) | (input > 7) : input > 15;
  if (bad.any().item<bool>()) failPackInt4Range(input, bad.reshape({-1}).nonzero().index({0, 0}).item<int64_t>());
  const at::Tensor u = input.to(at::kByte);  // int8 -> uint8 keeps the two's complement bits
  const at::Tensor a = u.slice(-1, 0, c10::nullopt, 2).bitwise_and(0x0f);
  const at::Tensor b = u.slice(-1, 1, c10::nullopt, 2).bitwise_and(0x0f);
  return high_first ? a.bitwise_left_shift(4).bitwise_or(b) : b.bitwise_left_shift(4).bitwise_or(a);
}

at::Tensor unpackInt4Ref(const at::Tensor& packed, bool is_signed, c10::string_view nibble_order) {
  const bool high_first = parseNibbleOrder(nibble_order, "unpack_int4");
  checkUnpackInt4Input(packed);
  at::Tensor lo = packed.bitwise_and(0x0f);
  at::Tensor hi = packed.bitwise_right_shift(4);
  if (is_signed) {
    // Sign-extend a nibble: (v ^ 8) - 8.
    lo = lo.to(at::kChar).bitwise_xor(8).sub(8);
    hi = hi.to(at::kChar).bitwise_xor(8).sub(8);
  }
  const at::Tensor pair = high_first ? at::stack({hi, lo}, -1) : at::stack({lo, hi}, -1);
  return pair.reshape(unpackedShape(packed.sizes()));
}

}  // namespace pt2q

TORCH_LIBRARY_IMPL(pt2q, CompositeExplicitAutograd, m) {
  m.impl("pack_int4", &pt2q::packInt4Ref);
  m.impl("unpack_int4", &pt2q::unpackInt4Ref);
}
