// convert_pt2e(..., lower_to_native=True): quantized patterns rewritten into pt2q's native ops.
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "graph/graph.h"

namespace pt2q {

/// Rewrites static int8 chains dq -> linear / conv2d [-> relu] -> q into pt2q.linear_q8 /
/// conv2d_q8, then aten.linear on a dequantized constant int8 weight (per channel along axis 0, or per
/// group; int4 codes in groups of a multiple of 32) into pt2q.linear_w8a16 / linear_w4a16, or
/// linear_w8a8 / linear_w4a8 when its input is a per-token dynamic quantize/dequantize chain,
/// with the weight packed now (new constants _packed_weight{i}, names in `taken` avoided), and
/// aten.linear on an MX weight (mx_dequantize of constant codes) into pt2q.linear_mx; other
/// chains are left as they are. Returns how many linears it lowered.
int64_t lowerToNative(Graph& graph, const std::set<std::string>& taken);

}  // namespace pt2q
