// Per-tensor quantize / dequantize nodes for the static lowerings (static_qdq.h).
#include "convert/static_qdq.h"

#include "graph/pass.h"

#include <set>
#include <utility>

namespace pt2q {
namespace {

bool isInt8(const Argument& a) { return a.is<c10::ScalarType>() && a.as<c10::ScalarType>() == c10::kChar; }
bool isUint8(const Argument& a) { return a.is<c10::ScalarType>() && a.as<c10::ScalarType>() == c10::kByte; }

}  // namespace

std::optional<PerTensor> perTensor(Node* n, const char* target) {
  if (n == nullptr || n->kind() != NodeKind::kCallFunction || n->target() != target || !n->kwargs().empty()) {
    return std::nullopt;
  }
  const auto& a = n->args();
  if (a.size() != 6 || !a[1].is<double>() || !a[2].is<int64_t>() || !a[3].is<int64_t>() || !a[4].is<int64_t>() ||
      !(isInt8(a[5]) || isUint8(a[5]))) {
    return std::nullopt;
  }
  return PerTensor{n, a[0], a[1].as<double>(), a[2].as<int64_t>(), a[3].as<int64_t>(), a[4].as<int64_t>(),
                   isUint8(a[5])};
}

std::optional<ClosingQuantize> closingQuantize(Node* qn) {
  auto q = perTensor(qn, kQuantizePerTensor);
  if (!q || !q->input.isNode()) return std::nullopt;
  Node* y = q->input.node();
  const bool relu =
      y->target() == "aten.relu" && y->args().size() == 1 && y->args()[0].isNode() && y->users().size() == 1;
  return ClosingQuantize{*q, relu ? y->args()[0].node() : y, relu};
}

std::optional<std::vector<Node*>> uint8Group(Node* qn) {
  auto q = perTensor(qn, kQuantizePerTensor);
  if (!q || !q->is_uint8 || q->qmin < 0 || q->qmax > 255) return std::nullopt;
  std::vector<Node*> group{qn};
  for (Node* u : qn->users()) {
    auto d = perTensor(u, kDequantizePerTensor);
    if (!d || !d->input.isNode() || d->input.node() != qn || d->scale != q->scale || d->zero_point != q->zero_point ||
        d->qmin != q->qmin || d->qmax != q->qmax || !d->is_uint8) {
      return std::nullopt;
    }
    group.push_back(u);
  }
  return group;
}

void shiftToInt8(const std::vector<Node*>& nodes) {
  std::set<Node*> done;
  for (Node* n : nodes) {
    if (!done.insert(n).second) continue;
    std::vector<Argument> a = n->args();
    a[2] = a[2].as<int64_t>() - 128;
    a[3] = a[3].as<int64_t>() - 128;
    a[4] = a[4].as<int64_t>() - 128;
    a[5] = c10::kChar;
    n->setArgs(std::move(a));
  }
}

void removeDeadCode(Graph& g) { createDeadCodeEliminationPass()->run(g); }

Node* replaceQuantize(Graph& g, Node* q, const std::string& op, std::vector<Argument> args) {
  Node* native = g.create(NodeKind::kCallFunction, "pt2q." + op, std::move(args), {}, g.uniqueName(op), q);
  native->meta() = q->meta();
  native->meta().annotation.clear();
  g.replaceAllUsesWith(q, native);
  g.erase(q);
  return native;
}

}  // namespace pt2q
