// Torch-free lookup_q8 on CUDA: the 256-byte table in shared memory, 16 codes a thread per
// 16-byte load and store where both buffers allow it. The glue is kernels/cuda/lookup_q8_cuda.cpp.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace pt2q::cuda {

/// out[i] = table[in[i]] for i < n, bytes throughout (int8 codes read as unsigned).
cudaError_t lookupQ8(const uint8_t* in, uint8_t* out, const uint8_t* table, int64_t n, cudaStream_t stream);

}  // namespace pt2q::cuda
