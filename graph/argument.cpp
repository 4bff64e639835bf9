// Argument equality and node substitution (see argument.h).
#include "graph/argument.h"

#include <cstring>

namespace pt2q {

bool ArgList::operator==(const ArgList& o) const { return items == o.items; }
bool ArgTuple::operator==(const ArgTuple& o) const { return items == o.items; }

bool Argument::operator==(const Argument& o) const {
  if (v.index() != o.v.index()) return false;
  if (is<double>()) {
    const double a = as<double>(), b = o.as<double>();
    return std::memcmp(&a, &b, sizeof(double)) == 0;
  }
  return v == o.v;
}

Argument replaceNode(const Argument& a, const Node* from, Node* to) {
  if (a.isNode()) return a.node() == from ? Argument(to) : a;
  if (a.is<ArgList>()) {
    ArgList out;
    for (const Argument& x : a.as<ArgList>().items) out.items.push_back(replaceNode(x, from, to));
    return Argument(std::move(out));
  }
  if (a.is<ArgTuple>()) {
    ArgTuple out;
    for (const Argument& x : a.as<ArgTuple>().items) out.items.push_back(replaceNode(x, from, to));
    return Argument(std::move(out));
  }
  return a;
}

}  // namespace pt2q
