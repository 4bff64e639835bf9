// Node arguments of the pt2q IR: the values an FX node's args and kwargs can hold.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/Layout.h>
#include <c10/core/MemoryFormat.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace pt2q {

class Node;
struct Argument;

/// A symbolic size from dynamic shapes, kept as the exporter wrote it ("s0", "2*s0 + 1"):
/// never specialized to the example input's value.
struct SymExpr {
  std::string expr;
  bool operator==(const SymExpr& o) const { return expr == o.expr; }
};

/// An operator passed as an argument, e.g. the first argument of higher_order.out_dtype, spelled
/// like a call_function target ("aten.linear.default").
struct OpRef {
  std::string name;
  bool operator==(const OpRef& o) const { return name == o.name; }
};

/// A Python list or tuple of arguments (both exist in FX args and are kept apart).
struct ArgList {
  std::vector<Argument> items;
  bool operator==(const ArgList& o) const;
};
struct ArgTuple {
  std::vector<Argument> items;
  bool operator==(const ArgTuple& o) const;
};

/// One argument: None, a scalar, a string, a reference to a node of the same graph, a list or
/// tuple of arguments, a dtype, device, layout or memory format, a symbolic size, or an operator.
struct Argument {
  using Value = std::variant<std::monostate, bool, int64_t, double, std::string, Node*, ArgList, ArgTuple,
                             c10::ScalarType, c10::Device, c10::Layout, c10::MemoryFormat, SymExpr, OpRef>;
  Value v;

  Argument() = default;
  Argument(std::monostate) {}
  Argument(bool b) : v(b) {}
  Argument(int64_t i) : v(i) {}
  Argument(int i) : v(static_cast<int64_t>(i)) {}
  Argument(double d) : v(d) {}
  Argument(std::string s) : v(std::move(s)) {}
  Argument(const char* s) : v(std::string(s)) {}
  Argument(Node* n) : v(n) {}
  Argument(ArgList l) : v(std::move(l)) {}
  Argument(ArgTuple t) : v(std::move(t)) {}
  Argument(c10::ScalarType t) : v(t) {}
  Argument(c10::Device d) : v(d) {}
  Argument(c10::Layout l) : v(l) {}
  Argument(c10::MemoryFormat m) : v(m) {}
  Argument(SymExpr e) : v(std::move(e)) {}
  Argument(OpRef o) : v(std::move(o)) {}

  bool isNone() const { return std::holds_alternative<std::monostate>(v); }
  bool isNode() const { return std::holds_alternative<Node*>(v); }
  Node* node() const { return std::get<Node*>(v); }
  template <typename T>
  bool is() const { return std::holds_alternative<T>(v); }
  template <typename T>
  const T& as() const { return std::get<T>(v); }

  /// Structural equality; node references compare by identity, floats by bits (so NaN == NaN
  /// and -0.0 != 0.0: a round trip must keep both).
  bool operator==(const Argument& o) const;
  bool operator!=(const Argument& o) const { return !(*this == o); }
};

/// Calls f(Node*) for every node reference in `a`, in order, including inside lists and tuples.
template <typename F>
void forEachNode(const Argument& a, F&& f) {
  if (a.isNode()) {
    f(a.node());
  } else if (a.is<ArgList>()) {
    for (const Argument& x : a.as<ArgList>().items) forEachNode(x, f);
  } else if (a.is<ArgTuple>()) {
    for (const Argument& x : a.as<ArgTuple>().items) forEachNode(x, f);
  }
}

/// `a` with every node reference n replaced by f(n) (an Argument: a node or a literal), inside
/// lists and tuples too.
template <typename F>
Argument mapNodes(const Argument& a, F&& f) {
  if (a.isNode()) return f(a.node());
  if (a.is<ArgList>() || a.is<ArgTuple>()) {
    std::vector<Argument> items;
    for (const Argument& x : a.is<ArgList>() ? a.as<ArgList>().items : a.as<ArgTuple>().items) {
      items.push_back(mapNodes(x, f));
    }
    if (a.is<ArgList>()) return Argument(ArgList{std::move(items)});
    return Argument(ArgTuple{std::move(items)});
  }
  return a;
}

/// `a` with every reference to `from` replaced by `to`.
Argument replaceNode(const Argument& a, const Node* from, Node* to);

}  // namespace pt2q
