// Build and runtime facts of libpt2q for Python (versions, chosen CPU kernels).
#pragma once

#include <pybind11/pybind11.h>

namespace pt2q::python {

/// Registers _C.info: build facts and the CPU kernel ISA.
void bindInfo(pybind11::module_& m);

}  // namespace pt2q::python
