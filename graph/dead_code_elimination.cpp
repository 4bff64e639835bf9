// dead-code-elimination: erases unused nodes that have no effect (see pass.h).
#include <vector>

#include "graph/pass.h"

namespace pt2q {
namespace {

bool isRemovable(const Node* n) {
  if (!n->users().empty()) return false;
  if (n->kind() == NodeKind::kGetAttr) return true;
  if (n->kind() != NodeKind::kCallFunction) return false;
  if (n->isOpaque()) return n->target() == "_operator.getitem";  // pure; other Python calls may not be
  return !n->op()->schema().is_mutable();
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
