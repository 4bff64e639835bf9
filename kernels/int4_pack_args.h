// Argument checks of pack_int4 / unpack_int4, shared by every backend.
#pragma once

#include <ATen/ATen.h>

namespace pt2q {

/// Parses nibble_order ("low_first" / "high_first"); returns true for high_first.
bool parseNibbleOrder(c10::string_view order, const char* op);
/// pack_int4 input: int8 or uint8, at least 1-d, even last dimension.
void checkPackInt4Input(const at::Tensor& input);
/// unpack_int4 input: uint8, at least 1-d.
void checkUnpackInt4Input(const at::Tensor& packed);
/// Shape with the last dimension halved / doubled.
std::vector<int64_t> packedShape(at::IntArrayRef sizes);
std::vector<int64_t> unpackedShape(at::IntArrayRef sizes);
/// Error for the first value out of range, naming its index in the input.
[[noreturn]] void failPackInt4Range(const at::Tensor& input, int64_t flat_index);

/// Reference implementations (plain ATen, any device); kernels/reference/int4_pack.cpp.
at::Tensor packInt4Ref(const at::Tensor& input, c10::string_view nibble_order);
at::Tensor unpackInt4Ref(const at::Tensor& packed, bool is_signed, c10::string_view nibble_order);

}  // namespace pt2q
