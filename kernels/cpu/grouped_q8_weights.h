// The grouped conv2d_q8 kernel's weight operands (GroupedQ8, linear_microkernels.h), rearranged per
// call straight from pack_weight_int8's bytes.
#pragma once

#include <cstdint>

namespace pt2q::cpu {

/// From `packed` ("n4k16", `block_bytes` per block of 4 rows) of oc rows of taps x cgq x 4 bytes:
/// wq[(t cgq + j) ocp + o] = row o's bytes 4 (t cgq + j) .. +3 as one uint32, and wsum[t ocp + o] =
/// zx128 * (sum of row o's bytes of tap t), wsum[taps ocp + o] their total. wq and wsum must hold
/// zeros (rows oc..ocp-1 stay so).
void groupedQ8Weights(const uint8_t* packed, int64_t block_bytes, int64_t oc, int64_t taps, int64_t cgq,
                      int64_t ocp, int32_t zx128, uint32_t* wq, int32_t* wsum);

}  // namespace pt2q::cpu
