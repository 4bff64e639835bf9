// The quantized_decomposed operators convert emits, by IR target, for the passes that look for them.
#pragma once

#include <set>
#include <string>

#include "graph/node.h"

namespace pt2q {

inline const std::set<std::string>& quantizeTargets() {
  static const std::set<std::string> s = {"quantized_decomposed.quantize_per_tensor",
                                          "quantized_decomposed.quantize_per_tensor.tensor",
                                          "quantized_decomposed.quantize_per_channel"};
  return s;
}

inline const std::set<std::string>& dequantizeTargets() {
  static const std::set<std::string> s = {"quantized_decomposed.dequantize_per_tensor",
                                          "quantized_decomposed.dequantize_per_tensor.tensor",
                                          "quantized_decomposed.dequantize_per_channel"};
  return s;
}

inline bool callsOneOf(const Node* n, const std::set<std::string>& targets) {
  return n->kind() == NodeKind::kCallFunction && targets.count(n->target()) > 0;
}

}  // namespace pt2q
