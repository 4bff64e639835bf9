// Each thread packs 8 output bytes from one 16-byte load (unpacks 8 input bytes into one 16-byte
// store) where the pointers allow, and byte by byte otherwise (an input view at an odd offset);
// pack_weight writes one 16-byte row slice of a chunk per thread, reading its 16 or 32 source bytes
// in order, so a warp's reads are consecutive along the source row.
#include "kernels/cuda/pack_cuda_kernels.h"

#include "kernels/cuda/affine_cuda_math.cuh"
#include "kernels/cuda/aligned.h"

#include <algorithm>
#include <climits>

namespace pt2q::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 132 * 32;

unsigned blocksFor(int64_t items) {
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>((items + kThreads - 1) / kThreads, kMaxBlocks)));
}

__device__ __forceinline__ bool outOfRange(uint8_t v, bool is_signed) {
  return is_signed ? static_cast<int8_t>(v) < -8 || static_cast<int8_t>(v) > 7 : v > 15;
}

__device__ __forceinline__ uint8_t packPair(uint8_t a, uint8_t b, bool high_first) {
  return high_first ? static_cast<uint8_t>((a & 15) << 4 | (b & 15)) : static_cast<uint8_t>((b & 15) << 4 | (a & 15));
}

__device__ __forceinline__ uint8_t nibble(uint8_t v, bool is_signed) {
  return is_signed ? static_cast<uint8_t>(((v ^ 8) - 8)) : v;
}

__device__ __forceinline__ void reportBad(unsigned long long* first_bad, int64_t index) {
  atomicMin(first_bad, static_cast<unsigned long long>(index));
}

__global__ void __launch_bounds__(kThreads) packInt4Kernel(const uint8_t* in, uint8_t* out, int64_t out_bytes,
                                                           bool high_first, bool is_signed, bool vec,
                                                           unsigned long long* first_bad) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  const int64_t units = vec ? out_bytes / 8 : 0;
  int64_t bad = LLONG_MAX;
  for (int64_t u = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; u < units; u += stride) {
    const uint4 v = reinterpret_cast<const uint4*>(in)[u];
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
    uint32_t o[2] = {0, 0};
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const uint8_t a = static_cast<uint8_t>(w[i / 2] >> (16 * (i % 2))), b = static_cast<uint8_t>(w[i / 2] >> (16 * (i % 2) + 8));
      if (outOfRange(a, is_signed)) bad = min(bad, 16 * u + 2 * i);
      if (outOfRange(b, is_signed)) bad = min(bad, 16 * u + 2 * i + 1);
      o[i / 4] |= static_cast<uint32_t>(packPair(a, b, high_first)) << (8 * (i % 4));
    }
    reinterpret_cast<uint2*>(out)[u] = make_uint2(o[0], o[1]);
  }
  for (int64_t i = 8 * units + static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < out_bytes; i += stride) {
    const uint8_t a = in[2 * i], b = in[2 * i + 1];
    if (outOfRange(a, is_signed)) bad = min(bad, 2 * i);
    if (outOfRange(b, is_signed)) bad = min(bad, 2 * i + 1);
    out[i] = packPair(a, b, high_first);
  }
  if (bad != LLONG_MAX) reportBad(first_bad, bad);
}

__global__ void __launch_bounds__(kThreads) unpackInt4Kernel(const uint8_t* in, uint8_t* out, int64_t in_bytes,
                                                             bool high_first, bool is_signed, bool vec) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  const int64_t units = vec ? in_bytes / 8 : 0;
  for (int64_t u = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; u < units; u += stride) {
    const uint2 v = reinterpret_cast<const uint2*>(in)[u];
    uint32_t o[4] = {0, 0, 0, 0};
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const uint8_t p = static_cast<uint8_t>((i < 4 ? v.x : v.y) >> (8 * (i % 4)));
      const uint8_t lo = nibble(p & 15, is_signed), hi = nibble(p >> 4, is_signed);
      const uint32_t pair = high_first ? (hi | static_cast<uint32_t>(lo) << 8) : (lo | static_cast<uint32_t>(hi) << 8);
      o[i / 2] |= pair << (16 * (i % 2));
    }
    reinterpret_cast<uint4*>(out)[u] = make_uint4(o[0], o[1], o[2], o[3]);
  }
  for (int64_t i = 8 * units + static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < in_bytes; i += stride) {
    const uint8_t p = in[i];
    const uint8_t lo = nibble(p & 15, is_signed), hi = nibble(p >> 4, is_signed);
    out[2 * i] = high_first ? hi : lo;
    out[2 * i + 1] = high_first ? lo : hi;
  }
}

template <int BITS>
__global__ void __launch_bounds__(kThreads) packWeightKernel(const int8_t* w, int64_t n, int64_t k, int64_t chunks,
                                                             int64_t rows, int8_t* out, unsigned long long* first_bad) {
  constexpr int kChunk = BITS == 4 ? 32 : 16;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  int64_t bad = LLONG_MAX;
  // Slice (row, c): row-major, so a warp reads along a source row.
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; t < rows * chunks; t += stride) {
    const int64_t row = t / chunks, c = t % chunks;
    uint32_t o[4] = {0, 0, 0, 0};
#pragma unroll
    for (int l = 0; l < 16; ++l) {
      uint32_t byte;
      if (BITS == 8) {
        const int64_t j = c * kChunk + l;
        byte = row < n && j < k ? static_cast<uint8_t>(w[row * k + j]) : 0u;
      } else {
        const int64_t j = c * kChunk + l, h = j + 16;
        const int lo = row < n && j < k ? w[row * k + j] : 0, hi = row < n && h < k ? w[row * k + h] : 0;
        if (lo < -8 || lo > 7) bad = min(bad, row * k + j);
        if (hi < -8 || hi > 7) bad = min(bad, row * k + h);
        byte = static_cast<uint32_t>(((lo + 8) & 15) | ((hi + 8) & 15) << 4);
      }
      o[l / 4] |= byte << (8 * (l % 4));
    }
    const int64_t slice = ((row / 4) * chunks + c) * 4 + row % 4;
    reinterpret_cast<uint4*>(out)[slice] = make_uint4(o[0], o[1], o[2], o[3]);
  }
  if (BITS == 4 && bad != LLONG_MAX) reportBad(first_bad, bad);
}

// One thread per 16-byte row slice of a chunk (16 int8 or 32 int4 codes), read as one load; the
// chunk lies in one group (group sizes are whole chunks), so one scale and zero point; the outputs
// leave as 16-byte stores where the row allows (a first version stored element by element, 2-byte
// stores 64 bytes apart across a warp, and took ~175 us for a 4096 x 4096 weight on the H100).
template <int BITS, typename T>
__global__ void __launch_bounds__(kThreads) dequantWeightKernel(const int8_t* packed, int64_t n, int64_t k,
                                                                int64_t chunks, int64_t groups, int64_t group_size,
                                                                const float* scales, const float* zero_points,
                                                                T* out) {
  constexpr int kChunk = BITS == 4 ? 32 : 16;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; t < n * chunks; t += stride) {
    const int64_t row = t / chunks, c = t % chunks;
    const uint4 v = reinterpret_cast<const uint4*>(packed)[((row / 4) * chunks + c) * 4 + row % 4];
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
    const int64_t q = row * groups + c * kChunk / group_size;
    const float s = scales[q], zp = zero_points != nullptr ? zero_points[q] : 0.0f;
    T vals[kChunk];
#pragma unroll
    for (int l = 0; l < kChunk; ++l) {
      // int8: byte l; int4: byte l % 16, its low nibble for l < 16, high above (stored v + 8)
      const uint32_t byte = (w[(l % 16) / 4] >> (8 * (l % 4))) & 0xFFu;
      const float code = BITS == 8 ? static_cast<float>(static_cast<int8_t>(byte))
                                   : static_cast<float>(static_cast<int>((l < 16 ? byte : byte >> 4) & 0xFu) - 8);
      vals[l] = affine::fromFloat<T>((code - zp) * s);
    }
    T* dst = out + row * k + c * kChunk;
    const int64_t n_here = k - c * kChunk < kChunk ? k - c * kChunk : kChunk;
    if (n_here == kChunk && reinterpret_cast<uintptr_t>(dst) % 16 == 0) {
      uint4 vec[sizeof(vals) / 16];
      memcpy(vec, vals, sizeof(vals));
#pragma unroll
      for (int i = 0; i < static_cast<int>(sizeof(vals) / 16); ++i) reinterpret_cast<uint4*>(dst)[i] = vec[i];
    } else {
      for (int64_t l = 0; l < n_here; ++l) dst[l] = vals[l];
    }
  }
}

template <int BITS>
cudaError_t dequantByType(const int8_t* packed, int64_t n, int64_t k, int64_t groups, int64_t group_size,
                          const float* scales, const float* zero_points, void* out, FloatType out_t,
                          cudaStream_t stream) {
  const int64_t chunks = (k + (BITS == 4 ? 31 : 15)) / (BITS == 4 ? 32 : 16);
  const unsigned blocks = blocksFor(n * chunks);
  if (out_t == FloatType::kF32) {
    dequantWeightKernel<BITS, float><<<blocks, kThreads, 0, stream>>>(packed, n, k, chunks, groups, group_size, scales,
                                                                      zero_points, static_cast<float*>(out));
  } else if (out_t == FloatType::kBF16) {
    dequantWeightKernel<BITS, __nv_bfloat16><<<blocks, kThreads, 0, stream>>>(
        packed, n, k, chunks, groups, group_size, scales, zero_points, static_cast<__nv_bfloat16*>(out));
  } else {
    dequantWeightKernel<BITS, __half><<<blocks, kThreads, 0, stream>>>(packed, n, k, chunks, groups, group_size, scales,
                                                                       zero_points, static_cast<__half*>(out));
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t packInt4(const uint8_t* in, uint8_t* out, int64_t out_bytes, bool high_first, bool is_signed,
                     unsigned long long* first_bad, cudaStream_t stream) {
  if (out_bytes == 0) return cudaSuccess;
  const bool vec = aligned(in, 16) && aligned(out, 8);
  packInt4Kernel<<<blocksFor(vec ? (out_bytes + 7) / 8 : out_bytes), kThreads, 0, stream>>>(
      in, out, out_bytes, high_first, is_signed, vec, first_bad);
  return cudaGetLastError();
}

cudaError_t unpackInt4(const uint8_t* in, uint8_t* out, int64_t in_bytes, bool high_first, bool is_signed,
                       cudaStream_t stream) {
  if (in_bytes == 0) return cudaSuccess;
  const bool vec = aligned(in, 8) && aligned(out, 16);
  unpackInt4Kernel<<<blocksFor(vec ? (in_bytes + 7) / 8 : in_bytes), kThreads, 0, stream>>>(in, out, in_bytes,
                                                                                           high_first, is_signed, vec);
  return cudaGetLastError();
}

cudaError_t packWeight(const int8_t* w, int64_t n, int64_t k, int bits, int8_t* out, unsigned long long* first_bad,
                       cudaStream_t stream) {
  const int64_t chunk = bits == 4 ? 32 : 16, chunks = (k + chunk - 1) / chunk, rows = (n + 3) / 4 * 4;
  if (rows * chunks == 0) return cudaSuccess;
  if (bits == 4) {
    packWeightKernel<4><<<blocksFor(rows * chunks), kThreads, 0, stream>>>(w, n, k, chunks, rows, out, first_bad);
  } else {
    packWeightKernel<8><<<blocksFor(rows * chunks), kThreads, 0, stream>>>(w, n, k, chunks, rows, out, first_bad);
  }
  return cudaGetLastError();
}

cudaError_t dequantWeight(const int8_t* packed, int64_t n, int64_t k, int bits, int64_t groups, int64_t group_size,
                          const float* scales, const float* zero_points, void* out, FloatType out_t,
                          cudaStream_t stream) {
  if (n * k == 0) return cudaSuccess;
  return bits == 4 ? dequantByType<4>(packed, n, k, groups, group_size, scales, zero_points, out, out_t, stream)
                   : dequantByType<8>(packed, n, k, groups, group_size, scales, zero_points, out, out_t, stream);
}

}  // namespace pt2q::cuda
