// Running a graph in C++: every operator call goes through the dispatcher (boxed), and each
// intermediate value is released right after its last use.
#pragma once

#include <ATen/core/ivalue.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace pt2q {

/// A graph prepared to run many times. Construction resolves each node's arguments against its
/// operator's schema (positional, keyword and default values in schema order) and finds each
/// value's last use; run() then only moves IValues.
///
/// Runs: placeholders (the inputs, in order), get_attr (the graph's constants), call_function
/// of dispatcher operators, the opaque `_operator.getitem` on tuples and lists, and
/// `torch.ops.higher_order.cond` whose branches are subgraphs (run by nested interpreters).
/// Other opaque calls and call_module nodes need Python: construction fails naming the node,
/// except an unused `_guards_fn` call_module (torch.export's input guard, which the caller's
/// Python module checks), which is skipped.
class Interpreter {
 public:
  explicit Interpreter(const Graph& graph);
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  /// Runs the graph; returns the value of the output node's argument (a tuple for FX's usual
  /// `return (a, b)`).
  c10::IValue run(std::vector<c10::IValue> inputs) const;

 private:
  struct Step;
  const Graph& graph_;
  std::vector<Step> steps_;
  std::map<std::string, std::unique_ptr<Interpreter>> branches_;  // subgraph path -> its interpreter
  size_t num_inputs_ = 0;
};

}  // namespace pt2q
