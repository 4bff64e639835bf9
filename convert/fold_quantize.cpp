// fold-quantize: quantize ops on constants (weights) computed once at convert time and stored
// as int8 constants _frozen_param{i} (torchao's constant_fold(_quant_node_constraint)); pure ops
// between the weight and the quantize (t, permute, ...) fold with it, dequantize never does, and
// constants unrelated to quantization stay as they are. A buffer the graph writes (export's
// `aten.copy_(buffer, new_value)` for a mutated buffer) is state, not a constant: what reads it
// stays in the graph (torchao's constant folding leaves mutable buffers alone too).
//
// Before:
//   %w = get_attr "linear.weight"
//   %q = quantized_decomposed.quantize_per_tensor(%w, 0.0039, 0, -127, 127, int8)
//   %dq = quantized_decomposed.dequantize_per_tensor(%q, 0.0039, 0, -127, 127, int8)
// After:
//   %_frozen_param0 = get_attr "_frozen_param0"      // int8
//   %dq = quantized_decomposed.dequantize_per_tensor(%_frozen_param0, 0.0039, 0, -127, 127, int8)
// MX weights: both outputs of pt2q.mx_quantize(%w, ...) (getitem 0 and 1) become constants, the
// packed codes and the uint8 E8M0 scales that pt2q.mx_dequantize reads.
#include <c10/util/Exception.h>

#include <map>
#include <set>

#include "convert/observers_to_qdq.h"
#include "convert/qdq_ops.h"
#include "graph/aliasing.h"
#include "graph/interpreter.h"
#include "graph/pass.h"

namespace pt2q {
namespace {


// Constant: a tensor constant the graph does not write, or a pure operator call (or getitem) on constants only, with at
// least one node input (constructors are not folded: inductor's skip_constructors).
std::set<const Node*> constantNodes(const Graph& g) {
  const std::set<std::string> mutated = mutatedConstants(g);
  std::set<const Node*> constant;
  for (Node* n : g.nodes()) {
    if (n->kind() == NodeKind::kGetAttr) {
      if (g.constants().count(n->target()) && !mutated.count(n->target())) constant.insert(n);
      continue;
    }
    if (n->kind() != NodeKind::kCallFunction) continue;
    const bool pure = n->isOpaque() ? n->target() == "_operator.getitem"
                                    : !n->op()->schema().is_mutable() &&
                                          !n->op()->hasTag(at::Tag::nondeterministic_seeded);
    if (!pure) continue;
    const std::vector<Node*> ins = n->inputs();
    bool all = !ins.empty();
    for (Node* i : ins) all = all && constant.count(i);
    if (all) constant.insert(n);
  }
  return constant;
}

// getitem 0 / 1 (codes / scales) of pt2q.mx_quantize: MX weights fold into both.
bool isMxPart(const Node* n) {
  if (n->target() != "_operator.getitem" || n->args().empty() || !n->args()[0].isNode()) return false;
  const Node* q = n->args()[0].node();
  return q->kind() == NodeKind::kCallFunction && q->target() == "pt2q.mx_quantize";
}

// The value of constant node `target`: its cone copied into a graph of its own and run.
at::Tensor evaluate(const Graph& g, Node* target) {
  std::set<Node*> cone;
  std::vector<Node*> stack{target};
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    if (!cone.insert(n).second) continue;
    for (Node* i : n->inputs()) stack.push_back(i);
  }
  Graph mini;
  std::map<const Node*, Node*> copy;
  for (Node* n : g.nodes()) {
    if (!cone.count(n)) continue;
    auto remap = [&](const Argument& a) { return mapNodes(a, [&](Node* x) { return Argument(copy.at(x)); }); };
    std::vector<Argument> args;
    for (const Argument& a : n->args()) args.push_back(remap(a));
    std::vector<std::pair<std::string, Argument>> kwargs;
    for (const auto& [k, v] : n->kwargs()) kwargs.emplace_back(k, remap(v));
    copy[n] = mini.create(n->kind(), n->target(), std::move(args), std::move(kwargs), n->name());
    if (n->kind() == NodeKind::kGetAttr) mini.constants()[n->target()] = g.constants().at(n->target());
  }
  mini.setOutput(Argument(copy.at(target)));
  const c10::IValue v = Interpreter(mini).run({});
  TORCH_CHECK(v.isTensor(), "fold-quantize: %", target->name(), " did not compute a tensor");
  return v.toTensor();
}

}  // namespace

std::vector<std::string> foldQuantize(Graph& g, const std::set<std::string>& taken) {
  const std::set<const Node*> constant = constantNodes(g);
  std::vector<std::pair<Node*, at::Tensor>> folds;
  for (Node* n : g.nodes()) {
    if (n->kind() == NodeKind::kCallFunction && (quantizeTargets().count(n->target()) || isMxPart(n)) &&
        constant.count(n)) {
      folds.emplace_back(n, evaluate(g, n));  // all values first: a failure changes nothing
    }
  }
  std::vector<std::string> added;
  int64_t next = 0;
  for (auto& [q, value] : folds) {
    std::string name;
    do {
      name = "_frozen_param" + std::to_string(next++);
    } while (taken.count(name) || g.constants().count(name) || g.subgraphs().count(name));
    g.constants()[name] = value;
    Node* attr = g.create(NodeKind::kGetAttr, name, {}, {}, g.uniqueName(name), q);
    attr->meta() = q->meta();
    g.replaceAllUsesWith(q, attr);
    const std::string q_name = q->name();
    g.erase(q);
    g.rename(attr, q_name);  // torchao's constant folding keeps the folded node's name
    added.push_back(name);
  }
  for (Node* n : g.nodes()) {
    if (n->kind() == NodeKind::kGetAttr && n->users().empty()) g.erase(n);
  }
  createDeadCodeEliminationPass()->run(g);
  return added;
}

}  // namespace pt2q
