// Union-find sharing, step for step as torchao's prepare._get_edge_or_node_to_group_id, so that
// groups (and therefore observer instances and their names) come out the same.
//
// Before (annotations on the IR):
//   %cat = aten.cat.default([%a, %b])  {annotation = "in %a = spec#0{...}; in %b = shared(%a, %cat);
//                                        out = shared(%a, %cat)"}
// After: no change to the graph; keys (%a -> %cat), (%b -> %cat), %cat all in one group whose
// observer is built from spec#0.
#include "observers/sharing.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <map>

namespace pt2q {
namespace {

std::string keyText(const EdgeOrNode& k) { return k.isEdge() ? "%" + k.node + " -> %" + k.user : "%" + k.node; }

struct UnionFind {
  const std::map<EdgeOrNode, size_t>& index;
  const std::vector<QSpecRef>& refs;
  std::vector<size_t> parent;

  size_t indexOf(const EdgeOrNode& k, const std::string& who) const {
    auto it = index.find(k);
    TORCH_CHECK(it != index.end(), who, ": a SharedQuantizationSpec names ", keyText(k),
                ", which no annotation quantizes (annotate it, or share with an annotated edge or output)");
    return it->second;
  }
  size_t root(size_t k) {
    size_t r = k;
    while (parent[r] != r) r = parent[r];
    while (parent[k] != r) {  // path compression, as torchao's recursion does
      const size_t next = parent[k];
      parent[k] = r;
      k = next;
    }
    return r;
  }
  // torchao's _union: the child's tree joins the parent's, unless the parent's root already
  // points at the child's root through a shared spec (that would make a cycle).
  void unite(size_t parent_key, size_t child_key, const std::vector<EdgeOrNode>& keys) {
    const size_t rp = root(parent_key), rc = root(child_key);
    const QSpecRef& pq = refs[rp];
    if (pq.kind == QSpecRef::Kind::kShared && pq.shared == keys[rc]) {
      parent[rp] = rc;
    } else {
      parent[rc] = rp;
    }
  }
  // torchao's _unwrap_shared_qspec, with a bound instead of unbounded recursion
  // (pytorch/executorch#13842).
  const QSpecRef& unwrap(const QSpecRef& q, const std::string& who) {
    const QSpecRef* cur = &q;
    for (size_t steps = 0; cur->kind == QSpecRef::Kind::kShared; ++steps) {
      TORCH_CHECK(steps <= refs.size(), who, ": SharedQuantizationSpecs form a cycle through ",
                  keyText(cur->shared), "; one of them must name a real spec");
      cur = &refs[root(indexOf(cur->shared, who))];
    }
    return *cur;
  }
};

}  // namespace

SharingPlan computeSharing(const Graph& graph) {
  SharingPlan plan;
  std::map<EdgeOrNode, size_t> index;
  std::map<std::string, Annotation> annotations;
  for (Node* n : graph.nodes()) {
    if (n->meta().annotation.empty()) continue;
    Annotation a = annotationOf(n);
    const std::vector<Node*> inputs = n->inputs();
    for (const auto& [arg, ref] : a.inputs) {
      Node* src = graph.findNode(arg);
      TORCH_CHECK(src != nullptr, "annotation of node %", n->name(), ": input %", arg, " is not a node of this graph");
      TORCH_CHECK(std::find(inputs.begin(), inputs.end(), src) != inputs.end(), "annotation of node %", n->name(),
                  ": %", arg, " is annotated as an input edge, but it is not an input of %", n->name());
      const EdgeOrNode key{arg, n->name()};
      index.emplace(key, plan.keys.size());
      plan.keys.push_back(key);
      plan.refs.push_back(ref);
    }
    for (const auto& [kw, v] : n->kwargs()) {
      bool has_node = false;
      forEachNode(v, [&](Node*) { has_node = true; });
      TORCH_CHECK(!has_node, "annotation of node %", n->name(), ": kwarg '", kw,
                  "' holds a tensor, which annotation does not support (pass it positionally)");
    }
    if (a.output.kind != QSpecRef::Kind::kNone) {
      const EdgeOrNode key{n->name(), ""};
      index.emplace(key, plan.keys.size());
      plan.keys.push_back(key);
      plan.refs.push_back(a.output);
    }
    annotations.emplace(n->name(), std::move(a));
  }

  UnionFind uf{index, plan.refs, {}};
  uf.parent.resize(plan.keys.size());
  for (size_t i = 0; i < uf.parent.size(); ++i) uf.parent[i] = i;
  auto applyShared = [&](size_t k, const std::string& who) {
    if (plan.refs[k].kind == QSpecRef::Kind::kShared) uf.unite(uf.indexOf(plan.refs[k].shared, who), k, plan.keys);
  };
  for (size_t k = 0; k < plan.keys.size(); ++k) {
    const EdgeOrNode& key = plan.keys[k];
    const std::string who = "annotation of node %" + (key.isEdge() ? key.user : key.node);
    if (!key.isEdge()) {
      applyShared(k, who);
      continue;
    }
    const QSpecRef edge_root = uf.unwrap(plan.refs[k], who);
    if (annotations.at(key.user).allow_implicit_sharing) {
      // The other users' edges first, then the producer's output (torchao's order; the reverse
      // could make a cycle).
      auto joinIfSame = [&](const EdgeOrNode& other) {
        auto it = index.find(other);
        if (it == index.end()) return;
        const QSpecRef other_root = uf.unwrap(plan.refs[it->second], who);
        if (other_root.kind == QSpecRef::Kind::kNone || edge_root.kind == QSpecRef::Kind::kNone) {
          // torchao compares attributes against None: equal only if both lack them all, which a
          // spec never does; a None root on the other side is skipped outright.
          return;
        }
        if (sameQuantizationAttrs(other_root, edge_root)) uf.unite(it->second, k, plan.keys);
      };
      for (Node* user : graph.findNode(key.node)->users()) {
        if (user->name() != key.user) joinIfSame({key.node, user->name()});
      }
      joinIfSame({key.node, ""});
    }
    applyShared(k, who);
  }

  std::map<size_t, int> group_of_root;
  plan.group.resize(plan.keys.size());
  for (size_t k = 0; k < plan.keys.size(); ++k) {
    const size_t r = uf.root(k);
    auto [it, fresh] = group_of_root.emplace(r, static_cast<int>(plan.group_spec.size()));
    if (fresh) {
      const EdgeOrNode& key = plan.keys[k];
      plan.group_spec.push_back(uf.unwrap(plan.refs[k], "annotation of node %" + (key.isEdge() ? key.user : key.node)));
    }
    plan.group[k] = it->second;
  }
  return plan;
}

}  // namespace pt2q
