// The quantize/dequantize operators convert emits, by IR target, for the passes that look for them.
#pragma once

#include <set>
#include <string>

#include "graph/node.h"

namespace pt2q {

// torchao's affine quantize (what its affine observers convert into) folds and ports metadata
// like the others; its dequantize is not duplicated by duplicate-dq, as in torchao.
inline const std::set<std::string>& quantizeTargets() {
  static const std::set<std::string> s = {"quantized_decomposed.quantize_per_tensor",
                                          "quantized_decomposed.quantize_per_tensor.tensor",
                                          "quantized_decomposed.quantize_per_channel",
                                          "quantized_decomposed.quantize_per_channel_group", "torchao.quantize_affine"};
  return s;
}

inline const std::set<std::string>& dequantizeTargets() {
  static const std::set<std::string> s = {"quantized_decomposed.dequantize_per_tensor",
                                          "quantized_decomposed.dequantize_per_tensor.tensor",
                                          "quantized_decomposed.dequantize_per_channel",
                                          "quantized_decomposed.dequantize_per_channel_group"};
  return s;
}

inline bool callsOneOf(const Node* n, const std::set<std::string>& targets) {
  return n->kind() == NodeKind::kCallFunction && targets.count(n->target()) > 0;
}

}  // namespace pt2q
