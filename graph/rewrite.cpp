// The greedy rewrite driver (see rewrite.h).
#include "graph/rewrite.h"

#include <c10/util/Exception.h>

#include <cstdlib>
#include <iostream>
#include <set>

#include "graph/ir_text.h"

namespace pt2q {

bool logEnabled(const std::string& topic) {
  const char* env = std::getenv("PT2Q_LOG");
  if (env == nullptr) return false;
  std::string v = std::string(":") + env + ":";
  for (char& c : v) c = c == ',' ? ':' : c;
  return v.find(":" + topic + ":") != std::string::npos || v.find(":all:") != std::string::npos;
}

void RewritePatternSet::add(RewritePatternSpec spec) {
  auto e = std::unique_ptr<Entry>(new Entry{spec, SubgraphMatcher(spec.pattern, spec.name), nullptr});
  e->replacement = parseGraph(spec.replacement, "replacement " + spec.name);
  std::set<std::string> pattern_inputs;
  for (const Node* p : e->matcher.pattern().placeholders()) pattern_inputs.insert(p->name());
  for (const Node* p : e->replacement->placeholders()) {
    TORCH_CHECK(pattern_inputs.count(p->name()), "rewrite ", spec.name, ": the replacement's placeholder %", p->name(),
                " is not a placeholder of the pattern");
  }
  const Node* out = e->replacement->output();
  TORCH_CHECK(out->args().size() == 1, "rewrite ", spec.name, ": the replacement must return one value");
  entries_.push_back(std::move(e));
}

namespace {

// Inserts the replacement before the match's root; returns the argument standing for its value.
Argument instantiate(Graph& graph, const Graph& replacement, const Match& m) {
  std::map<const Node*, Argument> env;
  Node* root = m.root();
  for (const Node* p : replacement.placeholders()) env[p] = m.argument(p->name());
  auto subst = [&](const Argument& a) { return mapNodes(a, [&](Node* n) { return env.at(n); }); };
  for (const Node* r : replacement.nodes()) {
    if (r->kind() == NodeKind::kPlaceholder || r->kind() == NodeKind::kOutput) continue;
    std::vector<Argument> args;
    for (const Argument& a : r->args()) args.push_back(subst(a));
    std::vector<std::pair<std::string, Argument>> kwargs;
    for (const auto& kv : r->kwargs()) kwargs.emplace_back(kv.first, subst(kv.second));
    Node* n = graph.create(r->kind(), r->target(), std::move(args), std::move(kwargs), r->name(), root);
    n->meta() = r->meta();
    n->meta().nn_module_stack = root->meta().nn_module_stack;
    n->meta().stack_trace = root->meta().stack_trace;
    env[r] = Argument(n);
  }
  Argument result = replacement.output()->args()[0];
  if (result.is<ArgTuple>() && result.as<ArgTuple>().items.size() == 1) result = result.as<ArgTuple>().items[0];
  result = subst(result);
  if (result.isNode() && result.node()->meta().types.empty()) result.node()->meta().types = root->meta().types;
  return result;
}

bool tryRewrite(Graph& graph, const RewritePatternSet::Entry& e, Node* node, bool log) {
  std::string why;
  std::unique_ptr<Match> m = e.matcher.matchAt(node, log ? &why : nullptr);
  if (m == nullptr) {
    if (log) std::cerr << "[rewrite] " << e.spec.name << " at %" << node->name() << ": no match: " << why << "\n";
    return false;
  }
  for (const MatchFilter& f : e.spec.filters) {
    const std::string reason = f(*m);
    if (!reason.empty()) {
      if (log) std::cerr << "[rewrite] " << e.spec.name << " at %" << node->name() << ": rejected: " << reason << "\n";
      return false;
    }
  }
  Node* root = m->root();
  const std::string at = node->name();  // `node` is erased below
  const Argument value = instantiate(graph, *e.replacement, *m);
  TORCH_CHECK(value.isNode(), "rewrite ", e.spec.name, ": the replacement returns ", printArgument(value),
              ", but a node's uses can only be redirected to a value");
  graph.replaceAllUsesWith(root, value.node());
  const std::vector<Node*>& matched = m->nodes();
  for (auto it = matched.rbegin(); it != matched.rend(); ++it) {
    if ((*it)->users().empty()) graph.erase(*it);
  }
  if (log) std::cerr << "[rewrite] " << e.spec.name << " at %" << at << ": rewritten\n";
  return true;
}

}  // namespace

RewriteResult applyPatternsGreedily(Graph& graph, const RewritePatternSet& patterns,
                                    const GreedyRewriteOptions& options) {
  std::vector<const RewritePatternSet::Entry*> order;
  for (const auto& e : patterns.entries()) order.push_back(e.get());
  std::stable_sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->spec.benefit > b->spec.benefit; });
  const bool log = logEnabled("rewrite");
  RewriteResult result;
  for (int it = 0; it < options.max_iterations; ++it) {
    bool changed = false;
    // Names, not pointers: a rewrite erases nodes, and the sweep must skip those.
    std::vector<std::string> names;
    for (const Node* n : graph.nodes()) names.push_back(n->name());
    for (const std::string& name : names) {
      Node* n = graph.findNode(name);
      if (n == nullptr || n->kind() == NodeKind::kPlaceholder || n->kind() == NodeKind::kOutput) continue;
      for (const auto* e : order) {
        if (!e->matcher.rootCanBe(*n)) continue;  // not even a candidate: nothing to log
        if (tryRewrite(graph, *e, n, log)) {
          changed = true;
          ++result.num_rewrites;
          ++result.by_pattern[e->spec.name];
          break;
        }
      }
    }
    result.changed |= changed;
    if (!changed) return result;
  }
  result.converged = false;
  return result;
}

}  // namespace pt2q
