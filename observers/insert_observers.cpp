// Observer insertion, following torchao's prepare._maybe_insert_input_and_output_observers_for_node
// decision for decision, so that the same observers land in the same places under the same names.
//
// Before (conv input and output annotated, all in different groups):
//   %conv = aten.conv2d.default(%x, %w, %b)
//   %relu = aten.relu.default(%conv)
// After:
//   %activation_post_process_0 = call_module[activation_post_process_0](%x)
//   %activation_post_process_1 = call_module[activation_post_process_1](%w)
//   %conv = aten.conv2d.default(%activation_post_process_0, %activation_post_process_1, %b)
//   %activation_post_process_2 = call_module[activation_post_process_2](%conv)
//   %relu = aten.relu.default(%activation_post_process_2)
#include "observers/insert_observers.h"

#include <c10/util/Exception.h>

namespace pt2q {
namespace {

bool isSingleTensor(const Node* n) {
  const NodeMeta& m = n->meta();
  return !m.tuple_output && m.types.size() == 1 && m.types[0].kind == ValueType::Kind::kTensor;
}

// torchao's collect_producer_nodes + the buffer test of _is_mutable_buffer_arg: does `arg` come
// only from constants (no placeholder upstream), at least one of them a buffer?
bool fedOnlyByBuffers(Node* arg, const std::set<std::string>& buffers) {
  std::vector<Node*> producers{arg}, frontier{arg};
  while (!frontier.empty()) {
    Node* n = frontier.back();
    frontier.pop_back();
    std::vector<Node*> direct;
    for (const Argument& a : n->args()) {
      if (a.isNode()) direct.push_back(a.node());
    }
    for (const auto& kv : n->kwargs()) {
      if (kv.second.isNode()) direct.push_back(kv.second.node());
    }
    for (Node* p : direct) {
      if (p->kind() == NodeKind::kPlaceholder) return false;
      producers.push_back(p);
      if (!(p->kind() == NodeKind::kCallFunction && p->target() == "builtins.getattr")) frontier.push_back(p);
    }
  }
  for (Node* p : producers) {
    if (p->kind() == NodeKind::kGetAttr && buffers.count(p->target())) return true;
  }
  return false;
}

// An in-place op writing into a buffer (copy_, add_, ...): its destination is not observed
// (pytorch/ao#4466).
bool isMutableBufferArg(const Node* node, Node* arg, const std::set<std::string>& buffers) {
  if (node->kind() != NodeKind::kCallFunction || !node->op() || node->args().empty()) return false;
  if (!node->args()[0].isNode() || node->args()[0].node() != arg) return false;
  const auto& schema = node->op()->schema();
  if (schema.arguments().empty()) return false;
  const auto& alias = schema.arguments()[0].alias_info();
  if (!alias || !alias->isWrite()) return false;
  return fedOnlyByBuffers(arg, buffers);
}

struct Inserter {
  Graph& g;
  const std::map<EdgeOrNode, int>& instance_of;
  const std::set<std::string>& taken;
  const std::set<std::string>& buffers;
  std::map<const Node*, int> observer_instance;  // inserted observer nodes
  std::vector<InsertedObserver> inserted;
  int next_index = 0;

  std::string freshAttr() {
    for (;; ++next_index) {
      std::string name = "activation_post_process_" + std::to_string(next_index);
      if (!taken.count(name)) {
        ++next_index;
        return name;
      }
    }
  }
  Node* insertAfter(Node* value, int instance) {
    const std::string attr = freshAttr();
    Node* obs = g.create(NodeKind::kCallModule, attr, {Argument(value)}, {}, g.uniqueName(attr), g.nextNode(value));
    observer_instance[obs] = instance;
    inserted.push_back({obs->name(), attr, instance});
    return obs;
  }
  int instanceOf(const EdgeOrNode& k) const {
    auto it = instance_of.find(k);
    return it == instance_of.end() ? -1 : it->second;
  }
  Argument inputFor(Node* node, const Argument& a) {
    if (!a.isNode()) return a;
    Node* arg = a.node();
    Node* original = arg;
    while (observer_instance.count(original)) original = original->args()[0].node();
    const int inst = instanceOf({original->name(), node->name()});
    if (inst < 0 || isMutableBufferArg(node, original, buffers)) return a;
    if (instanceOf({original->name(), ""}) == inst) return a;  // the producer's output observer serves
    for (Node* u : arg->users()) {
      auto it = observer_instance.find(u);
      if (it != observer_instance.end() && it->second == inst) return Argument(u);  // inserted for another user
    }
    return Argument(insertAfter(arg, inst));
  }
  void visit(Node* node) {
    std::vector<Argument> args;
    for (const Argument& a : node->args()) args.push_back(mapNodes(a, [&](Node* n) { return inputFor(node, Argument(n)); }));
    node->setArgs(std::move(args), node->kwargs());
    if (!isSingleTensor(node)) return;
    const int inst = instanceOf({node->name(), ""});
    if (inst < 0) return;
    Node* obs = insertAfter(node, inst);
    const std::vector<Node*> users = node->users();
    for (Node* u : users) {
      if (u != obs) u->replaceInput(node, obs);
    }
  }
};

}  // namespace

std::vector<InsertedObserver> insertObservers(Graph& graph, const std::map<EdgeOrNode, int>& instance_of,
                                              const std::set<std::string>& taken,
                                              const std::set<std::string>& buffers) {
  for (const auto& [k, inst] : instance_of) {  // check everything before changing anything
    TORCH_CHECK(graph.findNode(k.node) != nullptr, "insertObservers: %", k.node, " is not a node of this graph");
    TORCH_CHECK(!k.isEdge() || graph.findNode(k.user) != nullptr, "insertObservers: %", k.user,
                " is not a node of this graph");
  }
  Inserter ins{graph, instance_of, taken, buffers, {}, {}, 0};
  for (Node* n : graph.nodes()) {  // a snapshot: the inserted nodes are not visited
    if (!n->meta().annotation.empty()) ins.visit(n);
  }
  return ins.inserted;
}

}  // namespace pt2q
