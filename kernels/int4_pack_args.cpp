// Argument checks of pack_int4 / unpack_int4, shared by every backend.
#include "kernels/int4_pack_args.h"

#include "kernels/affine_params.h"

namespace pt2q {

bool parseNibbleOrder(c10::string_view order, const char* op) {
  if (order == "low_first") return false;
  if (order == "high_first") return true;
  TORCH_CHECK_VALUE(false, op, ": nibble_order must be \"low_first\" or \"high_first\", got \"", order, "\"");
}

void checkPackInt4Input(const at::Tensor& input) {
  TORCH_CHECK_TYPE(input.scalar_type() == at::kChar || input.scalar_type() == at::kByte,
                   "pack_int4: input must be int8 (values in [-8, 7]) or uint8 (values in [0, 15]), got ",
                   input.scalar_type());
  TORCH_CHECK_VALUE(input.dim() >= 1, "pack_int4: input must have at least one dimension, got a 0-d tensor");
  TORCH_CHECK_VALUE(input.size(-1) % 2 == 0, "pack_int4: the last dimension must be even to pack two values per ",
                    "byte, got shape ", formatList(input.sizes()));
}

void checkUnpackInt4Input(const at::Tensor& packed) {
  TORCH_CHECK_TYPE(packed.scalar_type() == at::kByte, "unpack_int4: packed must be uint8, got ",
                   packed.scalar_type());
  TORCH_CHECK_VALUE(packed.dim() >= 1, "unpack_int4: packed must have at least one dimension, got a 0-d tensor");
}

std::vector<int64_t> packedShape(at::IntArrayRef sizes) {
  std::vector<int64_t> s(sizes.begin(), sizes.end());
  s.back() /= 2;
  return s;
}

std::vector<int64_t> unpackedShape(at::IntArrayRef sizes) {
  std::vector<int64_t> s(sizes.begin(), sizes.end());
  s.back() *= 2;
  return s;
}

void failPackInt4Range(const at::Tensor& input, int64_t flat_index) {
  std::vector<int64_t> idx(input.dim());
  int64_t rem = flat_index;
  for (int64_t d = input.dim() - 1; d >= 0; --d) {
    idx[d] = rem % input.size(d);
    rem /= input.size(d);
  }
  const at::Tensor flat = input.reshape({-1});
  const int64_t v = input.scalar_type() == at::kChar ? flat[flat_index].item<int8_t>() : flat[flat_index].item<uint8_t>();
  TORCH_CHECK_VALUE(false, "pack_int4: input", formatList(idx), " = ", v, " is outside the 4-bit range ",
                    input.scalar_type() == at::kChar ? "[-8, 7] of int8 input" : "[0, 15] of uint8 input");
}

}  // namespace pt2q
