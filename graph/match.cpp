// The subgraph matcher (contract and complexity in match.h).
#include "graph/match.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <set>

#include "graph/ir_text.h"

namespace pt2q {

const Argument& Match::argument(const std::string& name) const {
  auto it = bindings_.find(name);
  TORCH_CHECK(it != bindings_.end(), "Match: the pattern has no placeholder %", name);
  return it->second;
}

Node* Match::value(const std::string& name) const {
  auto b = bindings_.find(name);
  if (b != bindings_.end()) return b->second.isNode() ? b->second.node() : nullptr;
  auto m = matched_.find(name);
  TORCH_CHECK(m != matched_.end(), "Match: the pattern has no value %", name);
  return m->second;
}

SubgraphMatcher::SubgraphMatcher(std::string_view pattern_text, std::string name) : name_(std::move(name)) {
  pattern_ = parseGraph(pattern_text, "pattern " + name_);
  const Node* out = pattern_->output();
  TORCH_CHECK(out->args().size() == 1, "pattern ", name_, ": return one value");
  Argument a = out->args()[0];
  if (a.is<ArgTuple>() && a.as<ArgTuple>().items.size() == 1) a = a.as<ArgTuple>().items[0];
  TORCH_CHECK(a.isNode() && a.node()->kind() != NodeKind::kPlaceholder, "pattern ", name_,
              ": the returned value must be a node of the pattern, not a placeholder or a literal");
  root_ = a.node();
  for (const Node* n : pattern_->nodes()) {
    if (n->kind() == NodeKind::kPlaceholder || n->kind() == NodeKind::kOutput || n == root_) continue;
    TORCH_CHECK(!n->users().empty(), "pattern ", name_, ": node %", n->name(), " does not reach the returned value");
  }
}

namespace {

struct State {
  std::map<const Node*, Node*> matched;  // pattern node -> graph node
  std::set<const Node*> used;            // graph nodes already matched
  std::map<std::string, Argument> bindings;
  std::string why;
};

bool matchNode(const Node* p, Node* g, State& s);

bool matchArg(const Argument& p, const Argument& g, State& s, const Node* at) {
  if (p.isNode() && p.node()->kind() == NodeKind::kPlaceholder) {
    auto [it, fresh] = s.bindings.emplace(p.node()->name(), g);
    if (!fresh && !(it->second == g)) {
      s.why = "placeholder %" + p.node()->name() + " would bind both " + printArgument(it->second) + " and " +
              printArgument(g);
      return false;
    }
    return true;
  }
  if (p.isNode()) {
    if (!g.isNode()) {
      s.why = "%" + at->name() + " has " + printArgument(g) + " where the pattern has a node";
      return false;
    }
    return matchNode(p.node(), g.node(), s);
  }
  if (p.is<ArgList>() || p.is<ArgTuple>()) {
    const bool list = p.is<ArgList>();
    if ((list && !g.is<ArgList>()) || (!list && !g.is<ArgTuple>())) {
      s.why = "%" + at->name() + " has " + printArgument(g) + " where the pattern has " + printArgument(p);
      return false;
    }
    const auto& pi = list ? p.as<ArgList>().items : p.as<ArgTuple>().items;
    const auto& gi = list ? g.as<ArgList>().items : g.as<ArgTuple>().items;
    if (pi.size() != gi.size()) {
      s.why = "%" + at->name() + " has a list of " + std::to_string(gi.size()) + ", the pattern " + std::to_string(pi.size());
      return false;
    }
    for (size_t i = 0; i < pi.size(); ++i) {
      if (!matchArg(pi[i], gi[i], s, at)) return false;
    }
    return true;
  }
  if (!(p == g)) {
    s.why = "%" + at->name() + " has " + printArgument(g) + " where the pattern has " + printArgument(p);
    return false;
  }
  return true;
}

bool matchNode(const Node* p, Node* g, State& s) {
  auto it = s.matched.find(p);
  if (it != s.matched.end()) {
    if (it->second == g) return true;
    s.why = "pattern node %" + p->name() + " would match both %" + it->second->name() + " and %" + g->name();
    return false;
  }
  if (p->kind() != g->kind() || p->target() != g->target()) {
    s.why = "%" + g->name() + " is " + (g->kind() == NodeKind::kCallFunction ? g->target() : nodeKindName(g->kind())) +
            ", the pattern wants " + (p->kind() == NodeKind::kCallFunction ? p->target() : nodeKindName(p->kind()));
    return false;
  }
  if (s.used.count(g)) {
    s.why = "%" + g->name() + " would match two pattern nodes";
    return false;
  }
  if (p->args().size() != g->args().size() || p->kwargs().size() != g->kwargs().size()) {
    s.why = "%" + g->name() + " has " + std::to_string(g->args().size()) + " positional and " +
            std::to_string(g->kwargs().size()) + " keyword arguments, the pattern " + std::to_string(p->args().size()) +
            " and " + std::to_string(p->kwargs().size());
    return false;
  }
  s.matched[p] = g;
  s.used.insert(g);
  for (size_t i = 0; i < p->args().size(); ++i) {
    if (!matchArg(p->args()[i], g->args()[i], s, g)) return false;
  }
  for (const auto& kw : p->kwargs()) {
    const std::string& key = kw.first;
    const Argument& pv = kw.second;
    auto gk = std::find_if(g->kwargs().begin(), g->kwargs().end(), [&](const auto& kv) { return kv.first == key; });
    if (gk == g->kwargs().end()) {
      s.why = "%" + g->name() + " has no keyword argument " + key;
      return false;
    }
    if (!matchArg(pv, gk->second, s, g)) return false;
  }
  return true;
}

}  // namespace

std::unique_ptr<Match> SubgraphMatcher::matchAt(Node* root, std::string* why) const {
  State s;
  auto fail = [&](const std::string& reason) -> std::unique_ptr<Match> {
    if (why != nullptr) *why = reason;
    return nullptr;
  };
  if (!matchNode(root_, root, s)) return fail(s.why);
  // Uses outside the match: only the root's value may be used by nodes the rewrite keeps.
  for (const auto& [p, g] : s.matched) {
    if (g == root) continue;
    for (const Node* u : g->users()) {
      if (!s.used.count(u)) return fail("%" + g->name() + " (pattern %" + p->name() + ") is also used by %" + u->name() +
                                        " outside the match");
    }
  }
  auto m = std::make_unique<Match>();
  m->bindings_ = std::move(s.bindings);
  m->root_ = root;
  for (const Node* p : pattern_->nodes()) {
    auto it = s.matched.find(p);
    if (it == s.matched.end()) continue;
    m->matched_[p->name()] = it->second;
    m->nodes_.push_back(it->second);
  }
  return m;  // nodes_ in pattern order: a topological order of the matched nodes, root last
}

std::vector<Match> SubgraphMatcher::findAll(const Graph& graph) const {
  std::vector<Match> out;
  for (Node* n : graph.nodes()) {
    if (!rootCanBe(*n)) continue;
    if (auto m = matchAt(n)) out.push_back(std::move(*m));
  }
  return out;
}

}  // namespace pt2q
