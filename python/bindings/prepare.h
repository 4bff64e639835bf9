// _C.prepare: the C++ passes of prepare_pt2e (observer sharing and insertion) for Python.
#pragma once

#include <pybind11/pybind11.h>

namespace pt2q::python {

void bindPrepare(pybind11::module_& m);

}  // namespace pt2q::python
