// What the static lowering files (lower_static_to_native.cpp, lower_static_add.cpp) read and
// rewrite: per-tensor quantize / dequantize nodes with literal qparams, and the move of a uint8
// quantize with its dequantizes to int8 (codes, zero point and clamp 128 lower: no value changes;
// lower_static_to_native.cpp's header says why).
#pragma once

#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

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

/// A static chain's weight: a constant int8 tensor under dequantize_per_channel (axis 0, all-zero
/// zero points, its scales passed on as they are) or under a per-tensor dequantize (zero point 0,
/// its scale then a new constant of one fp32 value per output channel).
struct StaticWeight {
  const at::Tensor* codes;
  Argument scales;                       // the per-channel dequantize's scales
  std::optional<at::Tensor> new_scales;  // or a per-tensor weight's, [out channels]
};
std::optional<StaticWeight> staticWeight(const Graph& g, const Argument& dq);

/// `w` packed for linear_q8 / conv2d_q8 (pack_weight_int8 of a conv weight's channels-last rows
/// (out, kh, kw, in)) as a new constant before `before`, with its scales argument (a per-tensor
/// weight's as a new constant too).
std::pair<Node*, Argument> packStaticWeight(Graph& g, const std::set<std::string>& taken, const StaticWeight& w,
                                            Node* before);

/// An int[] argument.
ArgList intList(const std::vector<int64_t>& v);

/// aten.conv2d's stride, padding, dilation (one value or two) and a literal positive groups, from
/// its arguments past the bias (defaults where absent); nothing for other forms.
struct ConvArgs {
  std::vector<int64_t> stride, padding, dilation;
  int64_t groups = 1;
};
std::optional<ConvArgs> convArgs(const std::vector<Argument>& args);

/// A node's recorded shape; convert's quantize / dequantize nodes record none, so theirs is their
/// input's (they keep the shape). Nothing when unknown.
std::optional<std::vector<Dim>> shapeOf(Node* n);

/// A per-tensor quantize that closes a chain, and the op whose output it quantizes, past an
/// activation clamp between the two that feeds nothing else: relu, or hardtanh with literal bounds
/// (nn.ReLU6, and X86InductorQuantizer's conv -> hardtanh fusion). The activation may be in place
/// (aten.relu_, nn.ReLU(inplace=True)): it then overwrites the op's output, which every site
/// requires to feed only the activation, so no other node sees the difference.
struct ClosingQuantize {
  PerTensor q;
  Node* op;
  bool clamped;                  // an activation between op and q, folded into the codes' clamp
  float lo = 0.0f, hi = 0.0f;    // its range (relu: [0, inf))
};
std::optional<ClosingQuantize> closingQuantize(Node* q);

/// The closing quantize's clamp [qmin, qmax] in its own codes, narrowed by the activation it
/// folds: quantize is non-decreasing, so quantize(clamp(y, lo, hi)) = clamp(quantize(y),
/// quantize(lo), quantize(hi)), each bound quantized as torch's quantize_per_tensor does it in
/// fp32 (relu's lower bound is then the zero point).
std::pair<int64_t, int64_t> clampCodes(const ClosingQuantize& c);

/// aten.add.Tensor, or aten.add_.Tensor (`x += y`) whose first operand, which it overwrites, feeds
/// nothing else: for every user the two then compute the same value, and a lowering that reads the
/// operands' codes instead loses nothing. Two tensor operands, no alpha.
bool isPureAdd(const Node* add);
/// The same for aten.mul.Tensor / aten.mul_.Tensor (`x *= y`).
bool isPureMul(const Node* mul);

/// A uint8 quantize and its dequantizes, which move to int8 together, or nothing when a user is
/// not a dequantize of the same qparams.
std::optional<std::vector<Node*>> uint8Group(Node* q);

/// Rewrites the nodes of uint8Groups to int8 (zero point, qmin and qmax 128 lower, dtype int8),
/// each once: a quantize may feed one lowered site and close another.
void shiftToInt8(const std::vector<Node*>& nodes);

/// The graph without its dead nodes (the dead-code-elimination pass).
void removeDeadCode(Graph& g);

/// A new call of pt2q.{op}(args) in place of `n` (a static lowering's quantize, or a convolution),
/// which it replaces for n's users and whose meta it takes (the annotation dropped); n is erased.
Node* replaceWithNative(Graph& g, Node* n, const std::string& op, std::vector<Argument> args);

/// The driver of a static lowering: every site `match(node)` finds (a struct with the quantize it
/// replaces as `q` and the nodes to move to int8 as `to_int8`), all found before the graph changes;
/// the uint8 moves; `emit(site)` returning the native op's name and arguments for each (reading its
/// inputs then, as an earlier site may have replaced their producers); dead code removed. Returns
/// how many sites were lowered.
template <class Match, class Emit>
int64_t lowerQuantizeSites(Graph& g, Match match, Emit emit) {
  using Site = typename decltype(match(std::declval<Node*>()))::value_type;
  std::vector<Site> sites;
  for (Node* n : g.nodes()) {
    if (auto s = match(n)) sites.push_back(std::move(*s));
  }
  std::vector<Node*> to_int8;
  for (const Site& s : sites) to_int8.insert(to_int8.end(), s.to_int8.begin(), s.to_int8.end());
  shiftToInt8(to_int8);
  for (const Site& s : sites) {
    auto [op, args] = emit(s);
    replaceWithNative(g, s.q, op, std::move(args));
  }
  removeDeadCode(g);
  return static_cast<int64_t>(sites.size());
}

}  // namespace pt2q
