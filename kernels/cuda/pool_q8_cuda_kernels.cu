// max_pool2d_q8 on CUDA (pool_q8_cuda_kernels.h).
#include "kernels/cuda/pool_q8_cuda_kernels.h"

#include <algorithm>

namespace pt2q::cuda {
namespace {

template <typename T>
__global__ void pool(MaxPoolQ8 a, int64_t total, int lowest) {
  const T* x = static_cast<const T*>(a.x);
  T* out = static_cast<T*>(a.out);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t ow = i % a.ow, oh = (i / a.ow) % a.oh, p = i / (a.ow * a.oh);
    const T* plane = x + p * a.h * a.w;
    int best = lowest;
    for (int64_t r = 0; r < a.kh; ++r) {
      const int64_t ih = oh * a.sh - a.ph + r * a.dh;
      if (ih < 0 || ih >= a.h) continue;
      for (int64_t c = 0; c < a.kw; ++c) {
        const int64_t iw = ow * a.sw - a.pw + c * a.dw;
        if (iw >= 0 && iw < a.w) best = max(best, static_cast<int>(plane[ih * a.w + iw]));
      }
    }
    out[i] = static_cast<T>(best);
  }
}

}  // namespace

cudaError_t maxPoolQ8(const MaxPoolQ8& a, cudaStream_t stream) {
  const int64_t total = a.planes * a.oh * a.ow;
  if (total == 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((total + kThreads - 1) / kThreads, 65535 * 8));
  if (a.is_signed) {
    pool<int8_t><<<blocks, kThreads, 0, stream>>>(a, total, -128);
  } else {
    pool<uint8_t><<<blocks, kThreads, 0, stream>>>(a, total, 0);
  }
  return cudaGetLastError();
}

}  // namespace pt2q::cuda
