// Node use-list maintenance and operator lookup (see node.h).
#include "graph/node.h"

#include <algorithm>

#include "graph/graph.h"

namespace pt2q {

const char* nodeKindName(NodeKind k) {
  switch (k) {
    case NodeKind::kPlaceholder: return "placeholder";
    case NodeKind::kGetAttr: return "get_attr";
    case NodeKind::kCallFunction: return "call_function";
    case NodeKind::kCallModule: return "call_module";
    case NodeKind::kOutput: return "output";
  }
  return "?";
}

bool NodeMeta::operator==(const NodeMeta& o) const {
  return types == o.types && tuple_output == o.tuple_output && nn_module_stack == o.nn_module_stack &&
         stack_trace == o.stack_trace && annotation == o.annotation && extra == o.extra;
}

std::vector<Node*> Node::inputs() const {
  std::vector<Node*> out;
  auto add = [&](Node* n) {
    if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
  };
  for (const Argument& a : args_) forEachNode(a, add);
  for (const auto& kv : kwargs_) forEachNode(kv.second, add);
  return out;
}

void Node::addUser(Node* u) {
  if (std::find(users_.begin(), users_.end(), u) == users_.end()) users_.push_back(u);
}

void Node::removeUser(Node* u) { users_.erase(std::remove(users_.begin(), users_.end(), u), users_.end()); }

void Node::setArgs(std::vector<Argument> args, std::vector<std::pair<std::string, Argument>> kwargs) {
  for (Node* in : inputs()) in->removeUser(this);
  args_ = std::move(args);
  kwargs_ = std::move(kwargs);
  for (Node* in : inputs()) in->addUser(this);
}

void Node::replaceInput(Node* from, Node* to) {
  std::vector<Argument> args;
  for (const Argument& a : args_) args.push_back(replaceNode(a, from, to));
  std::vector<std::pair<std::string, Argument>> kwargs;
  for (const auto& kv : kwargs_) kwargs.emplace_back(kv.first, replaceNode(kv.second, from, to));
  setArgs(std::move(args), std::move(kwargs));
}

std::optional<c10::OperatorHandle> findOperator(const std::string& target) {
  const size_t dot = target.find('.');
  if (dot == std::string::npos || dot == 0) return std::nullopt;
  const size_t dot2 = target.find('.', dot + 1);
  const std::string ns = target.substr(0, dot);
  const std::string name = target.substr(dot + 1, dot2 == std::string::npos ? std::string::npos : dot2 - dot - 1);
  std::string overload = dot2 == std::string::npos ? "" : target.substr(dot2 + 1);
  if (overload == "default") overload = "";
  if (name.empty() || overload.find('.') != std::string::npos) return std::nullopt;
  return c10::Dispatcher::singleton().findSchema(c10::OperatorName(ns + "::" + name, overload));
}

}  // namespace pt2q
