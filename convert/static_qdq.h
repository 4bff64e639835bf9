// What the static lowering files (lower_static_to_native.cpp, lower_static_add.cpp) read and
// rewrite: per-tensor quantize / dequantize nodes with literal qparams, and the move of a uint8
// quantize with its dequantizes to int8 (codes, zero point and clamp 128 lower: no value changes;
// lower_static_to_native.cpp's header says why).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace pt2q {

inline constexpr const char* kQuantizePerTensor = "quantized_decomposed.quantize_per_tensor";
inline constexpr const char* kDequantizePerTensor = "quantized_decomposed.dequantize_per_tensor";

/// A per-tensor int8 or uint8 quantize / dequantize with literal qparams: (input, scale, zp, qmin,
/// qmax, dtype).
struct PerTensor {
  Node* node;
  Argument input;
  double scale;
  int64_t zero_point, qmin, qmax;
  bool is_uint8;
};

/// `n` as such a node of `target` (kQuantizePerTensor or kDequantizePerTensor), or nothing.
std::optional<PerTensor> perTensor(Node* n, const char* target);

/// A per-tensor quantize that closes a chain, and the op whose output it quantizes, past a relu
/// between the two that feeds nothing else (folded later into the clamp).
struct ClosingQuantize {
  PerTensor q;
  Node* op;
  bool relu;
};
std::optional<ClosingQuantize> closingQuantize(Node* q);

/// A uint8 quantize and its dequantizes, which move to int8 together, or nothing when a user is
/// not a dequantize of the same qparams.
std::optional<std::vector<Node*>> uint8Group(Node* q);

/// Rewrites the nodes of uint8Groups to int8 (zero point, qmin and qmax 128 lower, dtype int8),
/// each once: a quantize may feed one lowered site and close another.
void shiftToInt8(const std::vector<Node*>& nodes);

/// A new call of pt2q.{op}(args) in place of the quantize `q`, which it replaces for q's users and
/// whose meta it takes (the annotation dropped); q is erased.
Node* replaceQuantize(Graph& g, Node* q, const std::string& op, std::vector<Argument> args);

}  // namespace pt2q
