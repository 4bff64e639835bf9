// What the lower-to-native pattern files share: constant lookup, weight packing and the
// _packed_weight{i} constants.
#pragma once

#include <ATen/ATen.h>

#include <set>
#include <string>

#include "graph/graph.h"

namespace pt2q {

/// The constant a get_attr argument reads, or nullptr.
const at::Tensor* constantOf(const Graph& g, const Argument& a);

/// pt2q::pack_weight_int{bits}(w) through the dispatcher.
at::Tensor packWeightConstant(const at::Tensor& w, int bits);

/// `packed` as a new constant _packed_weight{i} (the smallest i free of `taken`, the graph's
/// constants and subgraphs) read by a new get_attr placed before `before`.
Node* addPackedWeight(Graph& g, const std::set<std::string>& taken, at::Tensor packed, Node* before);

/// Static int8 chains dq(x) -> linear / conv2d [-> relu] -> q with a constant int8 per-channel
/// symmetric weight become pt2q.linear_q8 / conv2d_q8 on the input codes
/// (convert/lower_static_to_native.cpp). Returns how many.
int64_t lowerStaticChains(Graph& g, const std::set<std::string>& taken);

/// aten.linear on mx_dequantize(constant codes, constant scales) blocked along K, its input
/// optionally mx_fake_quantize'd along K, becomes pt2q.linear_mx on the codes
/// (convert/lower_mx_to_native.cpp). Returns how many.
int64_t lowerMxLinears(Graph& g);

}  // namespace pt2q
