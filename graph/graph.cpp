// Graph construction and mutation (see graph.h for the invariants).
#include "graph/graph.h"

#include <c10/util/Exception.h>

#include <algorithm>

namespace pt2q {

namespace {

// FX-like default names: the operator name of a call ("add" for aten.add.Tensor), else the last
// component of the target ("getitem" for _operator.getitem, "weight" for layer.weight).
std::string defaultName(const std::string& target, bool is_operator) {
  if (is_operator) {
    const size_t a = target.find('.') + 1;
    return target.substr(a, target.find('.', a) - a);
  }
  const size_t cut = target.find_last_of('.');
  return cut == std::string::npos ? target : target.substr(cut + 1);
}

}  // namespace

Graph::Graph() = default;

std::vector<Node*> Graph::nodes() const {
  std::vector<Node*> out;
  out.reserve(nodes_.size());
  for (const auto& n : nodes_) out.push_back(n.get());
  return out;
}

std::vector<Node*> Graph::placeholders() const {
  std::vector<Node*> out;
  for (const auto& n : nodes_) {
    if (n->kind() == NodeKind::kPlaceholder) out.push_back(n.get());
  }
  return out;
}

std::string Graph::uniqueName(const std::string& hint) const {
  const std::string base = hint.empty() ? "v" : hint;
  if (!by_name_.count(base)) return base;
  for (int64_t i = 1;; ++i) {
    std::string candidate = base + "_" + std::to_string(i);
    if (!by_name_.count(candidate)) return candidate;
  }
}

Node* Graph::findNode(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

void Graph::rename(Node* n, const std::string& name) {
  TORCH_CHECK(n->graph_ == this, "Graph::rename: node %", n->name(), " belongs to another graph");
  if (name == n->name_) return;
  TORCH_CHECK(!by_name_.count(name), "Graph::rename: the name %", name, " is taken");
  by_name_.erase(n->name_);
  n->name_ = name;
  by_name_[name] = n;
}

Node* Graph::insert(std::unique_ptr<Node> n, Node* before) {
  Node* raw = n.get();
  auto where = before != nullptr ? before->pos_ : nodes_.end();
  raw->pos_ = nodes_.insert(where, std::move(n));
  by_name_[raw->name_] = raw;
  return raw;
}

Node* Graph::addPlaceholder(const std::string& name) {
  Node* before = nullptr;
  for (const auto& n : nodes_) {
    if (n->kind() != NodeKind::kPlaceholder) {
      before = n.get();
      break;
    }
  }
  return insert(std::unique_ptr<Node>(new Node(this, NodeKind::kPlaceholder, uniqueName(name), name)), before);
}

Node* Graph::create(NodeKind kind, const std::string& target, std::vector<Argument> args,
                    std::vector<std::pair<std::string, Argument>> kwargs, const std::string& name, Node* before) {
  TORCH_CHECK(kind == NodeKind::kGetAttr || kind == NodeKind::kCallFunction || kind == NodeKind::kCallModule,
              "Graph::create makes get_attr, call_function and call_module nodes, not ", nodeKindName(kind));
  TORCH_CHECK(before == nullptr || before->graph_ == this, "Graph::create: insertion point %", before->name(),
              " belongs to another graph");
  std::optional<c10::OperatorHandle> op;
  if (kind == NodeKind::kCallFunction) op = findOperator(target);
  std::unique_ptr<Node> n(new Node(this, kind, uniqueName(name.empty() ? defaultName(target, op.has_value()) : name),
                                   target));
  n->op_ = std::move(op);
  Node* raw = insert(std::move(n), before != nullptr ? before : output_);
  raw->setArgs(std::move(args), std::move(kwargs));
  return raw;
}

Node* Graph::setOutput(Argument value) {
  TORCH_CHECK(output_ == nullptr, "Graph::setOutput: the graph already has its output node %", output_->name());
  output_ = insert(std::unique_ptr<Node>(new Node(this, NodeKind::kOutput, uniqueName("output"), "output")), nullptr);
  output_->setArgs({std::move(value)});
  return output_;
}

void Graph::replaceAllUsesWith(Node* from, Node* to) {
  TORCH_CHECK(from->graph_ == this && to->graph_ == this, "Graph::replaceAllUsesWith: %", from->name(), " and %",
              to->name(), " must both belong to this graph");
  const std::vector<Node*> users = from->users();
  for (Node* u : users) u->replaceInput(from, to);
}

void Graph::erase(Node* n) {
  TORCH_CHECK(n->graph_ == this, "Graph::erase: node %", n->name(), " belongs to another graph");
  TORCH_CHECK(n->users().empty(), "Graph::erase: node %", n->name(), " still has ", n->users().size(),
              " user(s), the first %", n->users().empty() ? "" : n->users()[0]->name());
  n->setArgs({}, {});
  if (n == output_) output_ = nullptr;
  by_name_.erase(n->name_);
  nodes_.erase(n->pos_);
}

void Graph::moveBefore(Node* n, Node* pos) {
  TORCH_CHECK(n->graph_ == this && pos->graph_ == this, "Graph::moveBefore: nodes of another graph");
  if (n == pos) return;
  nodes_.splice(pos->pos_, nodes_, n->pos_);
}

Node* Graph::nextNode(const Node* n) const {
  TORCH_CHECK(n->graph_ == this, "Graph::nextNode: a node of another graph");
  auto it = std::next(n->pos_);
  return it == nodes_.end() ? nullptr : it->get();
}

size_t Graph::indexOf(const Node* n) const {
  size_t i = 0;
  for (const auto& m : nodes_) {
    if (m.get() == n) return i;
    ++i;
  }
  TORCH_CHECK(false, "Graph::indexOf: node %", n->name(), " is not in this graph");
}

}  // namespace pt2q
