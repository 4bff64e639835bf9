// choose_qparams_affine's kernels (choose_qparams_cuda_kernels.h). Min / max: a block's piece is
// read by a group of G lanes of one warp (G a power of two up to 32, smaller for short blocks so
// that a warp serves several blocks), V elements per lane per step: V = 8 (16- or 32-byte loads)
// when blocks and the base are so aligned, else 1. NaN wins both reductions, so that the
// finiteness check sees it.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "kernels/cuda/choose_qparams_cuda_kernels.h"

namespace pt2q::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kPiece = 16384;  // elements per piece of a long block

__device__ __forceinline__ float minNaN(float m, float v) { return (v < m || v != v) ? v : m; }
__device__ __forceinline__ float maxNaN(float m, float v) { return (v > m || v != v) ? v : m; }

template <FloatType T, int V>
__device__ __forceinline__ void loadVec(const void* x, int64_t i, float (&v)[V]) {
  if constexpr (V == 1) {
    if constexpr (T == FloatType::kF32) {
      v[0] = __ldg(static_cast<const float*>(x) + i);
    } else if constexpr (T == FloatType::kBF16) {
      v[0] = __bfloat162float(static_cast<const __nv_bfloat16*>(x)[i]);
    } else {
      v[0] = __half2float(static_cast<const __half*>(x)[i]);
    }
  } else if constexpr (T == FloatType::kF32) {
    const float4* p = reinterpret_cast<const float4*>(static_cast<const float*>(x) + i);
    const float4 a = __ldg(p), b = __ldg(p + 1);
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
  } else {
    const uint4 w = __ldg(reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(x) + i));
    const uint32_t words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if constexpr (T == FloatType::kBF16) {
        v[2 * j] = __uint_as_float(words[j] << 16);
        v[2 * j + 1] = __uint_as_float(words[j] & 0xFFFF0000u);
      } else {
        const __half2 h = *reinterpret_cast<const __half2*>(&words[j]);
        const float2 f = __half22float2(h);
        v[2 * j] = f.x, v[2 * j + 1] = f.y;
      }
    }
  }
}

template <FloatType T, int V>
__global__ void __launch_bounds__(kThreads) runMinMaxKernel(RunMinMax a, int g, int64_t piece) {
  const int lane = threadIdx.x % 32, sub = lane % g;
  const int64_t per_warp = 32 / g, items = a.runs * a.splits;
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x) / 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (kThreads / 32);
  // The loop bound is the warp's, so every lane reaches the shuffles.
  for (int64_t base = warp * per_warp; base < items; base += warps * per_warp) {
    const int64_t item = base + lane / g;
    float lo = __int_as_float(0x7F800000), hi = -lo;
    if (item < items) {
      const int64_t run = item / a.splits, s = item % a.splits;
      const int64_t start = run * a.len + s * piece, end = min(run * a.len + a.len, start + piece);
      // unrolled so that each lane has several loads in flight
#pragma unroll 4
      for (int64_t i = start + static_cast<int64_t>(sub) * V; i < end; i += static_cast<int64_t>(g) * V) {
        float v[V];
        loadVec<T, V>(a.x, i, v);
#pragma unroll
        for (int j = 0; j < V; ++j) lo = minNaN(lo, v[j]), hi = maxNaN(hi, v[j]);
      }
    }
    for (int off = g / 2; off > 0; off /= 2) {
      lo = minNaN(lo, __shfl_xor_sync(0xFFFFFFFFu, lo, off));
      hi = maxNaN(hi, __shfl_xor_sync(0xFFFFFFFFu, hi, off));
    }
    if (item < items && sub == 0) a.mn[item] = lo, a.mx[item] = hi;
  }
}

template <FloatType T>
cudaError_t launch(const RunMinMax& a, cudaStream_t stream) {
  const int64_t piece0 = (a.len + a.splits - 1) / a.splits;
  // V = 8 needs every piece to start on a whole vector: blocks, pieces and the base aligned.
  const bool vec = a.len % 8 == 0 && reinterpret_cast<uintptr_t>(a.x) % 16 == 0;
  const int v = vec ? 8 : 1;
  const int64_t piece = (piece0 + v - 1) / v * v;
  int g = 32;
  while (g > 1 && piece < int64_t(g) * v) g /= 2;
  const int64_t items = a.runs * a.splits, warps = (items * g + 31) / 32;
  const int64_t blocks = std::min<int64_t>((warps + kThreads / 32 - 1) / (kThreads / 32), 132 * 64);
  if (vec) {
    runMinMaxKernel<T, 8><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(a, g, piece);
  } else {
    runMinMaxKernel<T, 1><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(a, g, piece);
  }
  return cudaGetLastError();
}

// Each block's pieces folded (one thread per block; a warp per block when blocks come in pieces),
// then qparamsFromMinMax's steps in its order (built with --fmad=false, so no product is fused into
// a sum).
template <bool PIECES>
__global__ void qparamsKernel(QParamsFromPieces a) {
  const int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t r = PIECES ? t / 32 : t;
  if (r >= a.runs) return;  // whole warps when PIECES (blockDim a multiple of 32)
  float lo = __int_as_float(0x7F800000), hi = -lo;
  for (int64_t s = PIECES ? t % 32 : 0; s < a.splits; s += PIECES ? 32 : 1) {
    lo = minNaN(lo, a.mn[r * a.splits + s]), hi = maxNaN(hi, a.mx[r * a.splits + s]);
  }
  if constexpr (PIECES) {
    for (int off = 16; off > 0; off /= 2) {
      lo = minNaN(lo, __shfl_xor_sync(0xFFFFFFFFu, lo, off));
      hi = maxNaN(hi, __shfl_xor_sync(0xFFFFFFFFu, hi, off));
    }
    if (t % 32 != 0) return;
  }
  if (!isfinite(lo) || !isfinite(hi)) atomicMin(a.first_bad, static_cast<unsigned long long>(r));
  if (a.domain == Domain::kFloat) {
    const float scale = fmaxf(__fdiv_rn(__fsub_rn(hi, lo), a.range), a.eps);
    a.scale[r] = scale;
    a.zp_float[r] = __fadd_rn(lo, __fmul_rn(scale, a.mid));
    return;
  }
  const float min_neg = fminf(lo, 0.0f), max_pos = fmaxf(hi, 0.0f);
  if (a.mapping == Mapping::kAsymmetric) {
    const float scale = fmaxf(__fdiv_rn(__fsub_rn(max_pos, min_neg), a.range), a.eps);
    const int32_t z = a.qmin - static_cast<int32_t>(rintf(__fdiv_rn(min_neg, scale)));
    a.scale[r] = scale;
    a.zp_int[r] = a.domain == Domain::kNone ? 0 : min(max(z, a.qmin), a.qmax);
    return;
  }
  float scale;
  if (a.mapping == Mapping::kSymmetric) {
    scale = fmaxf(__fdiv_rn(fmaxf(-min_neg, max_pos), a.half_range), a.eps);
  } else {
    const float smin = __fdiv_rn(min_neg, a.qmin_f), smax = __fdiv_rn(max_pos, a.qmax_f);
    scale = fmaxf(smin > smax ? smin : smax, a.eps);
  }
  a.scale[r] = scale;
  a.zp_int[r] = a.zp_value;
}

}  // namespace

cudaError_t qparamsFromPieces(const QParamsFromPieces& a, cudaStream_t stream) {
  if (a.runs == 0) return cudaSuccess;
  constexpr int kQThreads = 128;
  if (a.splits > 1) {
    qparamsKernel<true><<<static_cast<unsigned>((32 * a.runs + kQThreads - 1) / kQThreads), kQThreads, 0, stream>>>(a);
  } else {
    qparamsKernel<false><<<static_cast<unsigned>((a.runs + kQThreads - 1) / kQThreads), kQThreads, 0, stream>>>(a);
  }
  return cudaGetLastError();
}

int64_t runMinMaxSplits(int64_t len) { return (len + kPiece - 1) / kPiece; }

cudaError_t runMinMax(const RunMinMax& a, cudaStream_t stream) {
  if (a.runs == 0 || a.len == 0) return cudaSuccess;
  switch (a.xt) {
    case FloatType::kF32: return launch<FloatType::kF32>(a, stream);
    case FloatType::kBF16: return launch<FloatType::kBF16>(a, stream);
    default: return launch<FloatType::kF16>(a, stream);
  }
}

}  // namespace pt2q::cuda
