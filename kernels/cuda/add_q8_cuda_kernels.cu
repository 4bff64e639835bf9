// add_q8 on CUDA (add_q8_cuda_kernels.h): one pass over memory, 16 codes of each operand per
// 16-byte load where the three pointers allow it. The fp32 steps are explicit _rn intrinsics
// (the file is also compiled with --fmad=false) so that nothing fuses into an FMA that the CPU's
// separate multiply and add would round twice. Codes enter and leave as float bits, not through
// conversions: with two in and one out per element those quarter-rate instructions had bounded the
// first version at 0.70x a bf16 add of the same shape (H100, 4M elements).
#include "kernels/cuda/add_q8_cuda_kernels.h"

#include <algorithm>

namespace pt2q::cuda {
namespace {

// A code c as the float c without an integer-to-float conversion (a quarter-rate instruction):
// the byte u = c + 128 placed in the low bits of 0x4B000000 reads as 2^23 + u. `flipped` holds the
// codes of a word with their top bits flipped (c ^ 0x80 = u); b picks the byte.
__device__ __forceinline__ float codeValue(uint32_t flipped, int b) {
  return __uint_as_float(__byte_perm(flipped, 0x4B000000u, static_cast<uint32_t>(b) | 0x7540u)) - 8388736.0f;
}

// The code of dq(a) + dq(b) (or dq(a) * dq(b)) from the two codes as floats, as an int in [lo, hi]. rint(v) comes from
// adding 1.5 * 2^23 (round half to even in the addition: |v| <= hi - lo + 2 keeps the sum's
// exponent fixed, so its bits minus 1.5 * 2^23's are rint(v)) instead of a float-to-int conversion.
__device__ __forceinline__ int codeOfSum(float fa, float fb, const AddQ8& k, int zo, int lo, int hi) {
  const float ya = __fmul_rn(__fsub_rn(fa, k.za), k.sa);
  const float yb = __fmul_rn(__fsub_rn(fb, k.zb), k.sb);
  const float y = k.multiply ? __fmul_rn(ya, yb) : __fadd_rn(ya, yb);
  const float v = fminf(fmaxf(__fmul_rn(y, k.inv), k.lo - k.zo - 1.0f), k.hi - k.zo + 1.0f);
  const int r = __float_as_int(__fadd_rn(v, 12582912.0f)) - 0x4B400000;
  return min(max(r + zo, lo), hi);
}

__device__ __forceinline__ int8_t code(int8_t a, int8_t b, const AddQ8& k) {
  const float fa = static_cast<float>(a), fb = static_cast<float>(b);
  return static_cast<int8_t>(codeOfSum(fa, fb, k, static_cast<int>(k.zo), static_cast<int>(k.lo),
                                       static_cast<int>(k.hi)));
}

__global__ void addVec16(AddQ8 k, int64_t vecs) {
  const int zo = static_cast<int>(k.zo), lo = static_cast<int>(k.lo), hi = static_cast<int>(k.hi);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < vecs;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint4 va = reinterpret_cast<const uint4*>(k.a)[i], vb = reinterpret_cast<const uint4*>(k.b)[i];
    const uint32_t wa[4] = {va.x ^ 0x80808080u, va.y ^ 0x80808080u, va.z ^ 0x80808080u, va.w ^ 0x80808080u};
    const uint32_t wb[4] = {vb.x ^ 0x80808080u, vb.y ^ 0x80808080u, vb.z ^ 0x80808080u, vb.w ^ 0x80808080u};
    uint32_t wo[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      uint32_t word = 0;
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        const int c = codeOfSum(codeValue(wa[q], b), codeValue(wb[q], b), k, zo, lo, hi);
        word |= (static_cast<uint32_t>(c) & 0xFFu) << (8 * b);
      }
      wo[q] = word;
    }
    reinterpret_cast<uint4*>(k.out)[i] = make_uint4(wo[0], wo[1], wo[2], wo[3]);
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
