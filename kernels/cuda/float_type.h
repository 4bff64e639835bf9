// For the CUDA glue files (torch side): a float tensor's dtype as the torch-free kernels'
// FloatType. The kernels' own headers stay free of torch, so this lives apart from them.
#pragma once

#include <c10/core/ScalarType.h>

#include "kernels/cuda/affine_cuda_kernels.h"

namespace pt2q::cuda {

/// float32 / bfloat16 / float16; callers have checked the dtype (anything else reads as float16).
inline FloatType floatTypeOf(c10::ScalarType t) {
  switch (t) {
    case c10::kFloat: return FloatType::kF32;
    case c10::kBFloat16: return FloatType::kBF16;
    default: return FloatType::kF16;
  }
}

}  // namespace pt2q::cuda
