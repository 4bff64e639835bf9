// convert_pt2e(..., lower_to_native=True): quantized patterns rewritten into pt2q's native ops.
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "graph/graph.h"

namespace pt2q {

/// Rewrites dequantize_per_channel(int8 constant codes, axis 0) -> aten.linear into
/// pt2q.linear_w8a16 with the weight packed now (new constants _packed_weight{i}, names in
/// `taken` avoided); other chains are left as they are. Returns how many linears it lowered.
int64_t lowerToNative(Graph& graph, const std::set<std::string>& taken);

}  // namespace pt2q
