// duplicate-dq: one dequantize per annotated consumer (torchao's DuplicateDQPass), so that each
// quantized op sees its own dq -> op pattern, which is what backends match.
//
// Before:
//   %dq = quantized_decomposed.dequantize_per_tensor(%q, ...)
//   %a = aten.conv2d(%dq, ...)          // annotated
//   %b = aten.linear(%dq, ...)          // annotated
// After:
//   %dq_1 = quantized_decomposed.dequantize_per_tensor(%q, ...)
//   %dq_2 = quantized_decomposed.dequantize_per_tensor(%q, ...)
//   %a = aten.conv2d(%dq_2, ...)
//   %b = aten.linear(%dq_1, ...)
#include <algorithm>
#include <cctype>
#include <set>

#include "convert/observers_to_qdq.h"
#include "convert/qdq_ops.h"
#include "graph/pass.h"

namespace pt2q {
namespace {


// q's scale comes from choose_qparams through getitem: torchao leaves that dq shared (only the
// asymmetric choose_qparams; the symmetric one is duplicated like any other).
bool isDynamicChain(const Node* dq) {
  if (dq->args().empty() || !dq->args()[0].isNode()) return false;
  const Node* q = dq->args()[0].node();
  if (!callsOneOf(q, quantizeTargets()) || q->args().size() < 2 || !q->args()[1].isNode()) return false;
  const Node* item = q->args()[1].node();
  if (item->target() != "_operator.getitem" || item->args().empty() || !item->args()[0].isNode()) return false;
  return item->args()[0].node()->target() == "quantized_decomposed.choose_qparams.tensor";
}

// FX's name for a copy of `name`: its base (without a trailing _N) numbered past the highest
// number that base has in the graph, as torch.fx's namespace counts.
std::string copyName(const Graph& g, const std::string& name) {
  size_t cut = name.size();
  while (cut > 0 && std::isdigit(static_cast<unsigned char>(name[cut - 1]))) --cut;
  const std::string base = (cut > 0 && cut < name.size() && name[cut - 1] == '_') ? name.substr(0, cut - 1) : name;
  int64_t top = 0;
  for (Node* n : g.nodes()) {
    const std::string& m = n->name();
    if (m.size() > base.size() + 1 && m.compare(0, base.size() + 1, base + "_") == 0 &&
        m.find_first_not_of("0123456789", base.size() + 1) == std::string::npos) {
      top = std::max<int64_t>(top, std::stoll(m.substr(base.size() + 1)));
    }
  }
  for (int64_t i = top + 1;; ++i) {
    const std::string candidate = base + "_" + std::to_string(i);
    if (g.findNode(candidate) == nullptr) return candidate;
  }
}

}  // namespace

int64_t duplicateDequantize(Graph& g, const std::set<std::string>& annotated) {
  int64_t added = 0;
  for (Node* dq : g.nodes()) {
    if (!callsOneOf(dq, dequantizeTargets())) continue;
    std::vector<Node*> users;
    for (Node* u : dq->users()) {
      if (u->target() != "aten.sym_size.int" && u->target() != "aten.sym_numel") users.push_back(u);
    }
    if (users.size() <= 1 || isDynamicChain(dq)) continue;
    for (Node* u : users) {
      if (!annotated.count(u->name())) continue;
      Node* copy = g.create(NodeKind::kCallFunction, dq->target(), dq->args(), dq->kwargs(), copyName(g, dq->name()),
                            g.nextNode(dq));
      copy->meta() = dq->meta();
      u->replaceInput(dq, copy);
      ++added;
    }
  }
  createDeadCodeEliminationPass()->run(g);  // torchao runs it whether or not it duplicated
  return added;
}

}  // namespace pt2q
