// linear_w8a8 / linear_w4a8 for few rows of x (linear_dynamic_cuda_kernels.h).
//
// quantizeTokens: one block per row; the qparams in fp32 and the codes in fp64 op for op as the
// reference writes them (built with --fmad=false, so no product is fused into an add).
//
// dynMma: the tile scheme of linear_woq_mma_kernels.cu with int8 operands: a warp's 16 output
// rows are the A operand of mma.m16n8k32.s8, the quantized x rows (at most 16) the B operand, k
// renamed so that each lane's contiguous bytes of a row are its k positions. int8 codes go to the
// mma as they are stored; int4 codes (stored v + 8) become signed bytes by a flip and a sign
// spread. The int32 sums are exact; x's zero point comes out through the row sums of the weight
// (sum (q - zx) w = sum q w - zx sum w, sums by dp4a), the weight's through the column sums of q.
// linear_q8 (Q8) is the per-channel int8 case with x's codes given: its sums stay int32 through
// the split-K reduction, so the requantization sees the exact sum.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cfloat>
#include <type_traits>

#include "kernels/cuda/dyn_mma.cuh"
#include "kernels/cuda/linear_dynamic_cuda_kernels.h"
#include "kernels/cuda/mma_tiles.cuh"

namespace pt2q::cuda {
namespace {

using mma::kChunkBytes;
using mma::kThreads;
using mma::kUnroll;
using mma::kWarps;
using mma::loadWords;
using namespace dyn;

template <FloatType T>
__device__ __forceinline__ float loadFloat(const void* p, int64_t i) {
  if constexpr (T == FloatType::kF32) {
    return static_cast<const float*>(p)[i];
  } else if constexpr (T == FloatType::kBF16) {
    return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
  } else {
    return __half2float(static_cast<const __half*>(p)[i]);
  }
}

// choose_qparams_per_token_asymmetric from a row's min(amin, 0) and max(amax, 0), in fp32 as torch
// evaluates it; a row with NaN or Inf gets a NaN scale. Also hands the block the zero point and
// the fp64 reciprocal its codes use.
__device__ __forceinline__ void tokenQParams(float lo, float hi, int bad, int64_t row, const TokenCodes& out, int& zp_s,
                                             double& inv_s) {
  if (bad) {
    out.scales[row] = __int_as_float(0x7FC00000);
    out.zero_points[row] = 0;
    return;
  }
  const float scale = fmaxf((hi - lo) / 255.0f, FLT_EPSILON);
  const float dmin = lo / scale, dmax = hi / scale;
  float zp = (dmin + -128.0f) + (dmax + 127.0f) > 0.0f ? -128.0f - dmin : 127.0f - dmax;
  zp = rintf(fminf(fmaxf(zp, -128.0f), 127.0f));
  out.scales[row] = scale;
  out.zero_points[row] = static_cast<int>(zp);
  zp_s = static_cast<int>(zp);
  inv_s = 1.0 / static_cast<double>(scale);
}

// quantize_per_token's code, in fp64 op for op as the reference.
__device__ __forceinline__ int8_t tokenCode(float x, double inv, double z, bool skip) {
  if (skip) return 0;
  const double v = rint(static_cast<double>(x) * inv + z);
  return static_cast<int8_t>(fmin(fmax(v, -128.0), 127.0));
}

// A row's min(amin, 0), max(amax, 0) and non-finite flag reduced over the block's WARPS warps,
// then its qparams (written by thread 0); every thread gets whether to skip the row (NaN or Inf)
// and the fp64 reciprocal and zero point its codes use.
template <int WARPS>
__device__ __forceinline__ void blockRowQParams(float lo, float hi, int bad, int64_t row, const TokenCodes& out,
                                                bool& skip, double& inv, double& z) {
  __shared__ float lo_s[WARPS], hi_s[WARPS];
  __shared__ int bad_s[WARPS];
  __shared__ double inv_s;
  __shared__ int zp_s, bad_row;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
  for (int off = 16; off > 0; off /= 2) {
    lo = fminf(lo, __shfl_xor_sync(0xFFFFFFFFu, lo, off));
    hi = fmaxf(hi, __shfl_xor_sync(0xFFFFFFFFu, hi, off));
    bad |= __shfl_xor_sync(0xFFFFFFFFu, bad, off);
  }
  if (lane == 0) lo_s[warp] = lo, hi_s[warp] = hi, bad_s[warp] = bad;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < WARPS; ++w) lo = fminf(lo, lo_s[w]), hi = fmaxf(hi, hi_s[w]), bad |= bad_s[w];
    bad_row = bad;
    tokenQParams(lo, hi, bad, row, out, zp_s, inv_s);
  }
  __syncthreads();
  skip = bad_row != 0;
  inv = skip ? 0.0 : inv_s;
  z = skip ? 0.0 : static_cast<double>(zp_s);
}

// One block per row, as wide as a block goes: at decode there are few rows, and each thread's
// loads (two passes over the row) are the kernel's latency.
constexpr int kQuantThreads = 1024;

template <FloatType T>
__global__ void __launch_bounds__(kQuantThreads) quantizeTokens(const void* x, int64_t k, TokenCodes out) {
  const int64_t row = blockIdx.x;
  // min(amin(x), 0) and max(amax(x), 0): starting both at 0 is the same.
  float lo = 0.0f, hi = 0.0f;
  int bad = 0;
#pragma unroll 4
  for (int64_t i = threadIdx.x; i < k; i += blockDim.x) {
    const float v = loadFloat<T>(x, row * k + i);
    bad |= !isfinite(v);
    lo = fminf(lo, v);
    hi = fmaxf(hi, v);
  }
  bool skip;
  double inv, z;
  blockRowQParams<kQuantThreads / 32>(lo, hi, bad, row, out, skip, inv, z);
#pragma unroll 4
  for (int64_t i = threadIdx.x; i < k; i += blockDim.x) {
    out.codes[row * k + i] = tokenCode(loadFloat<T>(x, row * k + i), inv, z, skip);
  }
}

// The same for rows that split into 16-byte-aligned runs of 8 values (k a multiple of 8, x
// aligned), the common case: a block of 256 threads per row, 8 values per load and 8 codes per
// store. At 2048 rows of 4096 the one-value-per-load kernel took 58 us on the H100 (latency:
// 23 cycles per issued instruction), 3x what the bytes need.
constexpr int kVecThreads = 256;

template <FloatType T>
__device__ __forceinline__ void load8(const void* x, int64_t i, float (&v)[8]) {
  if constexpr (T == FloatType::kF32) {
    const float4* p = static_cast<const float4*>(x) + 2 * i;
    const float4 a = p[0], b = p[1];
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
  } else {
    const uint4 u = static_cast<const uint4*>(x)[i];
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if constexpr (T == FloatType::kBF16) {
        v[2 * j] = __uint_as_float(w[j] << 16), v[2 * j + 1] = __uint_as_float(w[j] & 0xFFFF0000u);
      } else {
        const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&w[j]));
        v[2 * j] = f.x, v[2 * j + 1] = f.y;
      }
    }
  }
}

template <FloatType T>
__global__ void __launch_bounds__(kVecThreads) quantizeTokensVec(const void* x, int64_t k, TokenCodes out) {
  const int64_t row = blockIdx.x, v8 = k / 8;
  float lo = 0.0f, hi = 0.0f;
  int bad = 0;
#pragma unroll 4
  for (int64_t i = threadIdx.x; i < v8; i += kVecThreads) {
    float v[8];
    load8<T>(x, row * v8 + i, v);
#pragma unroll
    for (int j = 0; j < 8; ++j) bad |= !isfinite(v[j]), lo = fminf(lo, v[j]), hi = fmaxf(hi, v[j]);
  }
  bool skip;
  double inv, z;
  blockRowQParams<kVecThreads / 32>(lo, hi, bad, row, out, skip, inv, z);
#pragma unroll 4
  for (int64_t i = threadIdx.x; i < v8; i += kVecThreads) {
    float v[8];
    load8<T>(x, row * v8 + i, v);
    uint32_t w[2] = {0, 0};
#pragma unroll
    for (int j = 0; j < 8; ++j) w[j / 4] |= static_cast<uint32_t>(static_cast<uint8_t>(tokenCode(v[j], inv, z, skip)))
                                            << (8 * (j % 4));
    reinterpret_cast<uint2*>(out.codes)[row * v8 + i] = make_uint2(w[0], w[1]);
  }
}

// W: bytes per lane per row per span (a span is 4W bytes of a row, inside one group). NT: 8-row
// tiles of x. GROUPED: scales per group, applied per span; else per channel, at the end. ZP: the
// weight has zero points. Q8: linear_q8 (per channel, no ZP): int sums out, requantized.
template <int BITS, int W, int NT, bool GROUPED, bool ZP, bool Q8 = false>
__global__ void __launch_bounds__(kThreads, 2) dynMma(DynGemv a, int splits, int64_t chunks, int64_t spans) {
  static_assert(!Q8 || (BITS == 8 && !GROUPED && !ZP), "linear_q8: int8 per channel, symmetric");
  using Acc = std::conditional_t<Q8, int, float>;
  constexpr int WORDS = W / 4;
  constexpr int CHUNKS = W / 4;
  constexpr int RUNS = BITS == 8 ? 1 : 2;
  constexpr int KPC = BITS == 8 ? 16 : 32;
  constexpr int SPAN_K = CHUNKS * KPC;
  static_assert(BITS == 4 || WORDS % 2 == 0, "an int8 mma takes two words of a row per lane");
  __shared__ Acc part[kWarps][16][NT * 8];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane >> 2, t = lane & 3;
  const int64_t tiles = (a.n + 15) / 16;
  const int64_t tile = static_cast<int64_t>(blockIdx.x) * (kWarps / splits) + warp / splits;
  const int sp = warp % splits;
  const int64_t row[2] = {tile * 16 + g, tile * 16 + g + 8};
  // blockIdx.y: which 16 rows of x (more than 16 rows re-read the weight tile, mostly from L2)
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * 16, m = min(a.m - m0, int64_t(16));
  const int8_t* codes = a.x.codes + m0 * a.k;
  // x's zero points of the C fragment's columns (tokens 8 nt + 2t, + 1); 0 past m
  int zx[NT][2];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int64_t tok = 8 * nt + 2 * t + j;
      zx[nt][j] = tok >= m ? 0 : Q8 ? a.q8.zx : a.x.zero_points[m0 + tok];
    }
  }
  Acc acc[NT][4];
  int dsum[NT][4];      // per channel: the int32 sums over this warp's whole K range
  int wsum[2] = {0, 0};  // per channel: row sums of the weight codes
  int qsum[NT] = {};    // per channel, ZP: sums of q for token g + 8 nt (this lane's share)
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[nt][i] = 0, dsum[nt][i] = 0;
  }
  const int64_t per = (spans + splits - 1) / splits;
  const int64_t i0 = sp * per, i1 = min(spans, i0 + per);
  if (tile < tiles) {
    const int lc = (W * t) / 16, off = (W * t) % 16;
    const mma::TileRows rows(a.packed, row, chunks, a.n, off);
    const mma::SpanGroups groups_of(GROUPED ? a.group_size / SPAN_K : 1);
    for (int64_t it = i0; it < i1; it += kUnroll) {
      uint32_t wr[kUnroll][2][WORDS];
      // past K, int4 codes of value 0 (stored 8), so that the row sums stay right
      rows.load<CHUNKS>(it, i1, lc, chunks, wr, BITS == 4 ? 0x88888888u : 0u);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        if (it + u >= i1) break;
        const int64_t c = (it + u) * CHUNKS + lc;
        // The A operand's words (signed bytes) for this span, and the rows' code sums.
        uint32_t lo[2][WORDS], hi[2][WORDS];
        int ws[2] = {0, 0};
#pragma unroll
        for (int h = 0; h < 2; ++h) {
#pragma unroll
          for (int j = 0; j < WORDS; ++j) {
            if constexpr (BITS == 8) {
              lo[h][j] = wr[u][h][j];
              ws[h] = byteSum(lo[h][j], ws[h]);
            } else {
              lo[h][j] = nibblesToBytes(wr[u][h][j]);
              hi[h][j] = nibblesToBytes(wr[u][h][j] >> 4);
              ws[h] = byteSum(hi[h][j], byteSum(lo[h][j], ws[h]));
            }
          }
        }
        int d[NT][4];
        int qs[NT];
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          const int64_t tok = g + 8 * nt;
          uint32_t xq[RUNS][WORDS];
          mma::loadRuns(codes, a.k, tok, m, c, chunks, KPC, off, xq);
          qs[nt] = 0;
          if constexpr (ZP) {
#pragma unroll
            for (int r = 0; r < RUNS; ++r) {
#pragma unroll
              for (int j = 0; j < WORDS; ++j) qs[nt] = byteSum(xq[r][j], qs[nt]);
            }
          }
#pragma unroll
          for (int i = 0; i < 4; ++i) d[nt][i] = GROUPED ? 0 : dsum[nt][i];
          if constexpr (BITS == 8) {
#pragma unroll
            for (int p = 0; p < WORDS / 2; ++p) {
              const uint32_t fa[4] = {lo[0][2 * p], lo[1][2 * p], lo[0][2 * p + 1], lo[1][2 * p + 1]};
              mmaS8(d[nt], fa, xq[0][2 * p], xq[0][2 * p + 1]);
            }
          } else {
#pragma unroll
            for (int j = 0; j < WORDS; ++j) {
              const uint32_t fa[4] = {lo[0][j], lo[1][j], hi[0][j], hi[1][j]};
              mmaS8(d[nt], fa, xq[0][j], xq[RUNS - 1][j]);
            }
          }
        }
        if constexpr (GROUPED) {
          // Row sums over the span's 4 lanes; then sum (q - zx)(w - zw) for this span, exact in int32
          // but the weight zero point's term.
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            ws[h] += __shfl_xor_sync(0xFFFFFFFFu, ws[h], 1);
            ws[h] += __shfl_xor_sync(0xFFFFFFFFu, ws[h], 2);
          }
          const int64_t grp = groups_of.of(it + u);
          float s[2], z[2];
          mma::rowScales(a.scales, a.zero_points, a.groups, grp, row, a.n, s, z);
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            float q0 = 0.0f, q1 = 0.0f;
            if constexpr (ZP) mma::columnSums(static_cast<float>(qs[nt]), t, q0, q1);
            q0 -= static_cast<float>(zx[nt][0] * SPAN_K), q1 -= static_cast<float>(zx[nt][1] * SPAN_K);
#pragma unroll
            for (int i = 0; i < 4; ++i) {
              const int h = i / 2, j = i % 2;
              const float e = static_cast<float>(d[nt][i] - zx[nt][j] * ws[h]);
              acc[nt][i] = fmaf(s[h], ZP ? fmaf(-z[h], j ? q1 : q0, e) : e, acc[nt][i]);
            }
          }
        } else {
          wsum[0] += ws[0], wsum[1] += ws[1];
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            qsum[nt] += qs[nt];
#pragma unroll
            for (int i = 0; i < 4; ++i) dsum[nt][i] = d[nt][i];
          }
        }
      }
    }
  }
  if constexpr (!GROUPED) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      wsum[h] += __shfl_xor_sync(0xFFFFFFFFu, wsum[h], 1);
      wsum[h] += __shfl_xor_sync(0xFFFFFFFFu, wsum[h], 2);
    }
    // the real k of this warp's range (zero codes past k add nothing to the q sums)
    const int64_t kk = tile < tiles ? max(int64_t(0), min(a.k, i1 * SPAN_K) - i0 * SPAN_K) : 0;
    float s[2], z[2];
    mma::rowScales(a.scales, a.zero_points, 1, 0, row, tile < tiles ? a.n : 0, s, z);
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      float q0 = 0.0f, q1 = 0.0f;
      if constexpr (ZP) mma::columnSums(static_cast<float>(qsum[nt]), t, q0, q1);
      q0 -= static_cast<float>(zx[nt][0]) * static_cast<float>(kk);
      q1 -= static_cast<float>(zx[nt][1]) * static_cast<float>(kk);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int h = i / 2, j = i % 2;
        if constexpr (Q8) {
          acc[nt][i] = dsum[nt][i] - zx[nt][j] * wsum[h];
        } else {
          const float e = static_cast<float>(dsum[nt][i] - zx[nt][j] * wsum[h]);
          acc[nt][i] = s[h] * (ZP ? fmaf(-z[h], j ? q1 : q0, e) : e);
        }
      }
    }
  }
  mma::finishTile<NT>(part, acc, sp, splits, tile, tiles, a.n, m, [&](int64_t r, int tok, Acc y) {
    if constexpr (Q8) {
      static_cast<int8_t*>(a.y)[(m0 + tok) * a.n + r] =
          requantize(a.q8, a.scales[r], y, a.bias != nullptr ? a.bias[r] : 0.0f, (m0 + tok) * a.n + r);
    } else {
      y = y * a.x.scales[m0 + tok];
      if (a.bias != nullptr) y += a.bias[r];
      storeOut(a.y, a.yt, (m0 + tok) * a.n + r, y);
    }
  });
}

template <int BITS, int W, int NT, bool GROUPED>
cudaError_t launchDyn(const DynGemv& a, cudaStream_t stream) {
  const int64_t chunks = a.k / (BITS == 8 ? 16 : 32), spans = (chunks + W / 4 - 1) / (W / 4);
  const int splits = mma::splitsFor(spans);
  const dim3 grid = mma::gridFor(a.n, a.m, splits);
  if constexpr (BITS == 8 && !GROUPED) {
    if (a.q8.on) {
      dynMma<8, W, NT, false, false, true><<<grid, kThreads, 0, stream>>>(a, splits, chunks, spans);
      return cudaGetLastError();
    }
  }
  if (a.zero_points != nullptr) {
    dynMma<BITS, W, NT, GROUPED, true><<<grid, kThreads, 0, stream>>>(a, splits, chunks, spans);
  } else {
    dynMma<BITS, W, NT, GROUPED, false><<<grid, kThreads, 0, stream>>>(a, splits, chunks, spans);
  }
  return cudaGetLastError();
}

template <int BITS, int NT>
cudaError_t bySpan(const DynGemv& a, cudaStream_t stream) {
  return withSpan<BITS>(a, [&](auto w, auto grouped) {
    return launchDyn<BITS, decltype(w)::value, NT, decltype(grouped)::value>(a, stream);
  });
}

template <FloatType T>
cudaError_t quantizeAs(const void* x, int64_t m, int64_t k, const TokenCodes& out, cudaStream_t stream) {
  if (k % 8 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(out.codes) % 8 == 0) {
    quantizeTokensVec<T><<<static_cast<unsigned>(m), kVecThreads, 0, stream>>>(x, k, out);
  } else {
    quantizeTokens<T><<<static_cast<unsigned>(m), kQuantThreads, 0, stream>>>(x, k, out);
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t quantizeTokensInt8(const void* x, FloatType xt, int64_t m, int64_t k, const TokenCodes& out,
                               cudaStream_t stream) {
  if (m == 0) return cudaSuccess;
  switch (xt) {
    case FloatType::kF32: return quantizeAs<FloatType::kF32>(x, m, k, out, stream);
    case FloatType::kBF16: return quantizeAs<FloatType::kBF16>(x, m, k, out, stream);
    default: return quantizeAs<FloatType::kF16>(x, m, k, out, stream);
  }
}

cudaError_t linearDynamicGemv(const DynGemv& a, cudaStream_t stream) {
  if (a.m == 0 || a.n == 0) return cudaSuccess;
  if (!linearDynamicGemvTakes(a.bits, a.groups, a.group_size)) return cudaErrorInvalidValue;
  if (a.q8.on && (a.bits != 8 || a.groups != 1 || a.zero_points != nullptr)) return cudaErrorInvalidValue;
  if (a.m >= dynGemmMinRows()) return linearDynamicGemm(a, stream);
  if (a.bits == 8) return a.m <= 8 ? bySpan<8, 1>(a, stream) : bySpan<8, 2>(a, stream);
  return a.m <= 8 ? bySpan<4, 1>(a, stream) : bySpan<4, 2>(a, stream);
}

}  // namespace pt2q::cuda
