// convert_pt2e(use_reference_representation=True): quantized patterns as integer arithmetic.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "graph/graph.h"

namespace pt2q {

/// Rewrites int8 quantize/dequantize patterns into torchao's reference representation (contract
/// §2.12): static linear, dynamic linear, convolution, add, add-relu and max_pool2d chains into
/// integer arithmetic with torch's out_dtype, then every remaining int8 quantize/dequantize
/// (per-tensor and per-channel) into its formula. Other dtypes are left as they are. Returns
/// how many times each rewrite applied.
std::map<std::string, int64_t> rewriteToReferenceRepresentation(Graph& graph);

}  // namespace pt2q
