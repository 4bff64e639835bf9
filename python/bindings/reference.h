// _C.reference: the reference (plain ATen) implementations, callable directly so tests can
// compare the native kernels against them on the same device.
#pragma once

#include <pybind11/pybind11.h>

namespace pt2q::python {

void bindReference(pybind11::module_& m);

}  // namespace pt2q::python
