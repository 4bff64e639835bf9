// Nodes of the pt2q IR: FX-shaped (one node, one value), with their arguments, meta and users.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include <list>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "graph/argument.h"

namespace pt2q {

class Graph;

/// The five FX node kinds.
enum class NodeKind : uint8_t { kPlaceholder, kGetAttr, kCallFunction, kCallModule, kOutput };

const char* nodeKindName(NodeKind k);

/// A dimension of a shape: a concrete size or a symbolic one.
using Dim = std::variant<int64_t, SymExpr>;

/// What a node's value is, as far as the exporter recorded it (FX meta["val"]).
struct ValueType {
  enum class Kind : uint8_t { kTensor, kSymInt, kSymFloat, kSymBool };
  Kind kind = Kind::kTensor;
  std::optional<c10::ScalarType> dtype;   // tensors
  std::optional<std::vector<Dim>> shape;  // tensors; nullopt when the rank is unknown
  std::optional<SymExpr> value;           // symbolic scalars: their expression, if known
  bool operator==(const ValueType& o) const {
    return kind == o.kind && dtype == o.dtype && shape == o.shape && value == o.value;
  }
};

/// One frame of FX's nn_module_stack: key, module path, module type.
struct ModuleFrame {
  std::string key;
  std::string path;
  std::string type;
  bool operator==(const ModuleFrame& o) const { return key == o.key && path == o.path && type == o.type; }
};

/// The node meta quantization needs; anything else rides in `extra` as text.
struct NodeMeta {
  std::vector<ValueType> types;  // one per output; empty when unknown
  bool tuple_output = false;     // the value is a tuple of `types` (multi-output ops)
  std::vector<ModuleFrame> nn_module_stack;
  std::string stack_trace;
  std::string annotation;  // the quantization annotation, in its printed form
  std::vector<std::pair<std::string, std::string>> extra;
  bool operator==(const NodeMeta& o) const;
};

/// A node. Nodes belong to one Graph, which creates, orders and destroys them; a node's value
/// is referred to by other nodes' arguments (see Argument), and users() lists those nodes.
///
/// Targets: placeholder - its name; get_attr - the constant's path; call_module - the module
/// path; output - "output"; call_function - an operator known to the dispatcher (op() is set,
/// target() is spelled "ns.name" or "ns.name.overload", e.g. "aten.add.Tensor") or, when
/// isOpaque(), anything else (a Python callable such as "_operator.getitem", a higher-order op)
/// spelled by its Python qualified name and carried untouched.
class Node {
 public:
  NodeKind kind() const { return kind_; }
  const std::string& name() const { return name_; }
  const std::string& target() const { return target_; }
  /// The dispatcher operator of a call_function, if it is one.
  const std::optional<c10::OperatorHandle>& op() const { return op_; }
  bool isOpaque() const { return kind_ == NodeKind::kCallFunction && !op_.has_value(); }
  const std::vector<Argument>& args() const { return args_; }
  const std::vector<std::pair<std::string, Argument>>& kwargs() const { return kwargs_; }
  /// Nodes whose arguments refer to this one, each once, in the order they started using it.
  const std::vector<Node*>& users() const { return users_; }
  /// Every node this one refers to, each once, in argument order.
  std::vector<Node*> inputs() const;
  NodeMeta& meta() { return meta_; }
  const NodeMeta& meta() const { return meta_; }
  Graph* owningGraph() const { return graph_; }

  /// Replaces the arguments, keeping every use list right.
  void setArgs(std::vector<Argument> args, std::vector<std::pair<std::string, Argument>> kwargs = {});
  /// Replaces every reference to `from` in this node's arguments by `to`.
  void replaceInput(Node* from, Node* to);

 private:
  friend class Graph;
  Node(Graph* g, NodeKind kind, std::string name, std::string target) :
      graph_(g), kind_(kind), name_(std::move(name)), target_(std::move(target)) {}
  void addUser(Node* u);
  void removeUser(Node* u);

  Graph* graph_;
  NodeKind kind_;
  std::string name_;
  std::string target_;
  std::optional<c10::OperatorHandle> op_;
  std::vector<Argument> args_;
  std::vector<std::pair<std::string, Argument>> kwargs_;
  std::vector<Node*> users_;
  NodeMeta meta_;
  std::list<std::unique_ptr<Node>>::iterator pos_;
};

/// The dispatcher operator that a call_function target spelled "ns.name[.overload]" names, if
/// the dispatcher knows it ("default" and no overload both mean the unnamed overload).
std::optional<c10::OperatorHandle> findOperator(const std::string& target);

}  // namespace pt2q
