// add_q8 on CUDA (add_q8_cuda_kernels.h): one pass over memory, 16 codes of each operand per
// 16-byte load where the three pointers allow it. The fp32 steps are explicit _rn intrinsics
// (the file is also compiled with --fmad=false) so that nothing fuses into an FMA that the CPU's
// separate multiply and add would round twice.
#include "kernels/cuda/add_q8_cuda_kernels.h"

#include <algorithm>

namespace pt2q::cuda {
namespace {

__device__ __forceinline__ int8_t code(int8_t a, int8_t b, const AddQ8& k) {
  const float ya = __fmul_rn(__fsub_rn(static_cast<float>(a), k.za), k.sa);
  const float yb = __fmul_rn(__fsub_rn(static_cast<float>(b), k.zb), k.sb);
  const float y = __fadd_rn(ya, yb);
  const float v = fminf(fmaxf(__fmul_rn(y, k.inv), k.lo - k.zo - 1.0f), k.hi - k.zo + 1.0f);
  return static_cast<int8_t>(fminf(fmaxf(rintf(v) + k.zo, k.lo), k.hi));
}

__global__ void addVec16(AddQ8 k, int64_t vecs) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < vecs;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int4 va = reinterpret_cast<const int4*>(k.a)[i], vb = reinterpret_cast<const int4*>(k.b)[i];
    const int8_t* pa = reinterpret_cast<const int8_t*>(&va);
    const int8_t* pb = reinterpret_cast<const int8_t*>(&vb);
    int4 vo;
    int8_t* po = reinterpret_cast<int8_t*>(&vo);
#pragma unroll
    for (int j = 0; j < 16; ++j) po[j] = code(pa[j], pb[j], k);
    reinterpret_cast<int4*>(k.out)[i] = vo;
  }
}

__global__ void addScalar(AddQ8 k, int64_t first) {
  for (int64_t i = first + blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < k.n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    k.out[i] = code(k.a[i], k.b[i], k);
  }
}

unsigned blocksFor(int64_t items, int threads) {
  return static_cast<unsigned>(std::clamp<int64_t>((items + threads - 1) / threads, 1, 65535 * 4));
}

}  // namespace

cudaError_t addQ8(const AddQ8& a, cudaStream_t stream) {
  if (a.n == 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const bool aligned = (reinterpret_cast<uintptr_t>(a.a) | reinterpret_cast<uintptr_t>(a.b) |
                        reinterpret_cast<uintptr_t>(a.out)) % 16 == 0;
  const int64_t vecs = aligned ? a.n / 16 : 0;
  if (vecs > 0) addVec16<<<blocksFor(vecs, kThreads), kThreads, 0, stream>>>(a, vecs);
  if (vecs * 16 < a.n) addScalar<<<blocksFor(a.n - vecs * 16, kThreads), kThreads, 0, stream>>>(a, vecs * 16);
  return cudaGetLastError();
}

}  // namespace pt2q::cuda
