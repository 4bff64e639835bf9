// The weight-only GEMV for fp32 x, on CUDA cores (linear_woq_cuda_kernels.h). A packed 4-row block is K/chunk chunks of
// 64 bytes (4 rows x 16 bytes), so a warp reading 8 consecutive chunks reads 512 contiguous
// bytes: lane l takes row l % 4 of chunk l / 4, decodes its 16 bytes (16 int8 or 32 int4 values)
// and multiplies them into every x row. Each group's partial sum is scaled once. Lanes of the
// same row are summed by shuffles; when K is split over the warps of a block (to fill the GPU
// when N is small), the splits are summed in shared memory in a fixed order, so the result does
// not depend on timing.
#include "kernels/cuda/linear_woq_cuda_kernels.h"

#include <type_traits>

namespace pt2q::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int64_t kChunkBytes = 64;

// x in fp32 (bf16 / fp16 x go to the tensor-core kernel): 4 values per 16-byte load.
struct X {
  static constexpr int kPerVec = 4;
  static __device__ __forceinline__ void load(const void* p, int64_t i, float* out) {
    const float4 v = reinterpret_cast<const float4*>(p)[i];
    out[0] = v.x, out[1] = v.y, out[2] = v.z, out[3] = v.w;
  }
  static __device__ __forceinline__ void store(void* p, int64_t i, float v) { static_cast<float*>(p)[i] = v; }
};

// The values of one row's 16 bytes of a chunk, in k order. No integer-to-float conversion (a
// quarter-rate instruction): a code c placed in the low bits of 0x4B000000 reads as 2^23 + c, so
// one byte permute (or mask) and one subtraction give it as a float.
template <int BITS>
__device__ __forceinline__ void decode(const uint4& raw, float* w) {
  const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    if constexpr (BITS == 8) {
      const uint32_t u = words[q] ^ 0x80808080u;  // signed byte v -> v + 128
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        // bytes: (u's byte b, 0, 0, 0x4B)
        const uint32_t bits = __byte_perm(u, 0x4B000000u, static_cast<uint32_t>(b) | 0x7540u);
        w[4 * q + b] = __uint_as_float(bits) - 8388736.0f;  // 2^23 + 128
      }
    } else {  // byte l: k = l (low nibble), k = 16 + l (high), stored as v + 8
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        const uint32_t byte = words[q] >> (8 * b);
        w[4 * q + b] = __uint_as_float((byte & 0xFu) | 0x4B000000u) - 8388616.0f;  // 2^23 + 8
        w[16 + 4 * q + b] = __uint_as_float(((byte >> 4) & 0xFu) | 0x4B000000u) - 8388616.0f;
      }
    }
  }
}

// ZP: zero points present (each chunk then also sums its x values).
template <int BITS, int MR, bool ZP>
__global__ void __launch_bounds__(kThreads) gemv(WoqGemv a, int splits, int64_t chunks) {
  constexpr int CK = BITS == 8 ? 16 : 32;  // k values per chunk row
  constexpr int XV = CK / X::kPerVec;   // x vectors per chunk row
  __shared__ float part[kWarps][MR][4];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int r = lane & 3, q = lane >> 2;
  const int64_t nb = (a.n + 3) / 4;
  const int64_t b = static_cast<int64_t>(blockIdx.x) * (kWarps / splits) + warp / splits;
  const int s = warp % splits;
  const int64_t row = b * 4 + r;
  float acc[MR];
#pragma unroll
  for (int m = 0; m < MR; ++m) acc[m] = 0.0f;
  if (b < nb) {
    const int64_t per = (chunks + splits - 1) / splits;
    const int64_t c0 = s * per, c1 = min(chunks, c0 + per);
    const uint4* wb = reinterpret_cast<const uint4*>(a.packed + b * chunks * kChunkBytes);
    const bool live = row < a.n;  // padding rows of the last block hold zero codes
    const int64_t xrow = a.k / X::kPerVec;  // x vectors per row
#pragma unroll 4
    for (int64_t c = c0 + q; c < c1; c += 8) {
      const uint4 raw = wb[c * 4 + r];
      const int64_t g = c * CK / a.group_size;
      const float sc = live ? a.scales[row * a.groups + g] : 0.0f;
      const float zp = (ZP && live) ? a.zero_points[row * a.groups + g] : 0.0f;
      float w[CK];
      decode<BITS>(raw, w);
#pragma unroll
      for (int m = 0; m < MR; ++m) {
        if (m < a.m) {
          float d = 0.0f, sx = 0.0f;
#pragma unroll
          for (int v = 0; v < XV; ++v) {
            float xf[X::kPerVec];
            X::load(a.x, m * xrow + c * XV + v, xf);
#pragma unroll
            for (int j = 0; j < X::kPerVec; ++j) {
              d = fmaf(w[v * X::kPerVec + j], xf[j], d);
              if constexpr (ZP) sx += xf[j];
            }
          }
          acc[m] = fmaf(sc, ZP ? fmaf(-zp, sx, d) : d, acc[m]);
        }
      }
    }
  }
#pragma unroll
  for (int m = 0; m < MR; ++m) {
#pragma unroll
    for (int off = 4; off < 32; off *= 2) acc[m] += __shfl_xor_sync(0xFFFFFFFFu, acc[m], off);
  }
  if (q == 0) {
#pragma unroll
    for (int m = 0; m < MR; ++m) part[warp][m][r] = acc[m];
  }
  __syncthreads();
  if (s != 0 || b >= nb) return;
  for (int idx = lane; idx < 4 * a.m; idx += 32) {
    const int m = idx / 4, rr = idx % 4;
    const int64_t out_row = b * 4 + rr;
    if (out_row >= a.n) continue;
    float t = 0.0f;
    for (int sp = 0; sp < splits; ++sp) t += part[warp + sp][m][rr];
    if (a.bias != nullptr) t += a.bias[out_row];
    X::store(a.y, m * a.n + out_row, t);
  }
}

template <int BITS>
cudaError_t launch(const WoqGemv& a, cudaStream_t stream) {
  const int64_t chunks = a.k / (BITS == 8 ? 16 : 32), nb = (a.n + 3) / 4;
  // Enough warps for ~48 per multiprocessor (bytes in flight hide HBM latency); each split keeps
  // at least 16 chunks (2 per lane).
  int splits = 1;
  while (splits < kWarps && nb * splits < int64_t(a.sm_count) * 48 && chunks / (splits * 2) >= 16) splits *= 2;
  const dim3 grid(static_cast<unsigned>((nb + kWarps / splits - 1) / (kWarps / splits)));
  const bool zp = a.zero_points != nullptr;
  auto go = [&](auto mr) {
    constexpr int MR = decltype(mr)::value;
    if (zp) {
      gemv<BITS, MR, true><<<grid, kThreads, 0, stream>>>(a, splits, chunks);
    } else {
      gemv<BITS, MR, false><<<grid, kThreads, 0, stream>>>(a, splits, chunks);
    }
  };
  if (a.m <= 1) {
    go(std::integral_constant<int, 1>());
  } else if (a.m <= 2) {
    go(std::integral_constant<int, 2>());
  } else if (a.m <= 4) {
    go(std::integral_constant<int, 4>());
  } else if (a.m <= 8) {
    go(std::integral_constant<int, 8>());
  } else {
    go(std::integral_constant<int, 16>());
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t linearWeightOnlyGemv(const WoqGemv& a, cudaStream_t stream) {
  if (a.m == 0 || a.n == 0) return cudaSuccess;
  if (a.xt != FloatType::kF32) return linearWeightOnlyMma(a, stream);
  return a.bits == 4 ? launch<4>(a, stream) : launch<8>(a, stream);
}

}  // namespace pt2q::cuda
