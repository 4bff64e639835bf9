// fp16 / fp32 -> bf16 pieces (bf16_pieces_kernels.h). As an fp32, a value's significand is its top
// 24 bits below the exponent; masking the low 16 bits of the word keeps the top 8 (a bf16,
// truncated toward zero), and the difference, computed exactly in fp32 (both share the exponent),
// is what is left: at most 3 significant bits for an fp16 (11 bits), 16 for an fp32, which one
// more step splits into 8 + 8.
#include <algorithm>

#include <cuda_fp16.h>

#include "kernels/cuda/bf16_pieces_kernels.h"

namespace pt2q::cuda {
namespace {

template <int PIECES, class T>
__global__ void bf16PiecesKernel(const T* x, int64_t count, uint16_t* out) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float rest;
    if constexpr (PIECES == 2) {
      rest = __half2float(x[i]);
    } else {
      rest = x[i];
    }
    const bool inf = isinf(rest);
#pragma unroll
    for (int p = 0; p < PIECES; ++p) {
      const uint32_t u = __float_as_uint(rest);
      out[p * count + i] = static_cast<uint16_t>(u >> 16);
      rest = inf ? 0.0f : rest - __uint_as_float(u & 0xFFFF0000u);  // inf - inf would be NaN
    }
  }
}

}  // namespace

cudaError_t splitToBf16Pieces(const void* x, FloatType xt, int64_t count, void* out, cudaStream_t stream) {
  if (xt == FloatType::kBF16 || count < 0 || (count > 0 && (x == nullptr || out == nullptr))) {
    return cudaErrorInvalidValue;
  }
  if (count == 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((count + kThreads - 1) / kThreads, 65536));
  uint16_t* o = static_cast<uint16_t*>(out);
  if (xt == FloatType::kF16) {
    bf16PiecesKernel<2><<<blocks, kThreads, 0, stream>>>(static_cast<const __half*>(x), count, o);
  } else {
    bf16PiecesKernel<3><<<blocks, kThreads, 0, stream>>>(static_cast<const float*>(x), count, o);
  }
  return cudaGetLastError();
}

}  // namespace pt2q::cuda
