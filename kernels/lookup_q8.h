// The 256-entry code lookup (lookup_q8): its checks, shared by every backend, and the reference.
#pragma once

#include <ATen/ATen.h>

namespace pt2q {

/// lookup_q8's checks: int8 / uint8 codes, a 1-d int8 / uint8 table of 256 entries on the codes'
/// device.
void checkLookupQ8(const at::Tensor& codes, const at::Tensor& table);

/// The output: the table's dtype, the codes' shape and strides when they are dense (a channels-last
/// input stays channels last), contiguous otherwise.
at::Tensor lookupQ8Output(const at::Tensor& codes, const at::Tensor& table);

/// Reference (plain ATen, any device): the table indexed by the codes as unsigned bytes.
at::Tensor lookupQ8Ref(const at::Tensor& codes, const at::Tensor& table);

}  // namespace pt2q
