// Subgraph matching: finding the places where a pattern graph (written as IR text) occurs.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "graph/graph.h"

namespace pt2q {

/// Where a pattern matched: what each pattern placeholder bound to (a node's value or a literal
/// argument) and which graph node each pattern call became.
class Match {
 public:
  /// The argument bound to pattern placeholder `name` (a node reference or a literal).
  const Argument& argument(const std::string& name) const;
  /// The node bound to pattern placeholder `name`, or the graph node matched by the pattern
  /// node `name`; null when the placeholder bound a literal.
  Node* value(const std::string& name) const;
  /// The graph node the pattern's output value matched (what a rewrite replaces).
  Node* root() const { return root_; }
  /// Matched graph nodes other than placeholders' bindings, in pattern order (root last).
  const std::vector<Node*>& nodes() const { return nodes_; }

 private:
  friend class SubgraphMatcher;
  std::map<std::string, Argument> bindings_;
  std::map<std::string, Node*> matched_;
  std::vector<Node*> nodes_;
  Node* root_ = nullptr;
};

/// Matches one pattern.
///
/// A pattern is a graph in the text form whose placeholders are wildcards and whose output is a
/// single value, the root:
///
///   graph @neg_neg(%x):
///     %a = aten.neg(%x)
///     %b = aten.neg(%a)
///     return %b
///
/// Contract. A match at graph node R maps the pattern's root to R and, following arguments
/// backwards, every other pattern node p to a graph node g such that:
///  - p is a placeholder: it binds g's argument in that position, a node or a literal; a
///    placeholder used twice must bind equal arguments both times;
///  - otherwise g has p's kind and target (the same operator overload), the same number of
///    positional arguments and the same keyword names; literal arguments must be equal
///    (floats bit for bit), lists element by element;
///  - distinct non-placeholder pattern nodes match distinct graph nodes;
///  - no matched node other than R has a user outside the match (their values would be needed
///    after the rewrite removes them); R's users may be anywhere.
/// Matching follows use-def edges from the root, so it is deterministic with no backtracking:
/// O(pattern size) per candidate root, O(graph size x pattern size) for a whole graph. No
/// commutativity: aten.add(%a, %b) does not match aten.add(%b, %a).
class SubgraphMatcher {
 public:
  /// Parses the pattern text. Throws naming the pattern if it is not a valid single-root pattern.
  SubgraphMatcher(std::string_view pattern_text, std::string name);

  /// A match rooted at `root`, or nullptr with the reason in *why (when why is not null).
  std::unique_ptr<Match> matchAt(Node* root, std::string* why = nullptr) const;
  /// Every match in `graph`, in node order (they may overlap).
  std::vector<Match> findAll(const Graph& graph) const;

  /// Whether `n` has the pattern root's kind and target (the cheap first test of matchAt).
  bool rootCanBe(const Node& n) const { return n.kind() == root_->kind() && n.target() == root_->target(); }
  const std::string& name() const { return name_; }
  const Graph& pattern() const { return *pattern_; }

 private:
  std::string name_;
  std::unique_ptr<Graph> pattern_;
  Node* root_ = nullptr;
};

}  // namespace pt2q
