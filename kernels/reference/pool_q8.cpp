// Reference max_pool2d_q8 registration (pool_q8_args.cpp holds it: aten.max_pool2d on the codes
// as floats, exact for integers this small).
#include <torch/library.h>

#include "kernels/pool_q8.h"

TORCH_LIBRARY_IMPL(pt2q, CompositeExplicitAutograd, m) { m.impl("max_pool2d_q8", &pt2q::maxPoolQ8Ref); }
