// Reference lookup_q8 registration (lookup_q8_args.cpp holds it: aten indexing by the codes).
#include <torch/library.h>

#include "kernels/lookup_q8.h"

TORCH_LIBRARY_IMPL(pt2q, CompositeExplicitAutograd, m) { m.impl("lookup_q8", &pt2q::lookupQ8Ref); }
