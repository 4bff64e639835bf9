// _C.observers: the C++ observers (observers/observer.h) for Python.
#pragma once

#include <pybind11/pybind11.h>

namespace pt2q::python {

void bindObservers(pybind11::module_& m);

}  // namespace pt2q::python
