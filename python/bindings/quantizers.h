// _C.quantizers: the annotator registry (quantizers/annotators.h) for Python.
#pragma once

#include <pybind11/pybind11.h>

namespace pt2q::python {

void bindQuantizers(pybind11::module_& m);

}  // namespace pt2q::python
