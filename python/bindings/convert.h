// _C.convert: the C++ passes of convert_pt2e for Python.
#pragma once

#include <pybind11/pybind11.h>

namespace pt2q::python {

void bindConvert(pybind11::module_& m);

}  // namespace pt2q::python
