// The pt2q IR graph: an ordered list of FX-shaped nodes plus the constants they refer to.
#pragma once

#include <ATen/core/Tensor.h>

#include <list>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "graph/node.h"

namespace pt2q {

/// A graph. Invariants, checked by verify() (graph/verifier.h):
///  - nodes are in topological order: every node refers only to nodes before it (SSA);
///  - placeholders come first, and the one output node comes last;
///  - every reference points at a node of this graph, and users() lists are exact;
///  - node names are unique; call_function nodes with an operator match its schema;
///  - get_attr targets name a constant or a subgraph of this graph or, when the graph came from
///    a module with submodules, a path the caller resolves (kept as text);
///  - subgraphs are valid graphs themselves.
/// Mutations keep the use lists right by construction; ordering and schema conformance are the
/// caller's to keep and verify() to check.
class Graph {
 public:
  using NodeList = std::list<std::unique_ptr<Node>>;

  Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  /// Nodes in order. Iterate with `for (Node* n : graph.nodes())`.
  std::vector<Node*> nodes() const;
  size_t size() const { return nodes_.size(); }
  std::vector<Node*> placeholders() const;
  /// The output node; null until setOutput().
  Node* output() const { return output_; }

  /// Appends a placeholder after the existing ones.
  Node* addPlaceholder(const std::string& name);
  /// Creates a get_attr / call_function / call_module node before `before` (before the output
  /// node, or at the end, when null). A call_function target that the dispatcher knows gets its
  /// operator; any other is opaque. `name` is made unique if taken.
  Node* create(NodeKind kind, const std::string& target, std::vector<Argument> args,
               std::vector<std::pair<std::string, Argument>> kwargs = {}, const std::string& name = "",
               Node* before = nullptr);
  /// Creates the output node at the end (at most one).
  Node* setOutput(Argument value);

  /// Points every use of `from` at `to` (from keeps no users).
  void replaceAllUsesWith(Node* from, Node* to);
  /// Erases a node that has no users.
  void erase(Node* n);
  /// Moves `n` to just before `pos`.
  void moveBefore(Node* n, Node* pos);
  /// The node after `n` in the order, or null after the last.
  Node* nextNode(const Node* n) const;
  /// Position of `n` in the order (O(n); for checks, not loops).
  size_t indexOf(const Node* n) const;

  /// Constants (parameters, buffers, lifted tensors), by the path get_attr nodes name.
  std::map<std::string, at::Tensor>& constants() { return constants_; }
  const std::map<std::string, at::Tensor>& constants() const { return constants_; }

  /// Graphs that get_attr nodes name, by path: the branches of torch.cond and other
  /// higher-order operators' bodies. Each is a complete graph (placeholders, output).
  std::map<std::string, std::shared_ptr<Graph>>& subgraphs() { return subgraphs_; }
  const std::map<std::string, std::shared_ptr<Graph>>& subgraphs() const { return subgraphs_; }

  /// The graph's name (the `@name` of its text form).
  const std::string& name() const { return name_; }
  void setName(std::string n) { name_ = std::move(n); }

  /// A name not yet used in this graph, derived from `hint`.
  std::string uniqueName(const std::string& hint) const;
  /// Renames a node; `name` must be free.
  void rename(Node* n, const std::string& name);
  Node* findNode(const std::string& name) const;

 private:
  Node* insert(std::unique_ptr<Node> n, Node* before);

  NodeList nodes_;
  Node* output_ = nullptr;
  std::map<std::string, Node*> by_name_;
  std::map<std::string, at::Tensor> constants_;
  std::map<std::string, std::shared_ptr<Graph>> subgraphs_;
  std::string name_ = "main";
};

}  // namespace pt2q
