// _C.graph: a small binding of the IR (Graph, Node, text form) for the FX bridge.
#pragma once

#include <pybind11/pybind11.h>

namespace pt2q::python {

void bindGraph(pybind11::module_& m);

}  // namespace pt2q::python
