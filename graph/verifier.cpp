// Graph invariants and schema conformance (see verifier.h).
#include "graph/verifier.h"

#include <ATen/core/jit_type.h>

#include <algorithm>
#include <map>
#include <sstream>

namespace pt2q {
namespace {

// Whether a literal (non-node) argument can be passed where the schema expects `t`. A node
// reference fits any type: its value is only known when the graph runs.
bool fits(const Argument& a, const c10::TypePtr& t) {
  if (a.isNode()) return true;
  switch (t->kind()) {
    case c10::TypeKind::AnyType: return true;
    case c10::TypeKind::OptionalType:
      return a.isNone() || fits(a, t->expectRef<c10::OptionalType>().getElementType());
    // Python numbers passed for a Tensor become 0-dim tensors when the call runs (exported graphs
    // hold aten.add_.Tensor(%buf, 1)).
    case c10::TypeKind::TensorType: return a.is<int64_t>() || a.is<double>() || a.is<bool>();
    case c10::TypeKind::IntType:
    case c10::TypeKind::SymIntType: return a.is<int64_t>() || a.is<SymExpr>() || a.is<bool>();
    case c10::TypeKind::FloatType:
    case c10::TypeKind::SymFloatType: return a.is<double>() || a.is<int64_t>() || a.is<SymExpr>();
    case c10::TypeKind::BoolType:
    case c10::TypeKind::SymBoolType: return a.is<bool>() || a.is<SymExpr>();
    case c10::TypeKind::NumberType: return a.is<int64_t>() || a.is<double>() || a.is<bool>() || a.is<SymExpr>();
    case c10::TypeKind::StringType: return a.is<std::string>();
    case c10::TypeKind::ScalarTypeType: return a.is<c10::ScalarType>();
    case c10::TypeKind::LayoutType: return a.is<c10::Layout>();
    case c10::TypeKind::MemoryFormatType: return a.is<c10::MemoryFormat>();
    case c10::TypeKind::DeviceObjType: return a.is<c10::Device>() || a.is<std::string>();
    case c10::TypeKind::ListType: {
      const c10::TypePtr& elem = t->expectRef<c10::ListType>().getElementType();
      // int[2] stride=1 takes a single int, as in Python.
      if ((elem->kind() == c10::TypeKind::IntType || elem->kind() == c10::TypeKind::SymIntType) && fits(a, elem)) {
        return true;
      }
      const std::vector<Argument>* items = a.is<ArgList>()    ? &a.as<ArgList>().items
                                           : a.is<ArgTuple>() ? &a.as<ArgTuple>().items
                                                              : nullptr;
      if (items == nullptr) return false;
      return std::all_of(items->begin(), items->end(), [&](const Argument& x) { return fits(x, elem); });
    }
    default: return true;  // types the IR does not model closely are checked when the graph runs
  }
}

std::string describe(const Argument& a) {
  if (a.isNone()) return "None";
  if (a.is<bool>()) return "a bool";
  if (a.is<int64_t>()) return "an int";
  if (a.is<double>()) return "a float";
  if (a.is<std::string>()) return "a string";
  if (a.is<ArgList>()) return "a list";
  if (a.is<ArgTuple>()) return "a tuple";
  if (a.is<c10::ScalarType>()) return "a dtype";
  if (a.is<c10::Device>()) return "a device";
  if (a.is<c10::Layout>()) return "a layout";
  if (a.is<c10::MemoryFormat>()) return "a memory format";
  if (a.is<SymExpr>()) return "a symbolic size";
  if (a.is<OpRef>()) return "an operator";
  return "a node";
}

std::string checkSchema(const Node* n) {
  const c10::FunctionSchema& s = n->op()->schema();
  const auto& formals = s.arguments();
  size_t positional = 0;
  while (positional < formals.size() && !formals[positional].kwarg_only()) ++positional;
  std::ostringstream err;
  if (n->args().size() > positional) {
    err << n->target() << " takes at most " << positional << " positional argument(s), got " << n->args().size();
    return err.str();
  }
  std::vector<bool> given(formals.size(), false);
  auto check = [&](size_t i, const Argument& a) -> std::string {
    given[i] = true;
    if (fits(a, formals[i].real_type())) return "";
    return "argument '" + formals[i].name() + "' of " + n->target() + " expects " + formals[i].real_type()->str() +
           ", got " + describe(a);
  };
  for (size_t i = 0; i < n->args().size(); ++i) {
    std::string e = check(i, n->args()[i]);
    if (!e.empty()) return e;
  }
  for (const auto& kv : n->kwargs()) {
    auto it = std::find_if(formals.begin(), formals.end(), [&](const c10::Argument& f) { return f.name() == kv.first; });
    if (it == formals.end()) return n->target() + " has no argument '" + kv.first + "'";
    const size_t i = static_cast<size_t>(it - formals.begin());
    if (given[i]) return "argument '" + kv.first + "' of " + n->target() + " is given twice";
    std::string e = check(i, kv.second);
    if (!e.empty()) return e;
  }
  for (size_t i = 0; i < formals.size(); ++i) {
    if (!given[i] && !formals[i].default_value().has_value()) {
      return n->target() + " is missing its required argument '" + formals[i].name() + "'";
    }
  }
  return "";
}

}  // namespace

std::string verifyMessage(const Graph& graph) {
  std::map<const Node*, size_t> index;
  std::map<std::string, const Node*> names;
  bool past_placeholders = false;
  const std::vector<Node*> nodes = graph.nodes();
  auto at = [](const Node* n) { return "node %" + n->name() + ": "; };
  for (const Node* n : nodes) {
    if (n->owningGraph() != &graph) return at(n) + "owned by another graph";
    if (!names.emplace(n->name(), n).second) return at(n) + "its name is used twice";
    if (n->kind() == NodeKind::kPlaceholder) {
      if (past_placeholders) return at(n) + "placeholder after a non-placeholder node (placeholders come first)";
    } else {
      past_placeholders = true;
    }
    if (n->kind() == NodeKind::kOutput && n != nodes.back()) return at(n) + "output node is not the last node";
    if (n->kind() == NodeKind::kOutput && n != graph.output()) return at(n) + "a second output node";
    if (n->kind() == NodeKind::kOutput && !n->users().empty()) return at(n) + "the output node has users";
    for (const Node* in : n->inputs()) {
      if (in->owningGraph() != &graph) return at(n) + "refers to %" + in->name() + " of another graph";
      if (!index.count(in)) {
        return at(n) + "refers to %" + in->name() + ", which " +
               (std::find(nodes.begin(), nodes.end(), in) == nodes.end() ? "is not in the graph" : "comes after it");
      }
      if (in->kind() == NodeKind::kOutput) return at(n) + "uses the output node";
      const auto& u = in->users();
      if (std::find(u.begin(), u.end(), n) == u.end()) return at(n) + "missing from the users of %" + in->name();
    }
    if (n->kind() == NodeKind::kCallFunction && n->op().has_value()) {
      std::string e = checkSchema(n);
      if (!e.empty()) return at(n) + e;
    }
    if (n->kind() == NodeKind::kGetAttr && !n->args().empty()) return at(n) + "get_attr takes no arguments";
    if (n->kind() == NodeKind::kPlaceholder && !n->args().empty()) {
      // A placeholder's one argument, if any, is its default value (FX); it may not refer to nodes.
      if (!n->inputs().empty()) return at(n) + "a placeholder default refers to a node";
    }
    index[n] = index.size();
  }
  for (const Node* n : nodes) {
    for (const Node* u : n->users()) {
      if (!index.count(u)) return at(n) + "lists a user %" + u->name() + " that is not in the graph";
      const std::vector<Node*> ins = u->inputs();
      if (std::find(ins.begin(), ins.end(), n) == ins.end()) {
        return at(n) + "lists %" + u->name() + " as a user, which does not refer to it";
      }
    }
  }
  if (graph.output() == nullptr) return "the graph has no output node";
  for (const auto& [path, sub] : graph.subgraphs()) {
    const std::string e = verifyMessage(*sub);
    if (!e.empty()) return "in subgraph \"" + path + "\": " + e;
  }
  return "";
}

void verify(const Graph& graph) {
  const std::string e = verifyMessage(graph);
  TORCH_CHECK(e.empty(), "IR verification failed in graph @", graph.name(), ": ", e);
}

}  // namespace pt2q
