// What the CUDA glue files (torch side) share: a tensor's dtype and an op's zero-point domain as
// the torch-free kernels' enums, and the check of a kernel launch. The kernels' own headers stay
// free of torch, so this lives apart from them.
#pragma once

#include <cstdint>

#include <c10/core/ScalarType.h>
#include <c10/util/Exception.h>
#include <cuda_runtime.h>

#include "kernels/affine_params.h"
#include "kernels/cuda/affine_cuda_kernels.h"
#include "kernels/cuda/env.h"

namespace pt2q::cuda {

/// float32 / bfloat16 / float16; callers have checked the dtype (anything else reads as float16).
inline FloatType floatTypeOf(c10::ScalarType t) {
  switch (t) {
    case c10::kFloat: return FloatType::kF32;
    case c10::kBFloat16: return FloatType::kBF16;
    default: return FloatType::kF16;
  }
}

inline Domain domainOf(ZeroPointDomain d) {
  return d == ZeroPointDomain::kFloat ? Domain::kFloat : d == ZeroPointDomain::kNone ? Domain::kNone : Domain::kInt;
}

/// Raises, naming `op`, when a kernel could not be queued.
inline void checkLaunch(cudaError_t err, const char* op) {
  TORCH_CHECK(err == cudaSuccess, op, ": CUDA kernel launch failed: ", cudaGetErrorString(err));
}

}  // namespace pt2q::cuda
