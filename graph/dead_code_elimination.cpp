// dead-code-elimination: erases unused nodes that have no effect (see pass.h).
#include <vector>

#include <ATen/core/alias_info.h>
#include <ATen/core/function_schema.h>

#include "graph/pass.h"

namespace pt2q {
namespace {

// The tensor that `v` (an argument `user` writes to) is, followed back through in-place ops and
// views to the call that made it: true when that call made a new tensor and no node on the way has
// a user besides the next, so that nothing but `user` can see what it writes. (In-place ops and
// views return an alias of the argument that shares their return's alias set.)
bool writesOnlyATemporary(const Node* user, const Node* v) {
  for (;;) {
    if (v->users().size() != 1 || v->users().front() != user) return false;
    if (v->kind() != NodeKind::kCallFunction || v->isOpaque()) return false;  // graph inputs, state
    const c10::FunctionSchema& s = v->op()->schema();
    if (s.returns().size() != 1) return false;
    const c10::AliasInfo* ret = s.returns()[0].alias_info();
    if (ret == nullptr) return true;
    size_t from = s.arguments().size();
    for (size_t j = 0; j < s.arguments().size(); ++j) {
      const c10::AliasInfo* a = s.arguments()[j].alias_info();
      if (a != nullptr && a->beforeSets() == ret->beforeSets()) {
        from = j;
        break;
      }
    }
    if (from >= v->args().size() || !v->args()[from].isNode()) return false;
    user = v;
    v = v->args()[from].node();
  }
}

// A call that writes only into temporaries nothing else reads (writesOnlyATemporary): unused, it
// has no effect. Such calls are what a lowering leaves of `relu_(conv(...))` or `dq(a).add_(b)`
// once it has replaced their chain's output.
bool writesNothingVisible(const Node* n) {
  const c10::FunctionSchema& s = n->op()->schema();
  for (size_t i = 0; i < s.arguments().size(); ++i) {
    const c10::AliasInfo* a = s.arguments()[i].alias_info();
    if (a == nullptr || !a->isWrite()) continue;
    if (i >= n->args().size()) return false;  // written through a keyword argument (out=): keep
    if (!n->args()[i].isNode() || !writesOnlyATemporary(n, n->args()[i].node())) return false;
  }
  return true;
}

bool isRemovable(const Node* n) {
  if (!n->users().empty()) return false;
  if (n->kind() == NodeKind::kGetAttr) return true;
  if (n->kind() != NodeKind::kCallFunction) return false;
  if (n->isOpaque()) return n->target() == "_operator.getitem";  // pure; other Python calls may not be
  return !n->op()->schema().is_mutable() || writesNothingVisible(n);
}

class DeadCodeEliminationPass final : public Pass {
 public:
  PassResult run(Graph& graph) override {
    PassResult r;
    // Reverse order: erasing a node can leave its inputs unused, and they come before it.
    const std::vector<Node*> nodes = graph.nodes();
    for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
      if (isRemovable(*it)) {
        graph.erase(*it);
        ++r.num_rewrites;
      }
    }
    r.changed = r.num_rewrites > 0;
    return r;
  }
};

}  // namespace

std::unique_ptr<Pass> createDeadCodeEliminationPass() { return std::make_unique<DeadCodeEliminationPass>(); }

void registerGraphPasses(PassRegistry& registry) {
  registry.add({"dead-code-elimination", "Erase unused nodes that have no effect", createDeadCodeEliminationPass});
  registry.add({"simplify", "Value-preserving algebraic rewrites (neg-neg, relu-relu, eval-dropout)", createSimplifyPass});
}

}  // namespace pt2q
