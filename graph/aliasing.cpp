// isWritten / mutatedConstants: what the graph writes (see aliasing.h).
#include "graph/aliasing.h"

#include <algorithm>
#include <vector>

namespace pt2q {
namespace {

enum class Use : uint8_t { kNone, kAlias, kWrite };

// How `user` uses `value`: writes it, may return a view of it, or neither.
Use useOf(const Node* user, const Node* value) {
  if (user->kind() == NodeKind::kCallModule) return Use::kAlias;
  if (user->kind() != NodeKind::kCallFunction) return Use::kNone;
  if (user->isOpaque()) {
    const bool indexed = user->target() == "_operator.getitem" && !user->args().empty() &&
                         user->args()[0].isNode() && user->args()[0].node() == value;
    return indexed ? Use::kAlias : Use::kNone;
  }
  const c10::FunctionSchema& schema = user->op()->schema();
  Use use = Use::kNone;
  auto bound = [&](const Argument& a, size_t i) {
    if (i >= schema.arguments().size()) return;
    const c10::AliasInfo* info = schema.arguments()[i].alias_info();
    if (info == nullptr) return;
    bool holds = false;
    forEachNode(a, [&](Node* x) { holds = holds || x == value; });
    if (holds) use = std::max(use, info->isWrite() ? Use::kWrite : Use::kAlias);
  };
  for (size_t i = 0; i < user->args().size(); ++i) bound(user->args()[i], i);
  for (const auto& [name, a] : user->kwargs()) {
    for (size_t i = 0; i < schema.arguments().size(); ++i) {
      if (schema.arguments()[i].name() == name) bound(a, i);
    }
  }
  return use;
}

}  // namespace

bool isWritten(const Node* value) {
  std::vector<const Node*> stack{value};
  std::set<const Node*> seen;
  while (!stack.empty()) {
    const Node* v = stack.back();
    stack.pop_back();
    if (!seen.insert(v).second) continue;
    for (const Node* u : v->users()) {
      const Use use = useOf(u, v);
      if (use == Use::kWrite) return true;
      if (use == Use::kAlias) stack.push_back(u);
    }
  }
  return false;
}

std::set<std::string> mutatedConstants(const Graph& g) {
  std::set<std::string> mutated;
  for (const Node* n : g.nodes()) {
    if (n->kind() == NodeKind::kGetAttr && g.constants().count(n->target()) && isWritten(n)) {
      mutated.insert(n->target());
    }
  }
  return mutated;
}

bool isMutatedConstant(const Graph& g, const std::string& path) {
  for (const Node* n : g.nodes()) {
    if (n->kind() == NodeKind::kGetAttr && n->target() == path && isWritten(n)) return true;
  }
  return false;
}

}  // namespace pt2q
