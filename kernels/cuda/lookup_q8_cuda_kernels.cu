// lookup_q8 on CUDA (lookup_q8_cuda_kernels.h).
#include "kernels/cuda/lookup_q8_cuda_kernels.h"

#include <algorithm>

namespace pt2q::cuda {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ uint32_t lookWord(const uint8_t* t, uint32_t w) {
  return static_cast<uint32_t>(t[w & 0xFF]) | static_cast<uint32_t>(t[(w >> 8) & 0xFF]) << 8 |
         static_cast<uint32_t>(t[(w >> 16) & 0xFF]) << 16 | static_cast<uint32_t>(t[w >> 24]) << 24;
}

// vec: both pointers 16-byte aligned; the n % 16 tail and any unaligned call go a byte a thread.
template <bool kVec>
__global__ void lookup(const uint8_t* __restrict__ in, uint8_t* __restrict__ out, const uint8_t* __restrict__ table,
                       int64_t n) {
  __shared__ uint8_t t[256];
  t[threadIdx.x] = table[threadIdx.x];  // kThreads == 256
  __syncthreads();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  int64_t done = 0;
  if (kVec) {
    const int64_t vecs = n / 16;
    for (int64_t v = i; v < vecs; v += stride) {
      uint4 w = reinterpret_cast<const uint4*>(in)[v];
      w.x = lookWord(t, w.x), w.y = lookWord(t, w.y), w.z = lookWord(t, w.z), w.w = lookWord(t, w.w);
      reinterpret_cast<uint4*>(out)[v] = w;
    }
    done = vecs * 16;
  }
  for (int64_t j = done + i; j < n; j += stride) out[j] = t[in[j]];
}

}  // namespace

cudaError_t lookupQ8(const uint8_t* in, uint8_t* out, const uint8_t* table, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const bool vec = reinterpret_cast<uintptr_t>(in) % 16 == 0 && reinterpret_cast<uintptr_t>(out) % 16 == 0;
  const int64_t work = vec ? std::max<int64_t>(n / 16, 1) : n;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((work + kThreads - 1) / kThreads, 132 * 16));
  if (vec) {
    lookup<true><<<blocks, kThreads, 0, stream>>>(in, out, table, n);
  } else {
    lookup<false><<<blocks, kThreads, 0, stream>>>(in, out, table, n);
  }
  return cudaGetLastError();
}

}  // namespace pt2q::cuda
