// The vectorized affine CUDA kernels (affine_cuda_vec_kernels.cu): 8 elements of the last
// dimension per thread, loaded and stored as whole vectors,
// the qparam index found once per vector (once per element only where the last dimension's block
// is not a multiple of the vector). The entry points in affine_cuda_kernels.cu call them when
// vecTakes() says so; the arguments are theirs.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "kernels/cuda/affine_cuda_kernels.h"

namespace pt2q::cuda::affine {

int floatBytes(FloatType t);
int codeBytes(CodeType t);

/// Elements per vector: 8 of any float type. 2-byte floats take two such vectors per thread
/// (affine_cuda_vec_kernels.cu); an earlier try, one vector of 16 per thread, was slower on the H100
/// (bf16 fake-quantize per tensor 69 -> 53 % of the bandwidth) while the index took 64-bit divisions.
constexpr int kVec = 8;
inline int vecOf(FloatType) { return kVec; }

/// The last dimension of the merged layout (vec_index.h) holds whole vectors of `vec` elements, the
/// tensor has fewer than 2^31 elements, and each of the n_ptrs pointers (with its element size in
/// bytes) is aligned to such a vector.
bool vecTakes(const Layout& l, int vec, const void* const* ptrs, const int* elem_bytes, int n_ptrs);

cudaError_t quantizeVec(const void* x, FloatType xt, void* q, CodeType qt, int64_t n, const Layout& layout,
                        const float* scale, const float* zp, const Params& p, cudaStream_t stream);
cudaError_t dequantizeVec(const void* q, CodeType qt, void* y, FloatType yt, int64_t n, const Layout& layout,
                          const float* scale, const float* zp, const Params& p, cudaStream_t stream);
cudaError_t fakeQuantizeVec(const void* x, FloatType xt, void* y, bool* mask, int64_t n, const Layout& layout,
                            const float* scale, const float* zp, const Params& p, cudaStream_t stream);

}  // namespace pt2q::cuda::affine
