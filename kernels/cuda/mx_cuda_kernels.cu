// CUDA kernels of the MX / BFP ops. Compiled with --fmad=false, like the affine kernels, so
// that no multiply and add fuse where the CPU rounds them apart; IEEE division and subnormals
// are nvcc's defaults (no fast math), as the CPU's.
//
// Two shapes of kernel:
// - blocks along the innermost axis, every row a whole number of blocks of 4-128 elements
//   (fp32) or 8-256 (bf16 / fp16): each thread loads 16 bytes, the L threads of a block take
//   its max with warp shuffles, and each writes its 16 bytes back. One pass, coalesced.
// - anything else: one thread per block column (outer index, block, inner index), looping over
//   the block's elements twice (max, then values); neighbouring threads read neighbouring inner
//   indices, so strided blocks stay coalesced.
#include "kernels/cuda/mx_cuda_kernels.h"
#include "kernels/cuda/mx_numerics.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstring>
#include <initializer_list>

namespace pt2q::cuda {

namespace {

constexpr int kThreads = 256;

template <FloatType K>
struct IO;
template <>
struct IO<FloatType::kF32> {
  using T = float;
  static __device__ __forceinline__ float load(T v) { return v; }
  static __device__ __forceinline__ T store(float v) { return v; }
  static __device__ __forceinline__ T storeFinite(float v) { return v; }
};
// storeFinite: the same bits as store for a value that is not NaN, by the conversion instruction
// (round to nearest even, as store; store's NaN check and integer rounding were most of a bf16
// element's instructions).
template <>
struct IO<FloatType::kBF16> {
  using T = uint16_t;
  static __device__ __forceinline__ float load(T v) { return mxd::bf16ToFloat(v); }
  static __device__ __forceinline__ T store(float v) { return mxd::floatToBF16(v); }
  static __device__ __forceinline__ T storeFinite(float v) { return __bfloat16_as_ushort(__float2bfloat16_rn(v)); }
};
template <>
struct IO<FloatType::kF16> {
  using T = uint16_t;
  static __device__ __forceinline__ float load(T v) { return mxd::f16ToFloat(v); }
  static __device__ __forceinline__ T store(float v) { return mxd::floatToF16(v); }
  static __device__ __forceinline__ T storeFinite(float v) { return __half_as_ushort(__float2half_rn(v)); }
};

__device__ __forceinline__ mxd::ElemParams elemParams(const MxLaunch& c) {
  return mxd::ElemParams{c.is_int, c.emin, c.m, c.emax, c.max_norm};
}

__device__ __forceinline__ float quietNan() { return mxd::bitsToFloat(0x7FC00000u); }

// The block's treatment once its max is known: its scale, or a fill (NaN block; flushed block).
struct BlockScale {
  float scale;
  float inv;  // 1 / scale, exact (scales are powers of two in [2^-127, 2^127])
  uint32_t byte;
  int kill;  // 0 quantize, 1 NaN, 2 zero
};

__device__ __forceinline__ BlockScale blockScale(float amax, bool nan_seen, const MxLaunch& c,
                                                 const mxd::ElemParams& p) {
  if (nan_seen) amax = quietNan();
  BlockScale b;
  b.byte = mxd::sharedScaleBits(amax, p, c.scale_mode);
  b.scale = mxd::scaleValue(b.byte);
  b.inv = 1.0f / b.scale;
  const bool flush = c.flush_fp32_subnorms && ((mxd::floatToBits(amax) >> 23) & 0xFFu) == 0u;
  b.kill = b.byte == 255u ? 1 : (flush ? 2 : 0);
  return b;
}

// The value of an element of a block that is not killed; rnd: its random bits (stochastic).
template <int R>
__device__ __forceinline__ float fakeKept(float x, const BlockScale& b, const mxd::ElemParams& p, uint32_t rnd) {
  // x * (1 / 2^k) rounds the same real number as x / 2^k (the CPU divides): the same bits,
  // without the GPU's division sequence.
  return mxd::quantizeElement<R>(x * b.inv, p, rnd) * b.scale;
}

template <int R>
__device__ __forceinline__ float fakeElement(float x, const BlockScale& b, const MxLaunch& c,
                                             const mxd::ElemParams& p, int64_t index) {
  if (b.kill != 0) return b.kill == 1 ? quietNan() : 0.0f;
  return fakeKept<R>(x, b, p, R == 3 ? mxd::elementRandom(c.random_key, static_cast<uint64_t>(index)) : 0u);
}

// An element's stored bits: kill 1 fills the block with NaN, which only store writes as the CPU does.
template <FloatType K>
__device__ __forceinline__ typename IO<K>::T storeOf(float v, const BlockScale& b) {
  return b.kill == 1 ? IO<K>::store(v) : IO<K>::storeFinite(v);
}

// max.NaN: the larger of two values, NaN if either is NaN, so that a block's max also says whether
// it held a NaN (one instruction where a max and a NaN test per element were three). On packed
// pairs of 2-byte floats (sign bits cleared first) one instruction covers two elements; 2-byte
// floats order as the fp32 values they convert to exactly.
__device__ __forceinline__ float maxNan(float a, float b) {
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
template <FloatType K>
__device__ __forceinline__ uint32_t absMaxNan2(uint32_t acc, uint32_t pair) {
  static_assert(K != FloatType::kF32, "pairs of 2-byte floats");
  uint32_t r;
  const uint32_t a = pair & 0x7FFF7FFFu;
  if constexpr (K == FloatType::kBF16) {
    asm("max.NaN.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(acc), "r"(a));
  } else {
    asm("max.NaN.f16x2 %0, %1, %2;" : "=r"(r) : "r"(acc), "r"(a));
  }
  return r;
}

// ---- one thread per block column ----------------------------------------------------------------

// Thread t's block column: outer index o, block j (rows [l0, l1) of the axis), inner index w.
struct Column {
  int64_t o, j, w, l0, l1, nblocks;
};

__device__ __forceinline__ Column columnOf(const MxLaunch& c, int64_t t) {
  Column k;
  k.nblocks = (c.len + c.block - 1) / c.block;
  k.w = t % c.inner;
  const int64_t r = t / c.inner;
  k.o = r / k.nblocks;
  k.j = r % k.nblocks;
  k.l0 = k.j * c.block;
  k.l1 = min(c.len, k.l0 + c.block);
  return k;
}

template <FloatType K>
__device__ __forceinline__ void columnMax(const typename IO<K>::T* x, const MxLaunch& c, int64_t o, int64_t l0,
                                          int64_t l1, int64_t w, float& amax, bool& nan_seen) {
  amax = 0.0f;
  nan_seen = false;
  for (int64_t l = l0; l < l1; ++l) {
    const float a = fabsf(IO<K>::load(x[(o * c.len + l) * c.inner + w]));
    nan_seen |= (a != a);
    amax = a > amax ? a : amax;
  }
}

// CACHE > 0: blocks of at most CACHE elements, read once into registers (one pass over memory);
// 0: any block, read twice (the second time mostly from cache).
template <FloatType K, int R, int CACHE>
__global__ void fakeQuantizeColumns(const typename IO<K>::T* x, typename IO<K>::T* y, MxLaunch c,
                                    int64_t columns) {
  const int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (t >= columns) return;
  const Column k = columnOf(c, t);
  const int64_t o = k.o, w = k.w, l0 = k.l0, l1 = k.l1;
  const mxd::ElemParams p = elemParams(c);
  const int64_t base = (o * c.len + l0) * c.inner + w;
  float amax = 0.0f;
  bool nan_seen = false;
  if constexpr (CACHE > 0) {
    float v[CACHE];
    const int n = static_cast<int>(l1 - l0);
#pragma unroll
    for (int l = 0; l < CACHE; ++l) {
      v[l] = l < n ? IO<K>::load(x[base + l * c.inner]) : 0.0f;
      const float a = fabsf(v[l]);
      nan_seen |= (a != a);
      amax = a > amax ? a : amax;
    }
    const BlockScale b = blockScale(amax, nan_seen, c, p);
#pragma unroll
    for (int l = 0; l < CACHE; ++l) {
      const int64_t i = base + l * c.inner;
      if (l < n) y[i] = storeOf<K>(fakeElement<R>(v[l], b, c, p, i), b);
    }
  } else {
    columnMax<K>(x, c, o, l0, l1, w, amax, nan_seen);
    const BlockScale b = blockScale(amax, nan_seen, c, p);
    for (int64_t l = l0; l < l1; ++l) {
      const int64_t i = (o * c.len + l) * c.inner + w;
      y[i] = storeOf<K>(fakeElement<R>(IO<K>::load(x[i]), b, c, p, i), b);
    }
  }
}

// Two neighbouring block columns per thread (2-byte floats, inner even, blocks of at most 32): one
// 4-byte load per row serves both columns and the block stays in 32 registers as packed pairs,
// where one column per thread made 2-byte loads and held 32 floats (93 registers, a quarter of
// the SM's threads). Thread t is block column t of the layout seen with pairs as its elements.
// INT: the format is an integer one (c.is_int), a constant here: as a run-time field it left a
// branch on it around every element (BSSY / BSYNC pairs in the SASS).
// MINB: blocks per multiprocessor to fit, 0 for the compiler's choice.
template <FloatType K, int R, bool INT, int MINB>
__global__ void __launch_bounds__(kThreads, MINB) fakeQuantizeColumnPairs(const uint32_t* x, uint32_t* y, MxLaunch c,
                                                                    int64_t pairs) {
  const int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (t >= pairs) return;
  const int64_t half = c.inner / 2;
  MxLaunch in_pairs = c;
  in_pairs.inner = half;
  const Column k = columnOf(in_pairs, t);
  const int n = static_cast<int>(k.l1 - k.l0);
  const int64_t base = (k.o * c.len + k.l0) * half + k.w;
  mxd::ElemParams p = elemParams(c);
  p.is_int = INT;
  uint32_t v[32];
  uint32_t amax2 = 0u;  // the two columns' NaN-propagating max |x|, as a packed pair
#pragma unroll
  for (int l = 0; l < 32; ++l) {
    v[l] = l < n ? x[base + l * half] : 0u;
    amax2 = absMaxNan2<K>(amax2, v[l]);
  }
  const float amax0 = IO<K>::load(static_cast<uint16_t>(amax2)), amax1 = IO<K>::load(static_cast<uint16_t>(amax2 >> 16));
  const bool nan0 = amax0 != amax0, nan1 = amax1 != amax1;
  // Empty asms that "change" each pair and the row step: nothing computed from them above (converted
  // values, 32 addresses) is kept for the pass below, so the 32 packed pairs are all that stays live.
#pragma unroll
  for (int l = 0; l < 32; ++l) asm("" : "+r"(v[l]));
  int64_t step = half;
  asm("" : "+l"(step));
  const BlockScale b0 = blockScale(amax0, nan0, c, p), b1 = blockScale(amax1, nan1, c, p);
  if (n == 32 && (b0.kill | b1.kill) == 0) {
    // Whole blocks, neither NaN nor flushed (the common case): no per-element branch. The general
    // loop below ran 43 instructions an element for bf16 on the H100 (Nsight Compute), issue-bound
    // at 40 % of DRAM bandwidth, with a kill test and a row test per element.
#pragma unroll
    for (int l = 0; l < 32; ++l) {
      const int64_t i = R == 3 ? (base + l * step) * 2 : 0;
      const uint32_t r0 = R == 3 ? mxd::elementRandom(c.random_key, static_cast<uint64_t>(i)) : 0u;
      const uint32_t r1 = R == 3 ? mxd::elementRandom(c.random_key, static_cast<uint64_t>(i + 1)) : 0u;
      const float f0 = fakeKept<R>(IO<K>::load(static_cast<uint16_t>(v[l])), b0, p, r0);
      const float f1 = fakeKept<R>(IO<K>::load(static_cast<uint16_t>(v[l] >> 16)), b1, p, r1);
      y[base + l * step] = uint32_t{IO<K>::storeFinite(f0)} | (uint32_t{IO<K>::storeFinite(f1)} << 16);
    }
    return;
  }
#pragma unroll
  for (int l = 0; l < 32; ++l) {
    if (l >= n) break;
    const int64_t i = (base + l * step) * 2;
    const float f0 = fakeElement<R>(IO<K>::load(static_cast<uint16_t>(v[l])), b0, c, p, i);
    const float f1 = fakeElement<R>(IO<K>::load(static_cast<uint16_t>(v[l] >> 16)), b1, c, p, i + 1);
    y[base + l * step] = uint32_t{storeOf<K>(f0, b0)} | (uint32_t{storeOf<K>(f1, b1)} << 16);
  }
}

// ---- innermost blocks, 16 bytes per thread ------------------------------------------------------

template <FloatType K>
struct Vec;  // 16 bytes of elements
template <>
struct Vec<FloatType::kF32> {
  static constexpr int kN = 4;
};
template <>
struct Vec<FloatType::kBF16> {
  static constexpr int kN = 8;
};
template <>
struct Vec<FloatType::kF16> {
  static constexpr int kN = 8;
};

// The 16 bytes of one thread as floats, and the NaN-propagating max |x| of its block: the thread's
// own, then over the block's L lanes by shuffles (all 32 lanes must run them).
template <FloatType K, int L>
__device__ __forceinline__ void loadBlockMax(const uint4& raw, float* f, float& amax, bool& nan_seen) {
  typename IO<K>::T v[Vec<K>::kN];
  memcpy(v, &raw, 16);
#pragma unroll
  for (int i = 0; i < Vec<K>::kN; ++i) f[i] = IO<K>::load(v[i]);
  float m;
  if constexpr (K == FloatType::kF32) {
    m = 0.0f;
#pragma unroll
    for (int i = 0; i < Vec<K>::kN; ++i) m = maxNan(m, fabsf(f[i]));
  } else {
    const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
    uint32_t m2 = 0u;
#pragma unroll
    for (int i = 0; i < 4; ++i) m2 = absMaxNan2<K>(m2, w[i]);
    m = maxNan(IO<K>::load(static_cast<uint16_t>(m2)), IO<K>::load(static_cast<uint16_t>(m2 >> 16)));
  }
#pragma unroll
  for (int off = L / 2; off > 0; off /= 2) m = maxNan(m, __shfl_xor_sync(0xFFFFFFFFu, m, off));
  amax = m;
  nan_seen = m != m;
}

// Lanes per block of the 16-byte kernels (1..32, a power of two), or 0 where they do not apply:
// blocks along the innermost axis, rows of whole blocks, blocks of whole 16-byte vectors, every
// pointer in `ptrs` 16-byte aligned.
template <FloatType K>
int64_t vecLanes(const MxLaunch& c, std::initializer_list<const void*> ptrs) {
  constexpr int V = Vec<K>::kN;
  for (const void* p : ptrs) {
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return 0;
  }
  const int64_t lanes = c.block / V;
  const bool ok = c.inner == 1 && c.block % V == 0 && c.len % c.block == 0 && lanes >= 1 && lanes <= 32 &&
                  (lanes & (lanes - 1)) == 0;
  return ok ? lanes : 0;
}

// Each group of L lanes holds one block of L * V elements; groups never straddle a warp (L
// divides 32), and every lane of a warp runs the shuffles (lanes past the end just idle). Each
// thread takes U vectors `stride` apart, all loaded before any is used, so that more bytes are
// in flight per thread than one 16-byte load.
template <FloatType K, int R, int L, int U>
__global__ void fakeQuantizeVec(const uint4* x, uint4* y, MxLaunch c, int64_t nvec, int64_t stride) {
  using T = typename IO<K>::T;
  constexpr int V = Vec<K>::kN;
  const int64_t t0 = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  uint4 raw[U];
#pragma unroll
  for (int u = 0; u < U; ++u) raw[u] = t0 + u * stride < nvec ? x[t0 + u * stride] : make_uint4(0, 0, 0, 0);
  const mxd::ElemParams p = elemParams(c);
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int64_t t = t0 + u * stride;
    float f[V];
    float amax;
    bool nan_seen;
    loadBlockMax<K, L>(raw[u], f, amax, nan_seen);
    if (t >= nvec) continue;
    const BlockScale b = blockScale(amax, nan_seen, c, p);
    T v[V];
    if (b.kill != 0) {
      const T fill = IO<K>::store(b.kill == 1 ? quietNan() : 0.0f);
#pragma unroll
      for (int i = 0; i < V; ++i) v[i] = fill;
    } else {
      // elementRandom(key, index) = hash32(low ^ hash32(high ^ key)): a vector never crosses
      // 2^32 elements (V divides it), so the inner hash is the vector's. And since first is a
      // multiple of V, (first + i) ^ inner = lo ^ i with i < V, which leaves lo's high half (so
      // hash32's first step, x ^ (x >> 16)) alone: that step is done once a vector (3 of the
      // stochastic path's ~15 extra instructions an element).
      const uint64_t first = static_cast<uint64_t>(t) * V;
      const uint32_t inner = R == 3 ? mxd::hash32(static_cast<uint32_t>(first >> 32) ^ c.random_key) : 0u;
      const uint32_t lo = static_cast<uint32_t>(first) ^ inner;
      const uint32_t head = lo ^ (lo >> 16);
#pragma unroll
      for (int i = 0; i < V; ++i) {
        const uint32_t rnd = R == 3 ? mxd::hash32Tail(head ^ static_cast<uint32_t>(i)) : 0u;
        v[i] = IO<K>::storeFinite(fakeKept<R>(f[i], b, p, rnd));
      }
    }
    memcpy(&raw[u], v, 16);
    y[t] = raw[u];
  }
}

template <FloatType K, int R>
cudaError_t launchFake(const void* x, void* y, const MxLaunch& c, cudaStream_t stream) {
  using T = typename IO<K>::T;
  constexpr int V = Vec<K>::kN;
  const int64_t numel = c.outer * c.len * c.inner;
  const int64_t lanes = vecLanes<K>(c, {x, y});
  if (lanes > 0) {
    const int64_t nvec = numel / V;
    constexpr int U = 2;
    const int64_t blocks = (nvec + int64_t(kThreads) * U - 1) / (int64_t(kThreads) * U);
    const int64_t stride = blocks * kThreads;  // a multiple of 32: lane groups stay aligned
    const dim3 grid(static_cast<unsigned>(blocks));
    const auto* xv = static_cast<const uint4*>(x);
    auto* yv = static_cast<uint4*>(y);
    switch (lanes) {
      case 1: fakeQuantizeVec<K, R, 1, U><<<grid, kThreads, 0, stream>>>(xv, yv, c, nvec, stride); break;
      case 2: fakeQuantizeVec<K, R, 2, U><<<grid, kThreads, 0, stream>>>(xv, yv, c, nvec, stride); break;
      case 4: fakeQuantizeVec<K, R, 4, U><<<grid, kThreads, 0, stream>>>(xv, yv, c, nvec, stride); break;
      case 8: fakeQuantizeVec<K, R, 8, U><<<grid, kThreads, 0, stream>>>(xv, yv, c, nvec, stride); break;
      case 16: fakeQuantizeVec<K, R, 16, U><<<grid, kThreads, 0, stream>>>(xv, yv, c, nvec, stride); break;
      default: fakeQuantizeVec<K, R, 32, U><<<grid, kThreads, 0, stream>>>(xv, yv, c, nvec, stride); break;
    }
    return cudaGetLastError();
  }
  const int64_t columns = c.outer * ((c.len + c.block - 1) / c.block) * c.inner;
  if constexpr (sizeof(T) == 2) {
    if (c.inner % 2 == 0 && c.block <= 32 && reinterpret_cast<uintptr_t>(x) % 4 == 0 &&
        reinterpret_cast<uintptr_t>(y) % 4 == 0) {
      const int64_t pairs = columns / 2;
      const auto grid = static_cast<unsigned>((pairs + kThreads - 1) / kThreads);
      const auto* xp = static_cast<const uint32_t*>(x);
      auto* yp = static_cast<uint32_t*>(y);
      // Register bounds timed on the H100 (bf16 axis 0, medians of 2 x 100): float formats 0.116 ms
      // at the default (95 registers), 0.122 at 3 blocks per SM, 0.112 at 4 (64 registers, 40 bytes
      // of spills); int8 0.105 / 0.112 / 0.110. Each takes its best.
      if (c.is_int) {
        fakeQuantizeColumnPairs<K, R, true, 0><<<grid, kThreads, 0, stream>>>(xp, yp, c, pairs);
      } else {
        fakeQuantizeColumnPairs<K, R, false, 4><<<grid, kThreads, 0, stream>>>(xp, yp, c, pairs);
      }
      return cudaGetLastError();
    }
  }
  const dim3 grid(static_cast<unsigned>((columns + kThreads - 1) / kThreads));
  const auto* xt = static_cast<const T*>(x);
  auto* yt = static_cast<T*>(y);
  if (c.block <= 32) {
    fakeQuantizeColumns<K, R, 32><<<grid, kThreads, 0, stream>>>(xt, yt, c, columns);
  } else {
    fakeQuantizeColumns<K, R, 0><<<grid, kThreads, 0, stream>>>(xt, yt, c, columns);
  }
  return cudaGetLastError();
}

template <FloatType K>
cudaError_t fakeByRounding(const void* x, void* y, const MxLaunch& c, cudaStream_t stream) {
  switch (c.rounding) {
    case 1: return launchFake<K, 1>(x, y, c, stream);
    case 2: return launchFake<K, 2>(x, y, c, stream);
    case 3: return launchFake<K, 3>(x, y, c, stream);
    default: return launchFake<K, 0>(x, y, c, stream);
  }
}

// ---- mx_quantize: codes and scale bytes ---------------------------------------------------------

template <FloatType K, int R, typename CodeT>
__global__ void quantizeColumns(const typename IO<K>::T* x, CodeT* codes, uint8_t* scales, MxLaunch c,
                                int64_t columns) {
  const int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (t >= columns) return;
  const Column k = columnOf(c, t);
  const int64_t o = k.o, w = k.w, l0 = k.l0, l1 = k.l1;
  const mxd::ElemParams p = elemParams(c);
  float amax;
  bool nan_seen;
  columnMax<K>(x, c, o, l0, l1, w, amax, nan_seen);
  const BlockScale b = blockScale(amax, nan_seen, c, p);
  scales[(o * k.nblocks + k.j) * c.inner + w] = static_cast<uint8_t>(b.byte);
  // NaN and flushed blocks store the code of 0 (their scale byte says what they are).
  const float inv = b.kill != 0 ? 0.0f : b.inv;
  for (int64_t l = l0; l < l1; ++l) {
    const int64_t i = (o * c.len + l) * c.inner + w;
    const uint32_t rnd = R == 3 ? mxd::elementRandom(c.random_key, static_cast<uint64_t>(i)) : 0u;
    const float v = inv == 0.0f ? 0.0f : IO<K>::load(x[i]) * inv;
    codes[i] = static_cast<CodeT>(mxd::encodeElement(mxd::quantizeElement<R>(v, p, rnd), p, c.ebits, c.code_bits));
  }
}

// Blocks along the innermost axis, 16 bytes of x per thread as in fakeQuantizeVec, codes written
// already packed (one pass over memory, no unpacked copy): the thread's V codes are whole packing
// groups (V is 4 or 8, a group at most 4 codes), written as the bytes they fill; the first lane
// of a block writes its scale byte.
template <FloatType K, int R, int L>
__global__ void quantizeVec(const uint4* x, uint8_t* codes, uint8_t* scales, MxLaunch c, MxPacking pk,
                            int64_t nvec) {
  constexpr int V = Vec<K>::kN;
  const int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  float f[V];
  float amax;
  bool nan_seen;
  loadBlockMax<K, L>(t < nvec ? x[t] : make_uint4(0, 0, 0, 0), f, amax, nan_seen);
  if (t >= nvec) return;
  const mxd::ElemParams p = elemParams(c);
  const BlockScale b = blockScale(amax, nan_seen, c, p);
  const int64_t e0 = t * V;
  if (t % L == 0) scales[e0 / c.block] = static_cast<uint8_t>(b.byte);
  const float inv = b.kill != 0 ? 0.0f : b.inv;  // NaN and flushed blocks store the code of 0
  uint32_t code[V];
#pragma unroll
  for (int i = 0; i < V; ++i) {
    const uint32_t rnd = R == 3 ? mxd::elementRandom(c.random_key, static_cast<uint64_t>(e0 + i)) : 0u;
    const float q = mxd::quantizeElement<R>(inv == 0.0f ? 0.0f : f[i] * inv, p, rnd);
    code[i] = mxd::encodeElement(q, p, c.ebits, c.code_bits);
  }
  if (pk.per_group == 1) {
    const int bytes = pk.bits / 8;  // 1, or 2 for BFP wider than 8 bits (little endian)
    uint8_t* dst = codes + e0 * bytes;
#pragma unroll
    for (int i = 0; i < V; ++i) {
      dst[i * bytes] = static_cast<uint8_t>(code[i]);
      if (bytes == 2) dst[i * bytes + 1] = static_cast<uint8_t>(code[i] >> 8);
    }
    return;
  }
  // Code i goes to group i / per_group at bit (i % per_group) * bits; a full group is written out.
  uint8_t* dst = codes + e0 / pk.per_group * pk.group_bytes;
  uint32_t word = 0;
#pragma unroll
  for (int i = 0; i < V; ++i) {
    const int slot = i % pk.per_group;
    word |= code[i] << (slot * pk.bits);
    if (slot == pk.per_group - 1) {
      uint8_t* g = dst + (i / pk.per_group) * pk.group_bytes;
      for (int byte = 0; byte < pk.group_bytes; ++byte) g[byte] = static_cast<uint8_t>(word >> (8 * byte));
      word = 0;
    }
  }
}

// A thread's V codes must be whole packing groups.
template <FloatType K>
int64_t quantizeVecLanes(const void* x, const MxLaunch& c, const MxPacking& pk) {
  return Vec<K>::kN % pk.per_group == 0 ? vecLanes<K>(c, {x}) : 0;
}

template <FloatType K, int R>
cudaError_t launchQuantizeVec(const void* x, uint8_t* codes, uint8_t* scales, const MxLaunch& c, const MxPacking& pk,
                              cudaStream_t stream) {
  constexpr int V = Vec<K>::kN;
  const int64_t nvec = c.outer * c.len / V;
  const dim3 grid(static_cast<unsigned>((nvec + kThreads - 1) / kThreads));
  const auto* xv = static_cast<const uint4*>(x);
  switch (quantizeVecLanes<K>(x, c, pk)) {
    case 1: quantizeVec<K, R, 1><<<grid, kThreads, 0, stream>>>(xv, codes, scales, c, pk, nvec); break;
    case 2: quantizeVec<K, R, 2><<<grid, kThreads, 0, stream>>>(xv, codes, scales, c, pk, nvec); break;
    case 4: quantizeVec<K, R, 4><<<grid, kThreads, 0, stream>>>(xv, codes, scales, c, pk, nvec); break;
    case 8: quantizeVec<K, R, 8><<<grid, kThreads, 0, stream>>>(xv, codes, scales, c, pk, nvec); break;
    case 16: quantizeVec<K, R, 16><<<grid, kThreads, 0, stream>>>(xv, codes, scales, c, pk, nvec); break;
    default: quantizeVec<K, R, 32><<<grid, kThreads, 0, stream>>>(xv, codes, scales, c, pk, nvec); break;
  }
  return cudaGetLastError();
}

template <FloatType K>
cudaError_t quantizePackedByRounding(const void* x, uint8_t* codes, uint8_t* scales, const MxLaunch& c,
                                     const MxPacking& pk, cudaStream_t stream) {
  switch (c.rounding) {
    case 1: return launchQuantizeVec<K, 1>(x, codes, scales, c, pk, stream);
    case 2: return launchQuantizeVec<K, 2>(x, codes, scales, c, pk, stream);
    case 3: return launchQuantizeVec<K, 3>(x, codes, scales, c, pk, stream);
    default: return launchQuantizeVec<K, 0>(x, codes, scales, c, pk, stream);
  }
}

template <FloatType K, int R>
cudaError_t launchQuantize(const void* x, void* codes, uint8_t* scales, const MxLaunch& c, cudaStream_t stream) {
  using T = typename IO<K>::T;
  const int64_t columns = c.outer * ((c.len + c.block - 1) / c.block) * c.inner;
  const dim3 grid(static_cast<unsigned>((columns + kThreads - 1) / kThreads));
  if (c.code_bits > 8) {
    quantizeColumns<K, R, uint16_t><<<grid, kThreads, 0, stream>>>(static_cast<const T*>(x),
                                                                    static_cast<uint16_t*>(codes), scales, c, columns);
  } else {
    quantizeColumns<K, R, uint8_t><<<grid, kThreads, 0, stream>>>(static_cast<const T*>(x),
                                                                   static_cast<uint8_t*>(codes), scales, c, columns);
  }
  return cudaGetLastError();
}

template <FloatType K>
cudaError_t quantizeByRounding(const void* x, void* codes, uint8_t* scales, const MxLaunch& c, cudaStream_t stream) {
  switch (c.rounding) {
    case 1: return launchQuantize<K, 1>(x, codes, scales, c, stream);
    case 2: return launchQuantize<K, 2>(x, codes, scales, c, stream);
    case 3: return launchQuantize<K, 3>(x, codes, scales, c, stream);
    default: return launchQuantize<K, 0>(x, codes, scales, c, stream);
  }
}

// Blocks along an earlier axis, codes packed along the last dimension (`last` elements, a multiple
// of G = p.per_group): one thread per G adjacent block columns, which fill whole packing groups
// in every row of the block; their maxima, scale bytes and codes come from G consecutive elements
// per row (reads coalesced across the warp), and each row's G codes leave as the group's bytes.
// The unfused path wrote one byte per code and packed them in a second kernel (6-13 % of the
// bandwidth).
template <FloatType K, int R, int G>
__global__ void quantizeColumnsPacked(const typename IO<K>::T* x, uint8_t* codes, uint8_t* scales, MxLaunch c,
                                      MxPacking pk, int64_t last, int64_t threads) {
  const int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (t >= threads) return;
  const int64_t ngroups = c.inner / G, nblocks = (c.len + c.block - 1) / c.block;
  const int64_t w0 = (t % ngroups) * G, r = t / ngroups, o = r / nblocks, j = r % nblocks;
  const int64_t l0 = j * c.block, l1 = min(c.len, l0 + c.block);
  const mxd::ElemParams p = elemParams(c);
  // The G maxima in one pass over the rows: G adjacent loads per row share their cache line (G
  // passes of columnMax measured 0.73x the unfused path for fp6 with fp32 x).
  float amax[G], inv[G];
  bool nan_seen[G];
#pragma unroll
  for (int g = 0; g < G; ++g) amax[g] = 0.0f, nan_seen[g] = false;
  for (int64_t l = l0; l < l1; ++l) {
    const typename IO<K>::T* row = x + (o * c.len + l) * c.inner + w0;
#pragma unroll
    for (int g = 0; g < G; ++g) {
      const float a = fabsf(IO<K>::load(row[g]));
      nan_seen[g] |= (a != a);
      amax[g] = a > amax[g] ? a : amax[g];
    }
  }
#pragma unroll
  for (int g = 0; g < G; ++g) {
    const BlockScale b = blockScale(amax[g], nan_seen[g], c, p);
    scales[(o * nblocks + j) * c.inner + w0 + g] = static_cast<uint8_t>(b.byte);
    inv[g] = b.kill != 0 ? 0.0f : b.inv;  // NaN and flushed blocks store the code of 0
  }
  const int64_t row_bytes = last / G * pk.group_bytes;
  for (int64_t l = l0; l < l1; ++l) {
    const int64_t i0 = (o * c.len + l) * c.inner + w0;
    uint32_t word = 0;
#pragma unroll
    for (int g = 0; g < G; ++g) {
      const uint32_t rnd = R == 3 ? mxd::elementRandom(c.random_key, static_cast<uint64_t>(i0 + g)) : 0u;
      const float v = inv[g] == 0.0f ? 0.0f : IO<K>::load(x[i0 + g]) * inv[g];
      word |= static_cast<uint32_t>(mxd::encodeElement(mxd::quantizeElement<R>(v, p, rnd), p, c.ebits, c.code_bits))
              << (g * pk.bits);
    }
    uint8_t* out = codes + (i0 / last) * row_bytes + (i0 % last) / G * pk.group_bytes;
    for (int b = 0; b < pk.group_bytes; ++b) out[b] = static_cast<uint8_t>(word >> (8 * b));
  }
}

template <FloatType K, int R>
cudaError_t launchQuantizeColumnsPacked(const void* x, uint8_t* codes, uint8_t* scales, const MxLaunch& c,
                                        const MxPacking& pk, int64_t last, cudaStream_t stream) {
  using T = typename IO<K>::T;
  const int64_t threads = c.outer * ((c.len + c.block - 1) / c.block) * (c.inner / pk.per_group);
  const dim3 grid(static_cast<unsigned>((threads + kThreads - 1) / kThreads));
  if (pk.per_group == 2) {
    quantizeColumnsPacked<K, R, 2><<<grid, kThreads, 0, stream>>>(static_cast<const T*>(x), codes, scales, c, pk, last,
                                                                  threads);
  } else {
    quantizeColumnsPacked<K, R, 4><<<grid, kThreads, 0, stream>>>(static_cast<const T*>(x), codes, scales, c, pk, last,
                                                                  threads);
  }
  return cudaGetLastError();
}

template <FloatType K>
cudaError_t quantizeColumnsPackedByRounding(const void* x, uint8_t* codes, uint8_t* scales, const MxLaunch& c,
                                            const MxPacking& pk, int64_t last, cudaStream_t stream) {
  switch (c.rounding) {
    case 1: return launchQuantizeColumnsPacked<K, 1>(x, codes, scales, c, pk, last, stream);
    case 2: return launchQuantizeColumnsPacked<K, 2>(x, codes, scales, c, pk, last, stream);
    case 3: return launchQuantizeColumnsPacked<K, 3>(x, codes, scales, c, pk, last, stream);
    default: return launchQuantizeColumnsPacked<K, 0>(x, codes, scales, c, pk, last, stream);
  }
}

// One thread per packed group.
__global__ void packCodes(const uint8_t* in, uint8_t* out, int64_t rows, int64_t len, MxPacking p) {
  const int64_t groups = (len + p.per_group - 1) / p.per_group;
  const int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (t >= rows * groups) return;
  const int64_t r = t / groups, g = t % groups;
  uint32_t word = 0;
  for (int i = 0; i < p.per_group; ++i) {
    const int64_t k = g * p.per_group + i;
    if (k < len) word |= static_cast<uint32_t>(in[r * len + k]) << (i * p.bits);
  }
  for (int byte = 0; byte < p.group_bytes; ++byte) {
    out[(r * groups + g) * p.group_bytes + byte] = static_cast<uint8_t>((word >> (8 * byte)) & 0xFFu);
  }
}

// ---- mx_dequantize ------------------------------------------------------------------------------

// The code table goes to shared memory: indexing the kernel parameter with a code would copy it
// to local memory in every thread.
__device__ __forceinline__ void loadTable(float* t, const MxCodeTable& table) {
  for (int i = threadIdx.x; i < 256; i += blockDim.x) t[i] = table.v[i];
  __syncthreads();
}

__device__ __forceinline__ float scaled(float v, uint32_t s) {
  // A NaN block writes the CPU's quiet NaN (a GPU product with NaN gives another bit pattern).
  return s == 255u ? quietNan() : v * mxd::scaleValue(s);
}

// One thread per element, any layout.
template <FloatType K>
__global__ void dequantizeElements(const uint8_t* codes, const uint8_t* scales, typename IO<K>::T* y, MxLaunch c,
                                   MxPacking p, int code_bytes, int64_t last, MxCodeTable table, int64_t numel) {
  __shared__ float t[256];
  loadTable(t, table);
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= numel) return;
  const int64_t nblocks = (c.len + c.block - 1) / c.block;
  const int64_t w = i % c.inner, l = (i / c.inner) % c.len, o = i / c.inner / c.len;
  const uint32_t s = scales[(o * nblocks + l / c.block) * c.inner + w];
  float v;
  if (p.per_group > 1) {
    const int64_t row = i / last, k = i % last, groups = (last + p.per_group - 1) / p.per_group;
    const uint8_t* g = codes + (row * groups + k / p.per_group) * p.group_bytes;
    uint32_t word = g[0];
    if (p.group_bytes == 3) word |= (static_cast<uint32_t>(g[1]) << 8) | (static_cast<uint32_t>(g[2]) << 16);
    v = t[(word >> ((k % p.per_group) * p.bits)) & ((1u << p.bits) - 1u)];
  } else if (code_bytes == 2) {
    int16_t q;
    memcpy(&q, codes + 2 * i, 2);
    v = static_cast<float>(q) * mxd::bitsToFloat(static_cast<uint32_t>(127 - c.m) << 23);
  } else {
    v = t[codes[i]];
  }
  y[i] = IO<K>::store(scaled(v, s));
}

// The scale byte of element e's block (blocks along the last axis, rows of len).
__device__ __forceinline__ uint32_t rowBlockScale(const uint8_t* scales, int64_t e, int64_t len, int64_t block) {
  return scales[(e / len) * ((len + block - 1) / block) + (e % len) / block];
}

// A thread's N outputs (a multiple of 16 bytes, 16-byte aligned at dst) as 16-byte stores.
template <typename T, int N>
__device__ __forceinline__ void storeVectors(const T (&out)[N], T* dst) {
  uint4 v[sizeof(out) / 16];
  memcpy(v, out, sizeof(out));
#pragma unroll
  for (int i = 0; i < static_cast<int>(sizeof(out) / 16); ++i) reinterpret_cast<uint4*>(dst)[i] = v[i];
}

// Blocks along the last axis, rows and blocks multiples of 8: 8 elements per thread, which share
// one scale byte; their codes are one 8-byte load (byte codes) or 4-byte load (nibbles), their
// outputs 16 or 32 bytes.
template <FloatType K, bool NIBBLES>
__global__ void dequantizeRows8(const uint8_t* codes, const uint8_t* scales, typename IO<K>::T* y, int64_t len,
                                int64_t block, MxCodeTable table, int64_t n8) {
  using T = typename IO<K>::T;
  __shared__ float t[256];
  loadTable(t, table);
  const int64_t g = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (g >= n8) return;
  const int64_t e = g * 8;
  const uint32_t s = rowBlockScale(scales, e, len, block);
  uint32_t c[8];
  if constexpr (NIBBLES) {
    const uint32_t w = reinterpret_cast<const uint32_t*>(codes)[g];
#pragma unroll
    for (int i = 0; i < 8; ++i) c[i] = (w >> (4 * i)) & 0xFu;  // low nibble first
  } else {
    const uint2 w = reinterpret_cast<const uint2*>(codes)[g];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      c[i] = (w.x >> (8 * i)) & 0xFFu;
      c[4 + i] = (w.y >> (8 * i)) & 0xFFu;
    }
  }
  T out[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) out[i] = IO<K>::store(scaled(t[c[i]], s));
  storeVectors(out, y + e);
}

// Six-bit codes (fp6, four per three bytes) along the last axis, rows and blocks multiples of 16:
// 16 elements per thread, which share one scale byte; their 12 code bytes are three 4-byte loads,
// a little-endian run of 96 bits with code j at bits 6j (group j / 4, code j % 4 of its 24 bits).
// One thread per element read its group's 3 bytes per element (7-13 % of the bandwidth).
template <FloatType K>
__global__ void dequantizeRows16Six(const uint8_t* codes, const uint8_t* scales, typename IO<K>::T* y, int64_t len,
                                    int64_t block, MxCodeTable table, int64_t n16) {
  using T = typename IO<K>::T;
  __shared__ float t[256];
  loadTable(t, table);
  const int64_t g = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (g >= n16) return;
  const int64_t e = g * 16;
  const uint32_t s = rowBlockScale(scales, e, len, block);
  const uint32_t* p = reinterpret_cast<const uint32_t*>(codes) + 3 * g;
  const uint32_t w[4] = {__ldg(p), __ldg(p + 1), __ldg(p + 2), 0u};
  T out[16];
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    const int word = 6 * j / 32, off = 6 * j % 32;
    out[j] = IO<K>::store(scaled(t[__funnelshift_r(w[word], w[word + 1], off) & 63u], s));
  }
  storeVectors(out, y + e);
}

template <FloatType K>
cudaError_t launchDequantize(const void* codes, const uint8_t* scales, void* y, const MxLaunch& c, const MxPacking& p,
                             int code_bytes, int64_t last, const MxCodeTable& table, cudaStream_t stream) {
  using T = typename IO<K>::T;
  const int64_t numel = c.outer * c.len * c.inner;
  const bool nibbles = p.per_group == 2 && p.bits == 4;
  const bool bytes = p.per_group == 1 && code_bytes == 1;
  const bool aligned = reinterpret_cast<uintptr_t>(codes) % 8 == 0 && reinterpret_cast<uintptr_t>(y) % 16 == 0;
  if (c.inner == 1 && (nibbles || bytes) && aligned && c.len % 8 == 0 && c.block % 8 == 0) {
    const int64_t n8 = numel / 8;
    const dim3 grid(static_cast<unsigned>((n8 + kThreads - 1) / kThreads));
    const auto* cp = static_cast<const uint8_t*>(codes);
    if (nibbles) {
      dequantizeRows8<K, true><<<grid, kThreads, 0, stream>>>(cp, scales, static_cast<T*>(y), c.len, c.block, table, n8);
    } else {
      dequantizeRows8<K, false><<<grid, kThreads, 0, stream>>>(cp, scales, static_cast<T*>(y), c.len, c.block, table, n8);
    }
    return cudaGetLastError();
  }
  const bool six = p.per_group == 4 && p.bits == 6 && p.group_bytes == 3;
  if (c.inner == 1 && six && reinterpret_cast<uintptr_t>(codes) % 4 == 0 && reinterpret_cast<uintptr_t>(y) % 16 == 0 &&
      c.len % 16 == 0 && c.block % 16 == 0) {
    const int64_t n16 = numel / 16;
    dequantizeRows16Six<K><<<static_cast<unsigned>((n16 + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
        static_cast<const uint8_t*>(codes), scales, static_cast<T*>(y), c.len, c.block, table, n16);
    return cudaGetLastError();
  }
  const dim3 grid(static_cast<unsigned>((numel + kThreads - 1) / kThreads));
  dequantizeElements<K><<<grid, kThreads, 0, stream>>>(static_cast<const uint8_t*>(codes), scales, static_cast<T*>(y),
                                                       c, p, code_bytes, last, table, numel);
  return cudaGetLastError();
}

}  // namespace

cudaError_t mxFakeQuantize(const void* x, void* y, FloatType t, const MxLaunch& c, cudaStream_t stream) {
  if (c.outer * c.len * c.inner == 0) return cudaSuccess;
  switch (t) {
    case FloatType::kF32: return fakeByRounding<FloatType::kF32>(x, y, c, stream);
    case FloatType::kBF16: return fakeByRounding<FloatType::kBF16>(x, y, c, stream);
    default: return fakeByRounding<FloatType::kF16>(x, y, c, stream);
  }
}

cudaError_t mxQuantize(const void* x, FloatType t, void* codes, uint8_t* scales, const MxLaunch& c,
                       cudaStream_t stream) {
  if (c.outer * c.len * c.inner == 0) return cudaSuccess;
  switch (t) {
    case FloatType::kF32: return quantizeByRounding<FloatType::kF32>(x, codes, scales, c, stream);
    case FloatType::kBF16: return quantizeByRounding<FloatType::kBF16>(x, codes, scales, c, stream);
    default: return quantizeByRounding<FloatType::kF16>(x, codes, scales, c, stream);
  }
}

bool mxQuantizePackedApplies(const void* x, FloatType t, const MxLaunch& c, const MxPacking& p) {
  switch (t) {
    case FloatType::kF32: return quantizeVecLanes<FloatType::kF32>(x, c, p) > 0;
    default: return quantizeVecLanes<FloatType::kBF16>(x, c, p) > 0;  // fp16: the same vector width
  }
}

cudaError_t mxQuantizePacked(const void* x, FloatType t, uint8_t* codes, uint8_t* scales, const MxLaunch& c,
                             const MxPacking& p, cudaStream_t stream) {
  if (c.outer * c.len * c.inner == 0) return cudaSuccess;
  switch (t) {
    case FloatType::kF32: return quantizePackedByRounding<FloatType::kF32>(x, codes, scales, c, p, stream);
    case FloatType::kBF16: return quantizePackedByRounding<FloatType::kBF16>(x, codes, scales, c, p, stream);
    default: return quantizePackedByRounding<FloatType::kF16>(x, codes, scales, c, p, stream);
  }
}

bool mxQuantizeColumnsPackedApplies(const MxLaunch& c, const MxPacking& p, int64_t last) {
  return c.inner > 1 && (p.per_group == 2 || p.per_group == 4) && c.code_bits <= 8 && last > 0 &&
         last % p.per_group == 0 && c.inner % last == 0;
}

cudaError_t mxQuantizeColumnsPacked(const void* x, FloatType t, uint8_t* codes, uint8_t* scales, const MxLaunch& c,
                                    const MxPacking& p, int64_t last, cudaStream_t stream) {
  if (c.outer * c.len * c.inner == 0) return cudaSuccess;
  switch (t) {
    case FloatType::kF32: return quantizeColumnsPackedByRounding<FloatType::kF32>(x, codes, scales, c, p, last, stream);
    case FloatType::kBF16:
      return quantizeColumnsPackedByRounding<FloatType::kBF16>(x, codes, scales, c, p, last, stream);
    default: return quantizeColumnsPackedByRounding<FloatType::kF16>(x, codes, scales, c, p, last, stream);
  }
}

cudaError_t mxPackCodes(const uint8_t* in, uint8_t* out, int64_t rows, int64_t len, const MxPacking& p,
                        cudaStream_t stream) {
  const int64_t n = rows * ((len + p.per_group - 1) / p.per_group);
  if (n == 0) return cudaSuccess;
  packCodes<<<static_cast<unsigned>((n + kThreads - 1) / kThreads), kThreads, 0, stream>>>(in, out, rows, len, p);
  return cudaGetLastError();
}

cudaError_t mxDequantize(const void* codes, const uint8_t* scales, void* y, FloatType t, const MxLaunch& c,
                         const MxPacking& p, int code_bytes, int64_t last, const MxCodeTable& table,
                         cudaStream_t stream) {
  if (c.outer * c.len * c.inner == 0) return cudaSuccess;
  switch (t) {
    case FloatType::kF32: return launchDequantize<FloatType::kF32>(codes, scales, y, c, p, code_bytes, last, table, stream);
    case FloatType::kBF16:
      return launchDequantize<FloatType::kBF16>(codes, scales, y, c, p, code_bytes, last, table, stream);
    default: return launchDequantize<FloatType::kF16>(codes, scales, y, c, p, code_bytes, last, table, stream);
  }
}

}  // namespace pt2q::cuda
