// The linear_mx GEMV (linear_mx_cuda_kernels.h). A warp owns one weight row; its lanes take the
// row's 16-byte chunks of codes (12-byte for 6-bit codes) in turn, kUnroll chunks in flight, each
// chunk inside one scale block. A code's value comes from the format's table in shared memory
// (mx::codeTable, as mx_dequantize's kernel reads it); a chunk's sum of value x x per row of x
// (fma in fp32) is multiplied by its block's 2^(s - 127), as the CPU kernel scales its block sums.
// That is the reference's sum of mx_dequantize's weights times x in another order, except where a
// dequantized weight would leave fp32's range (the reference's weight is then inf or rounded to a
// subnormal; here the power of two meets the sum instead). The lanes' sums are added by a fixed
// butterfly, so the result does not depend on timing. Per code: a shift and a mask that give the
// table offset, the table load and the fma (and for bf16 / fp16 x the widening of x).
#include "kernels/cuda/aligned.h"
#include "kernels/cuda/linear_mx_cuda_kernels.h"
#include "kernels/cuda/mx_numerics.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace pt2q::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kUnroll = 4;  // chunks whose loads a lane has in flight

// A chunk of codes: kCodes codes of BITS bits in kBytes bytes, low bits first (code i at bit
// BITS * i of the little-endian chunk, which is how groups pack along the row).
template <int BITS>
struct Chunk {
  static constexpr int kBytes = BITS == 6 ? 12 : 16;
  static constexpr int kWords = kBytes / 4;
  static constexpr int kCodes = kBytes * 8 / BITS;
};

template <int BITS>
__device__ __forceinline__ void loadChunk(const uint8_t* p, uint32_t (&w)[Chunk<BITS>::kWords]) {
  if constexpr (BITS == 6) {
    const uint32_t* q = reinterpret_cast<const uint32_t*>(p);
#pragma unroll
    for (int i = 0; i < 3; ++i) w[i] = __ldcs(q + i);
  } else {
    const uint4 v = __ldcs(reinterpret_cast<const uint4*>(p));
    w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
  }
}

// 4 x code i of a chunk, the byte offset of its value in the table (i a compile-time constant after
// unrolling, so this is a shift and a mask).
template <int BITS>
__device__ __forceinline__ uint32_t tableOffset(const uint32_t (&w)[Chunk<BITS>::kWords], int i) {
  constexpr uint32_t kMask = ((1u << BITS) - 1u) << 2;
  const int bit = BITS * i, word = bit / 32, shift = bit % 32;
  if (shift + BITS > 32) {  // a 6-bit code across two words
    return (__funnelshift_r(w[word], w[word + 1], shift) << 2) & kMask;
  }
  return (shift >= 2 ? w[word] >> (shift - 2) : w[word] << (2 - shift)) & kMask;
}

template <FloatType T>
struct XRow;
template <>
struct XRow<FloatType::kF32> {
  // n floats of a row of x from p (16-byte aligned), exactly.
  template <int N>
  static __device__ __forceinline__ void load(const void* p, float (&v)[N]) {
#pragma unroll
    for (int i = 0; i < N / 4; ++i) {
      const float4 f = __ldg(static_cast<const float4*>(p) + i);
      v[4 * i] = f.x, v[4 * i + 1] = f.y, v[4 * i + 2] = f.z, v[4 * i + 3] = f.w;
    }
  }
  static __device__ __forceinline__ void store(void* y, int64_t i, float v) { static_cast<float*>(y)[i] = v; }
  static constexpr int kBytes = 4;
};
template <FloatType T>
struct HalfRow {
  template <int N>
  static __device__ __forceinline__ void load(const void* p, float (&v)[N]) {
#pragma unroll
    for (int i = 0; i < N / 8; ++i) {
      const uint4 u = __ldg(static_cast<const uint4*>(p) + i);
      const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        if constexpr (T == FloatType::kBF16) {
          v[8 * i + 2 * j] = __uint_as_float(w[j] << 16);
          v[8 * i + 2 * j + 1] = __uint_as_float(w[j] & 0xFFFF0000u);
        } else {
          const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&w[j]));
          v[8 * i + 2 * j] = f.x, v[8 * i + 2 * j + 1] = f.y;
        }
      }
    }
  }
  static __device__ __forceinline__ void store(void* y, int64_t i, float v) {
    if constexpr (T == FloatType::kBF16) {
      static_cast<__nv_bfloat16*>(y)[i] = __float2bfloat16_rn(v);
    } else {
      static_cast<__half*>(y)[i] = __float2half_rn(v);
    }
  }
  static constexpr int kBytes = 2;
};
template <>
struct XRow<FloatType::kBF16> : HalfRow<FloatType::kBF16> {};
template <>
struct XRow<FloatType::kF16> : HalfRow<FloatType::kF16> {};

// MR: the most rows of x (a.m <= MR), each with its own sum per lane.
template <int BITS, FloatType T, int MR>
__global__ void __launch_bounds__(kThreads) linearMxGemvKernel(LinearMxGemv a, MxCodeTable table) {
  using C = Chunk<BITS>;
  using X = XRow<T>;
  __shared__ float tab[1 << BITS];
  for (int i = threadIdx.x; i < (1 << BITS); i += kThreads) tab[i] = table.v[i];
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarps + warp;
  if (row >= a.n) return;
  const int chunks = static_cast<int>(a.k / C::kCodes);
  const int per_block = static_cast<int>(a.block / C::kCodes);  // chunks per scale block
  const uint8_t* codes = a.codes + row * a.row_bytes;
  const uint8_t* scales = a.scales + row * a.blocks;
  const int m = static_cast<int>(a.m);
  float acc[MR];
#pragma unroll
  for (int r = 0; r < MR; ++r) acc[r] = 0.0f;
  for (int c0 = lane; c0 < chunks; c0 += 32 * kUnroll) {
    uint32_t w[kUnroll][C::kWords];
    uint32_t sb[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int c = c0 + 32 * u;
      if (c < chunks) {
        loadChunk<BITS>(codes + static_cast<int64_t>(c) * C::kBytes, w[u]);
        sb[u] = __ldg(scales + c / per_block);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int c = c0 + 32 * u;
      if (c >= chunks) break;
      const float s = mxd::scaleValue(sb[u]);  // NaN for 255: NaN through the whole column
      float v[C::kCodes];
#pragma unroll
      for (int i = 0; i < C::kCodes; ++i) {
        v[i] = *reinterpret_cast<const float*>(reinterpret_cast<const char*>(tab) + tableOffset<BITS>(w[u], i));
      }
#pragma unroll
      for (int r = 0; r < MR; ++r) {
        if (r >= m) break;
        float xv[C::kCodes];
        X::template load<C::kCodes>(static_cast<const char*>(a.x) +
                                        (static_cast<int64_t>(r) * a.k + static_cast<int64_t>(c) * C::kCodes) *
                                            X::kBytes,
                                    xv);
        float sum = 0.0f;
#pragma unroll
        for (int i = 0; i < C::kCodes; ++i) sum = fmaf(v[i], xv[i], sum);
        acc[r] = fmaf(sum, s, acc[r]);
      }
    }
  }
#pragma unroll
  for (int r = 0; r < MR; ++r) {
    if (r >= m) break;
    float v = acc[r];
#pragma unroll
    for (int d = 16; d > 0; d /= 2) v += __shfl_xor_sync(0xFFFFFFFFu, v, d);
    if (lane == 0) X::store(a.y, static_cast<int64_t>(r) * a.n + row, a.bias != nullptr ? v + a.bias[row] : v);
  }
}

template <int BITS, FloatType T>
cudaError_t launch(const LinearMxGemv& a, const MxCodeTable& table, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((a.n + kWarps - 1) / kWarps));
  if (a.m == 1) {
    linearMxGemvKernel<BITS, T, 1><<<grid, kThreads, 0, stream>>>(a, table);
  } else {
    linearMxGemvKernel<BITS, T, kLinearMxGemvMaxRows><<<grid, kThreads, 0, stream>>>(a, table);
  }
  return cudaGetLastError();
}

template <int BITS>
cudaError_t byType(const LinearMxGemv& a, const MxCodeTable& table, cudaStream_t stream) {
  switch (a.xt) {
    case FloatType::kF32:
      return launch<BITS, FloatType::kF32>(a, table, stream);
    case FloatType::kBF16:
      return launch<BITS, FloatType::kBF16>(a, table, stream);
    default:
      return launch<BITS, FloatType::kF16>(a, table, stream);
  }
}

// Codes per chunk for the packing, 0 for packings the GEMV does not read.
int chunkCodes(const MxPacking& p) {
  if (p.bits == 8 && p.per_group == 1) return Chunk<8>::kCodes;
  if (p.bits == 6 && p.per_group == 4 && p.group_bytes == 3) return Chunk<6>::kCodes;
  if (p.bits == 4 && p.per_group == 2 && p.group_bytes == 1) return Chunk<4>::kCodes;
  if (p.bits == 2 && p.per_group == 4 && p.group_bytes == 1) return Chunk<2>::kCodes;
  return 0;
}

}  // namespace

bool linearMxGemvTakes(const LinearMxGemv& a) {
  const int cpc = chunkCodes(a.packing);
  if (cpc == 0 || a.m < 1 || a.m > kLinearMxGemvMaxRows || a.n < 1 || a.k < 1 || a.block < 1 || a.k % cpc != 0 ||
      a.block % cpc != 0) {
    return false;
  }
  if (a.k / cpc > INT32_MAX || a.row_bytes != a.k * a.packing.bits / 8) return false;
  if (a.blocks != (a.k + a.block - 1) / a.block) return false;
  return aligned(a.codes, a.packing.bits == 6 ? 4 : 16) && aligned(a.x, 16);
}

cudaError_t linearMxGemv(const LinearMxGemv& a, const MxCodeTable& table, cudaStream_t stream) {
  if (!linearMxGemvTakes(a)) return cudaErrorInvalidValue;
  switch (a.packing.bits) {
    case 8:
      return byType<8>(a, table, stream);
    case 6:
      return byType<6>(a, table, stream);
    case 4:
      return byType<4>(a, table, stream);
    default:
      return byType<2>(a, table, stream);
  }
}

}  // namespace pt2q::cuda
