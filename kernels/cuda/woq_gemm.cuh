// What the GEMMs of linear_w8a16 / linear_w4a16 that dequantize in registers share
// (linear_woq_gemm_kernels.cu on mma.sync, linear_woq_wgmma_kernels.cu on wgmma): a packed code as
// an exact float, its dequantized value as dequantWeight computes it, pairs rounded to x's dtype,
// the end of a cluster's split of K, and the host's launch of both.
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/affine_cuda_kernels.h"
#include "kernels/cuda/linear_woq_cuda_kernels.h"

namespace pt2q::cuda::woq {

// The code of value b of word w (run r: int4's low or high nibbles) as an exact float: its bits
// under the exponent of 2^23, less that offset.
template <int BITS>
__device__ __forceinline__ float codeOf(uint32_t w, int b, int r) {
  if constexpr (BITS == 8) {
    const uint32_t u = __byte_perm(w ^ 0x80808080u, 0x4B000000u, static_cast<uint32_t>(b) | 0x7540u);
    return __uint_as_float(u) - 8388736.0f;  // 2^23 + 128
  } else {
    return __uint_as_float(((w >> (8 * b + 4 * r)) & 0xFu) | 0x4B000000u) - 8388616.0f;  // 2^23 + 8
  }
}

// (code - zero point) * scale in fp32, as dequantWeight computes it (no fused multiply-add).
template <bool ZP>
__device__ __forceinline__ float dequant(float code, float s, float z) {
  return ZP ? (code - z) * s : code * s;
}

// A group's scale s and zero point z in the form of the fast int4 decode, which gives the same fp32
// value as codeOf + dequant in three instructions instead of five or six. A stored nibble u (the
// code + 8) set into the mantissa of 2^E reads 2^E + u, for E = 23 at bits 0-3 and E = 19 at bits
// 4-7 (a mantissa four bits lower). Adding off = -(8 + z) leaves 2^E + (code - z) exactly, and
// fma(v, s, -2^E s) = (code - z) s + 0, rounded once: the product dequantWeight rounds, for any
// finite s, subnormal included, as long as 2^23 s is finite (2^E s is then exact).
//
// `fast` says that holds (|s| <= 2^100, |z| <= 2^16; NaN fails). A zero scale passes: the fast
// decode gives it +0 where dequantWeight may give -0, which no sum started at +0 can tell apart.
// Otherwise the caller decodes as codeOf + dequant (as it does int8 codes: s is still the scale).
template <int BITS>
struct GroupScale {
  float s, k23, k19, off;
  bool fast;
};

template <int BITS>
__device__ __forceinline__ GroupScale<BITS> groupScale(float s, float z) {
  return {s, -8388608.0f * s, -524288.0f * s, -8.0f - z, BITS == 4 && fabsf(s) <= 0x1p100f && fabsf(z) <= 65536.0f};
}

// (w & mask) | e in one instruction (the compiler splits it in two with both as immediates).
__device__ __forceinline__ uint32_t intoMantissa(uint32_t w, uint32_t mask, uint32_t e) {
  uint32_t r;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(r) : "r"(w), "r"(mask), "r"(e));
  return r;
}

// The int4 code in bits P..P + 3 of w (P = 0 or 4) as s (code - z) in fp32.
template <int P, int BITS>
__device__ __forceinline__ float nibbleFast(uint32_t w, const GroupScale<BITS>& g) {
  const float v = __uint_as_float(intoMantissa(w, 0xFu << P, P == 0 ? 0x4B000000u : 0x49000000u)) + g.off;
  return __fmaf_rn(v, g.s, P == 0 ? g.k23 : g.k19);
}

// Two floats rounded to nearest even in x's dtype, the first in the low half.
template <FloatType T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (T == FloatType::kBF16) {
    const __nv_bfloat162 r = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&r);
  } else {
    const __half2 r = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&r);
  }
}

template <FloatType T>
using Elem = std::conditional_t<T == FloatType::kBF16, __nv_bfloat16, __half>;

// The end of a split of K over a thread-block cluster: each block has left its fp32 sums in its
// shared memory (part[row of x][weight row], STRIDE floats per row of x, 128 weight rows from
// row0), and the cluster has synchronized. Block z adds, for its share of the TOKENS rows of x,
// the splits in split order (deterministic), reading the other blocks' shared memory directly,
// adds the bias and stores 4 outputs per lane. `warps` warps (from warp 0) take part. A: the
// GEMM's arguments (WoqGemv, LinearMxGemv): bias, m, n and y are read.
template <FloatType T, int TOKENS, int STRIDE, typename A>
__device__ __forceinline__ void finishRows(cooperative_groups::cluster_group& cluster, float* part, const A& a,
                                           int64_t m0, int64_t row0, int warp, int warps, int lane) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const int splits = static_cast<int>(cluster.num_blocks()), z = static_cast<int>(cluster.block_rank());
  const int share = (TOKENS + splits - 1) / splits;
  const int64_t r0 = row0 + lane * 4;  // the lane's 4 weight rows
  float bias[4];
#pragma unroll
  for (int e = 0; e < 4; ++e) bias[e] = a.bias != nullptr && r0 + e < a.n ? a.bias[r0 + e] : 0.0f;
  for (int tk = z * share + warp; tk < min(TOKENS, (z + 1) * share) && m0 + tk < a.m; tk += warps) {
    float4 sum = *reinterpret_cast<const float4*>(cluster.map_shared_rank(part, 0) + tk * STRIDE + lane * 4);
    for (int q = 1; q < splits; ++q) {
      const float4 v = *reinterpret_cast<const float4*>(cluster.map_shared_rank(part, q) + tk * STRIDE + lane * 4);
      sum.x += v.x, sum.y += v.y, sum.z += v.z, sum.w += v.w;
    }
    const float y[4] = {sum.x + bias[0], sum.y + bias[1], sum.z + bias[2], sum.w + bias[3]};
    Elem<T>* out = static_cast<Elem<T>*>(a.y) + (m0 + tk) * a.n + r0;
    if (a.n % 4 == 0 && r0 + 3 < a.n) {
      *reinterpret_cast<uint2*>(out) = make_uint2(pack2<T>(y[0], y[1]), pack2<T>(y[2], y[3]));
    } else {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        if (r0 + e < a.n) out[e] = static_cast<Elem<T>>(y[e]);
      }
    }
  }
#endif
}

// Calls launch(T, GROUPED, ZP) with the three as std::integral_constant values for `a`'s x dtype
// (bf16 or fp16), scale layout and zero points: the host side of both GEMMs' instantiations.
template <typename Launch>
cudaError_t byLayout(const WoqGemv& a, Launch launch) {
  using B16 = std::integral_constant<FloatType, FloatType::kBF16>;
  using F16 = std::integral_constant<FloatType, FloatType::kF16>;
  auto scales = [&](auto t) {
    const bool zp = a.zero_points != nullptr;
    if (a.groups == 1) {
      return zp ? launch(t, std::false_type{}, std::true_type{}) : launch(t, std::false_type{}, std::false_type{});
    }
    return zp ? launch(t, std::true_type{}, std::true_type{}) : launch(t, std::true_type{}, std::false_type{});
  };
  return a.xt == FloatType::kBF16 ? scales(B16{}) : scales(F16{});
}

// Blocks of K per cluster for a wgmma GEMM of `stages` stages of K over `tiles` output tiles, two
// blocks per multiprocessor. Swept on the H100 at 128 rows of x (splits 1, 2, 4, 8; W4A16 g128 and
// W8A16, the four benchmark shapes): the best kept 16 stages of K or more a split and at most about
// 1.5 waves of blocks: 4 for 32 tiles at K = 4096 and for 86 tiles, 8 for 32 tiles at K = 11008, 2
// for 112 tiles (4 was 12 % slower there).
inline int clusterSplits(int64_t stages, int64_t tiles, int sm_count, int max_splits) {
  int splits = 1;
  while (splits < max_splits && stages >= 32 * splits && tiles * splits * 2 <= 3 * int64_t(sm_count)) splits *= 2;
  return splits;
}

// Launches `kernel` over grid (x, y, splits) of `threads`-thread blocks with `smem` bytes of dynamic
// shared memory, the splits of each (x, y) one thread-block cluster.
template <typename... Params, typename... Args>
cudaError_t launchSplits(void (*kernel)(Params...), unsigned x, unsigned y, int splits, int threads, int smem,
                         cudaStream_t stream, Args&&... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(x, y, static_cast<unsigned>(splits));
  cfg.blockDim = dim3(static_cast<unsigned>(threads));
  cfg.dynamicSmemBytes = static_cast<size_t>(smem);
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = 1;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = static_cast<unsigned>(splits);
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

}  // namespace pt2q::cuda::woq
