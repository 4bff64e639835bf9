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
  return mapNodes(a, [&](Node* n) { return Argument(n == from ? to : n); });
}

}  // namespace pt2q
