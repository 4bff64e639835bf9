// Pattern rewriting: replace matches of an IR-text pattern by an IR-text replacement, greedily.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "graph/match.h"

namespace pt2q {

/// A side condition on a match. Returns "" to accept, or the reason it rejects.
using MatchFilter = std::function<std::string(const Match&)>;

/// One rewrite: pattern and replacement in the text form, with the same placeholder names (the
/// replacement may use a subset), filters for what the text cannot say, and a benefit (higher
/// patterns are tried first at each node).
///
///   pattern:      graph @p(%x):                    replacement:  graph @r(%x):
///                   %a = aten.neg(%x)                                return %x
///                   %b = aten.neg(%a)
///                   return %b
struct RewritePatternSpec {
  std::string name;
  std::string pattern;
  std::string replacement;
  std::vector<MatchFilter> filters;
  int benefit = 1;
};

/// A named family of rewrites. Pattern texts are parsed once, when added.
class RewritePatternSet {
 public:
  void add(RewritePatternSpec spec);
  struct Entry {
    RewritePatternSpec spec;
    SubgraphMatcher matcher;
    std::unique_ptr<Graph> replacement;
  };
  const std::vector<std::unique_ptr<Entry>>& entries() const { return entries_; }

 private:
  std::vector<std::unique_ptr<Entry>> entries_;
};

/// What applyPatternsGreedily did.
struct RewriteResult {
  bool changed = false;
  int64_t num_rewrites = 0;
  std::map<std::string, int64_t> by_pattern;  // rewrites per pattern name
  bool converged = true;                     // false when max_iterations ran out
};

struct GreedyRewriteOptions {
  int max_iterations = 10;
};

/// Rewrites matches until none is left (or max_iterations sweeps). A sweep visits the nodes in
/// order; at each node the patterns are tried by decreasing benefit, and the first whose match
/// passes its filters is applied: the replacement's nodes are inserted before the root (each
/// placeholder standing for what it bound), the root's uses go to the replacement's value, and
/// the matched nodes are erased. New nodes inherit the root's nn_module_stack and stack trace, and
/// the root's types where the replacement leaves them unknown. A rejected match changes nothing;
/// with PT2Q_LOG=rewrite every rejection is logged with the pattern, the node and the reason.
RewriteResult applyPatternsGreedily(Graph& graph, const RewritePatternSet& patterns,
                                    const GreedyRewriteOptions& options = {});

/// Whether PT2Q_LOG names `topic` (PT2Q_LOG=rewrite:dead-code-elimination, or "all").
bool logEnabled(const std::string& topic);

}  // namespace pt2q
