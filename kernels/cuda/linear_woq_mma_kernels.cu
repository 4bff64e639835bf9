// The weight-only GEMV on tensor cores, for bf16 / fp16 x (linear_woq_cuda_kernels.h). A warp
// owns 16 output rows (four packed 4-row blocks; two such tiles for int4 weights of many rows at
// 9 to 16 rows of x) over a range of K and feeds them to mma.m16n8k16 as the A operand; the x rows
// are the B operand's 8 columns (two column tiles for 9 to 16 rows). 16 rows of x take 1.5-1.9x
// the time of one on the H100 (docs/perf_linear_cuda.md): x's words and mmas double, and the
// registers they hold leave two blocks per multiprocessor instead of three.
//
// The A fragment wants each lane to hold 4 values of k per row per mma, but a coalesced load gives
// a lane W contiguous bytes of one row. The sum over k does not care about the order of k, so the
// kernel renames k: the 4 lanes of a row hold 4W contiguous bytes (a "span"), and mma j takes
// bytes 4j..4j+3 of each lane as that lane's 4 k positions. x is loaded in the same renaming. A
// span never crosses a group (W is chosen so that the span divides the group size), so each
// span's sum can be scaled by its group's scale.
//
// Codes go to bf16 / fp16 exactly (int8 through the fp32 0x4B000000 trick, int4 and fp16 through a
// 16-bit magic exponent), the mma sums exact products in fp32, and the scale and zero point are
// applied per span in fp32, so the result is the CUDA-core kernel's within fp32 summation order.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/linear_woq_cuda_kernels.h"
#include "kernels/cuda/mma_tiles.cuh"

namespace pt2q::cuda {
namespace {

using mma::kChunkBytes;
using mma::kThreads;
using mma::kUnroll;
using mma::kWarps;
using mma::loadWords;

// (w & mask) | bits in one lop3: written as two C operations, nvcc emits two (a lop3 takes one
// immediate).
__device__ __forceinline__ uint32_t maskOr(uint32_t w, uint32_t mask, uint32_t bits) {
  uint32_t r;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(r) : "r"(w), "r"(mask), "r"(bits));
  return r;
}

template <FloatType T>
struct Mma;
template <>
struct Mma<FloatType::kBF16> {
  // The nibbles at bits 0-3 and 16-19 of w -> (n - 8, n' - 8): 0x4300 | n is 128 + n in bf16.
  static __device__ __forceinline__ uint32_t nibblePair(uint32_t w) {
    const uint32_t v = maskOr(w, 0x000F000Fu, 0x43004300u);
    const __nv_bfloat162 r = __hsub2(*reinterpret_cast<const __nv_bfloat162*>(&v), __floats2bfloat162_rn(136.0f, 136.0f));
    return *reinterpret_cast<const uint32_t*>(&r);
  }
  // Signed bytes 0,1 and 2,3 of a word -> two bf16 pairs. bf16 has 8 significant bits, too few for
  // a magic exponent over 256 values, so the codes pass through fp32 (exact) and keep its top half.
  static __device__ __forceinline__ void bytePairs(uint32_t word, uint32_t& p01, uint32_t& p23) {
    const uint32_t u = word ^ 0x80808080u;
    uint32_t f[4];
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      f[b] = __float_as_uint(__uint_as_float(__byte_perm(u, 0x4B000000u, static_cast<uint32_t>(b) | 0x7540u)) -
                             8388736.0f);
    }
    p01 = __byte_perm(f[0], f[1], 0x7632);
    p23 = __byte_perm(f[2], f[3], 0x7632);
  }
  static __device__ __forceinline__ float2 toFloat2(uint32_t w) {
    return make_float2(__uint_as_float(w << 16), __uint_as_float(w & 0xFFFF0000u));
  }
  static __device__ __forceinline__ void store(void* p, int64_t i, float v) {
    static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
  }
  static __device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    mma::mma16816<true>(c, a, b0, b1);
  }
};
template <>
struct Mma<FloatType::kF16> {
  // 0x6400 | n is 1024 + n in fp16 for n < 1024: one or-mask (int4) or byte permute (int8) per pair.
  static __device__ __forceinline__ uint32_t nibblePair(uint32_t w) {
    const uint32_t v = maskOr(w, 0x000F000Fu, 0x64006400u);
    const __half2 r = __hsub2(*reinterpret_cast<const __half2*>(&v), __floats2half2_rn(1032.0f, 1032.0f));
    return *reinterpret_cast<const uint32_t*>(&r);
  }
  static __device__ __forceinline__ void bytePairs(uint32_t word, uint32_t& p01, uint32_t& p23) {
    const uint32_t u = word ^ 0x80808080u;
    const __half2 bias = __floats2half2_rn(1152.0f, 1152.0f);
    const uint32_t v01 = __byte_perm(u, 0x64646464u, 0x5140), v23 = __byte_perm(u, 0x64646464u, 0x5342);
    const __half2 r01 = __hsub2(*reinterpret_cast<const __half2*>(&v01), bias);
    const __half2 r23 = __hsub2(*reinterpret_cast<const __half2*>(&v23), bias);
    p01 = *reinterpret_cast<const uint32_t*>(&r01);
    p23 = *reinterpret_cast<const uint32_t*>(&r23);
  }
  static __device__ __forceinline__ float2 toFloat2(uint32_t w) {
    return __half22float2(*reinterpret_cast<const __half2*>(&w));
  }
  static __device__ __forceinline__ void store(void* p, int64_t i, float v) {
    static_cast<__half*>(p)[i] = __float2half_rn(v);
  }
  static __device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    mma::mma16816<false>(c, a, b0, b1);
  }
};

// W: bytes per lane per row per span (span = 4W bytes of a row: 4W int8 or 8W int4 values).
// NT: 8-row tiles of x (1 for up to 8 rows, 2 for up to 16). GROUPED: scales per group (applied per
// span) rather than per channel (applied once at the end). ZP: zero points present, so the kernel
// also sums x over each span: sum (w - z) x = sum w x - z sum x. TPW: 16-row weight tiles per
// warp (each span's x words serve all of them). UNR: spans whose weight loads a lane has in flight.
// MINB: blocks per multiprocessor (three for one x tile measured 0-9 % faster than two at 1 and 8
// rows on the H100, 2 % slower on 4096 x 11008 int4; see launchMma for the settings kept).
// Per weight tile and x tile, the mmas and the scaling run in the same order for every TPW and UNR,
// so these only change speed, never bits.
// Bookkeeping per span is kept small (it was about 60 % of the instructions of an earlier version,
// 286 per span of a warp against ~110 of decode and mma; now 170): pointers advance by a constant
// per batch of spans instead of being rebuilt from 64-bit indices, rows of the weight past n and
// rows of x past m read the last real row instead of branching to zeros (an mma's output rows and
// columns are independent, and those are never stored), and the group of a span is counted, not
// divided out. On the H100 this was 6-10 % faster for int8 and 11-29 % for int4 g128 at one row
// (docs/perf_linear_cuda.md). chunks and spans fit an int: larger k goes to the reference path (linear_woq_cuda.cpp).
template <int BITS, FloatType T, int W, int NT, int TPW, int UNR, int MINB, bool GROUPED, bool ZP>
__global__ void __launch_bounds__(kThreads, MINB) woqMma(WoqGemv a, int splits, int chunks, int spans) {
  using M = Mma<T>;
  constexpr int WORDS = W / 4;                                      // weight words per row per span
  constexpr int CHUNKS = W / 4;                                     // chunks per span (4W bytes)
  constexpr int XWORDS = W / 2;                                     // x words per run (W values)
  constexpr int RUNS = BITS == 8 ? 1 : 2;                           // int4: low and high nibbles
  constexpr int KPC = BITS == 8 ? 16 : 32;                          // k per chunk
  constexpr int SPAN_K = CHUNKS * KPC;
  __shared__ float part[kWarps][16][NT * 8];
  // A warp owns TPW consecutive 16-row tiles (a "tile group") and reuses each span's x words for
  // all of them. blockIdx.y: which 16 rows of x (more than 16 rows re-read the weight tile, mostly
  // from L2).
  const int64_t tiles = (a.n + 15) / 16;
  const mma::TileLane at((tiles + TPW - 1) / TPW * 16, a.m, splits);
  const int g = at.g, t = at.t, sp = at.sp;
  const int64_t tile0 = at.tile * TPW, m0 = at.m0, m = at.m;
  float acc[TPW][NT][4];
  float xsum[NT];  // per channel with zero points: this lane's share of sum x for token g + 8 nt
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    xsum[nt] = 0.0f;
#pragma unroll
    for (int p = 0; p < TPW; ++p) {
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[p][nt][i] = 0.0f;
    }
  }
  int64_t row[TPW][2];  // the lane's two weight rows per tile, clamped to the last row
#pragma unroll
  for (int p = 0; p < TPW; ++p) {
#pragma unroll
    for (int h = 0; h < 2; ++h) row[p][h] = min((tile0 + p) * 16 + g + 8 * h, a.n - 1);
  }
  if (tile0 < tiles) {
    const int per = (spans + splits - 1) / splits;
    const int i0 = sp * per, i1 = min(spans, i0 + per);
    const int lc = (W * t) / 16, off = (W * t) % 16;  // this lane's chunk in the span, byte offset
    const int8_t* wp[TPW][2];
    const float* sc[TPW][2];
    const float* zc[TPW][2];
#pragma unroll
    for (int p = 0; p < TPW; ++p) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        wp[p][h] = a.packed + ((row[p][h] / 4) * chunks + static_cast<int64_t>(i0) * CHUNKS + lc) * kChunkBytes +
                   (row[p][h] % 4) * 16 + off;
        sc[p][h] = a.scales + row[p][h] * a.groups;
        zc[p][h] = ZP ? a.zero_points + row[p][h] * a.groups : nullptr;
      }
    }
    const uint16_t* xp[NT];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const int64_t tok = min(int64_t(g + 8 * nt), m - 1);
      xp[nt] = static_cast<const uint16_t*>(a.x) + (m0 + tok) * a.k + (static_cast<int64_t>(i0) * CHUNKS + lc) * KPC + off;
    }
    const int spg = GROUPED ? static_cast<int>(a.group_size / SPAN_K) : 1;  // spans per group
    int grp = GROUPED ? i0 / spg : 0, in_grp = GROUPED ? i0 % spg : 0;
    for (int it = i0; it < i1; it += UNR) {
      uint32_t wr[UNR][TPW][2][WORDS];
#pragma unroll
      for (int u = 0; u < UNR; ++u) {
        const bool ok = it + u < i1 && (it + u) * CHUNKS + lc < chunks;
#pragma unroll
        for (int p = 0; p < TPW; ++p) {
#pragma unroll
          for (int h = 0; h < 2; ++h) loadWords(ok ? wp[p][h] + u * CHUNKS * kChunkBytes : nullptr, wr[u][p][h], true);
        }
      }
#pragma unroll
      for (int u = 0; u < UNR; ++u) {
        if (it + u >= i1) break;
        const bool live = (it + u) * CHUNKS + lc < chunks;  // false in a last, partial span
        uint32_t xw[NT][RUNS][XWORDS];
        float part_sum[NT];
        float d[TPW][NT][4];
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
          for (int r = 0; r < RUNS; ++r) {
            loadWords(live ? xp[nt] + u * SPAN_K + 16 * r : nullptr, xw[nt][r], false);
          }
          part_sum[nt] = 0.0f;
          if constexpr (ZP) {
#pragma unroll
            for (int r = 0; r < RUNS; ++r) {
#pragma unroll
              for (int i = 0; i < XWORDS; ++i) {
                const float2 f = M::toFloat2(xw[nt][r][i]);
                part_sum[nt] += f.x + f.y;
              }
            }
          }
#pragma unroll
          for (int p = 0; p < TPW; ++p) {
#pragma unroll
            for (int i = 0; i < 4; ++i) d[p][nt][i] = 0.0f;
          }
        }
        // Per tile and x tile the mmas run in the order (j, hi), as with one tile per warp.
#pragma unroll
        for (int j = 0; j < WORDS; ++j) {
          if constexpr (BITS == 8) {
#pragma unroll
            for (int p = 0; p < TPW; ++p) {
              uint32_t fa[4];
              M::bytePairs(wr[u][p][0][j], fa[0], fa[2]);
              M::bytePairs(wr[u][p][1][j], fa[1], fa[3]);
#pragma unroll
              for (int nt = 0; nt < NT; ++nt) M::mma(d[p][nt], fa, xw[nt][0][2 * j], xw[nt][0][2 * j + 1]);
            }
          } else {
#pragma unroll
            for (int hi = 0; hi < 2; ++hi) {
              uint32_t xb[NT][2];  // the B operand: x's values under the nibble pairs' renaming
#pragma unroll
              for (int nt = 0; nt < NT; ++nt) {
                const uint32_t x0 = xw[nt][hi][2 * j], x1 = xw[nt][hi][2 * j + 1];
                xb[nt][0] = __byte_perm(x0, x1, 0x5410);
                xb[nt][1] = __byte_perm(x0, x1, 0x7632);
              }
#pragma unroll
              for (int p = 0; p < TPW; ++p) {
                // pairs (byte 0, byte 2) and (byte 1, byte 3) of the low or high nibbles
                uint32_t fa[4];
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                  const uint32_t v = wr[u][p][h][j] >> (4 * hi);
                  fa[h] = M::nibblePair(v);
                  fa[h + 2] = M::nibblePair(v >> 8);
                }
#pragma unroll
                for (int nt = 0; nt < NT; ++nt) M::mma(d[p][nt], fa, xb[nt][0], xb[nt][1]);
              }
            }
          }
        }
        if constexpr (GROUPED) {
          float s[TPW][2], z[TPW][2];
#pragma unroll
          for (int p = 0; p < TPW; ++p) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              s[p][h] = __ldg(sc[p][h] + grp);
              z[p][h] = ZP ? __ldg(zc[p][h] + grp) : 0.0f;
            }
          }
          if (++in_grp == spg) in_grp = 0, ++grp;
          float s0[NT], s1[NT];
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            s0[nt] = s1[nt] = 0.0f;
            if constexpr (ZP) mma::columnSums(part_sum[nt], t, s0[nt], s1[nt]);
          }
#pragma unroll
          for (int p = 0; p < TPW; ++p) {
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
              float (&c)[4] = acc[p][nt];
              const float (&e)[4] = d[p][nt];
              if constexpr (ZP) {
                c[0] = fmaf(s[p][0], fmaf(-z[p][0], s0[nt], e[0]), c[0]);
                c[1] = fmaf(s[p][0], fmaf(-z[p][0], s1[nt], e[1]), c[1]);
                c[2] = fmaf(s[p][1], fmaf(-z[p][1], s0[nt], e[2]), c[2]);
                c[3] = fmaf(s[p][1], fmaf(-z[p][1], s1[nt], e[3]), c[3]);
              } else {
                c[0] = fmaf(s[p][0], e[0], c[0]);
                c[1] = fmaf(s[p][0], e[1], c[1]);
                c[2] = fmaf(s[p][1], e[2], c[2]);
                c[3] = fmaf(s[p][1], e[3], c[3]);
              }
            }
          }
        } else {
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            xsum[nt] += part_sum[nt];
#pragma unroll
            for (int p = 0; p < TPW; ++p) {
#pragma unroll
              for (int i = 0; i < 4; ++i) acc[p][nt][i] += d[p][nt][i];
            }
          }
        }
      }
#pragma unroll
      for (int p = 0; p < TPW; ++p) {
#pragma unroll
        for (int h = 0; h < 2; ++h) wp[p][h] += UNR * CHUNKS * kChunkBytes;
      }
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) xp[nt] += UNR * SPAN_K;
    }
  }
  if constexpr (!GROUPED) {
    float s0[NT], s1[NT];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      s0[nt] = s1[nt] = 0.0f;
      if constexpr (ZP) mma::columnSums(xsum[nt], t, s0[nt], s1[nt]);
    }
#pragma unroll
    for (int p = 0; p < TPW; ++p) {
      float s[2], z[2] = {0.0f, 0.0f};
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        s[h] = __ldg(a.scales + row[p][h]);
        if constexpr (ZP) z[h] = __ldg(a.zero_points + row[p][h]);
      }
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        float (&c)[4] = acc[p][nt];
        c[0] = s[0] * fmaf(-z[0], s0[nt], c[0]);
        c[1] = s[0] * fmaf(-z[0], s1[nt], c[1]);
        c[2] = s[1] * fmaf(-z[1], s0[nt], c[2]);
        c[3] = s[1] * fmaf(-z[1], s1[nt], c[3]);
      }
    }
  }
#pragma unroll
  for (int p = 0; p < TPW; ++p) {
    if (p > 0) __syncthreads();  // the previous tile's sums are read out of `part`
    mma::finishTile<NT>(part, acc[p], sp, splits, tile0 + p, tiles, a.n, m, [&](int64_t row, int tok, float y) {
      if (a.bias != nullptr) y += a.bias[row];
      M::store(a.y, (m0 + tok) * a.n + row, y);
    });
  }
}

// A launch's geometry with TPW tiles per warp: chunks and spans of K (each fits an int: larger k
// goes to the reference path), the split of K over a block's warps, and the grid.
struct Geometry {
  int chunks, spans, splits;
  dim3 grid;
};
template <int BITS, int W, int TPW>
Geometry geometryOf(const WoqGemv& a) {
  const int64_t chunks = a.k / (BITS == 8 ? 16 : 32), spans = (chunks + W / 4 - 1) / (W / 4);
  // Tried on the H100: 8 spans in flight per lane instead of 4 (5-25 % slower at one row, the
  // same at 16), and splitting K only until ~16 warps per multiprocessor (mixed: from 9 % faster
  // to 21 % slower by shape).
  const int splits = mma::splitsFor(spans);
  return {static_cast<int>(chunks), static_cast<int>(spans), splits,
          mma::gridFor(((a.n + 15) / 16 + TPW - 1) / TPW * 16, a.m, splits)};
}

template <int BITS, FloatType T, int W, int NT, int TPW, int UNR, int MINB, bool GROUPED>
cudaError_t launchTiles(const WoqGemv& a, cudaStream_t stream) {
  const Geometry g = geometryOf<BITS, W, TPW>(a);
  if (a.zero_points != nullptr) {
    woqMma<BITS, T, W, NT, TPW, UNR, MINB, GROUPED, true><<<g.grid, kThreads, 0, stream>>>(a, g.splits, g.chunks, g.spans);
  } else {
    woqMma<BITS, T, W, NT, TPW, UNR, MINB, GROUPED, false><<<g.grid, kThreads, 0, stream>>>(a, g.splits, g.chunks, g.spans);
  }
  return cudaGetLastError();
}

// Measured on the H100, same process (docs/perf_linear_cuda.md). Up to 8 rows of x, int4 weights
// in 16-byte spans: one span of weight loads in flight and four blocks per multiprocessor (at most
// 64 registers) instead of four spans and three blocks: more warps over the same bytes in flight,
// 0.99-1.21x at one row and 1.37x at 8 rows on the benchmark shapes. int8 found no setting faster
// on every shape; four blocks (2 spans) won where they take a partial wave of blocks off the grid
// (below), lost up to 12 % elsewhere. 9 to 16 rows (two x tiles) hold more registers, so two blocks per
// multiprocessor; there the weight loads in flight were cut to 2 spans (1.06-1.19x at 16 rows),
// and int4 weights of many tiles let a warp own two tiles that share each span's x words
// (1.15-1.36x on 11008 and 14336 x 4096; with fewer tiles the halved grid lost up to 20 %).
constexpr int64_t kPairTilesPerSm = 4;  // tiles per multiprocessor from which warps take two (int4, 9+ rows)

template <int BITS, FloatType T, int W, int NT, bool GROUPED>
cudaError_t launchMma(const WoqGemv& a, cudaStream_t stream) {
  if constexpr (NT == 1 && BITS == 4 && W == 16) {
    return launchTiles<BITS, T, W, NT, 1, 1, 4, GROUPED>(a, stream);
  } else if constexpr (NT == 1) {
    if constexpr (BITS == 8 && W == 16) {
      // int8: four blocks per multiprocessor (2 spans in flight) where that takes a partial wave
      // of blocks off the grid (14336 x 4096 at one row: 896 blocks, 2.3 waves of three or 1.7 of
      // four), else three.
      const dim3 g = geometryOf<BITS, W, 1>(a).grid;
      const int64_t blocks = static_cast<int64_t>(g.x) * g.y, sms = a.sm_count;
      if ((blocks + 4 * sms - 1) / (4 * sms) < (blocks + 3 * sms - 1) / (3 * sms)) {
        return launchTiles<BITS, T, W, NT, 1, 2, 4, GROUPED>(a, stream);
      }
    }
    return launchTiles<BITS, T, W, NT, 1, kUnroll, 3, GROUPED>(a, stream);
  } else if constexpr (W == 16) {
    if (BITS == 4 && (a.n + 15) / 16 >= kPairTilesPerSm * static_cast<int64_t>(a.sm_count)) {
      return launchTiles<BITS, T, W, NT, 2, 1, 2, GROUPED>(a, stream);
    }
    return launchTiles<BITS, T, W, NT, 1, 2, 2, GROUPED>(a, stream);
  } else {
    return launchTiles<BITS, T, W, NT, 1, kUnroll, 2, GROUPED>(a, stream);
  }
}

template <int BITS, FloatType T, int NT>
cudaError_t bySpan(const WoqGemv& a, cudaStream_t stream) {
  if (a.groups == 1) return launchMma<BITS, T, 16, NT, false>(a, stream);
  const int64_t per_byte = BITS == 8 ? 1 : 2;  // k values per byte
  if (a.group_size % (64 * per_byte) == 0) return launchMma<BITS, T, 16, NT, true>(a, stream);
  if (a.group_size % (32 * per_byte) == 0) return launchMma<BITS, T, 8, NT, true>(a, stream);
  return launchMma<BITS, T, 4, NT, true>(a, stream);
}

template <int BITS, FloatType T>
cudaError_t byRows(const WoqGemv& a, cudaStream_t stream) {
  if (a.m > kWoqMmaMaxRows || a.k / 16 > INT32_MAX) return cudaErrorInvalidValue;
  return a.m <= 8 ? bySpan<BITS, T, 1>(a, stream) : bySpan<BITS, T, 2>(a, stream);
}

}  // namespace

cudaError_t linearWeightOnlyMma(const WoqGemv& a, cudaStream_t stream) {
  if (a.bits == 8) {
    return a.xt == FloatType::kBF16 ? byRows<8, FloatType::kBF16>(a, stream) : byRows<8, FloatType::kF16>(a, stream);
  }
  return a.xt == FloatType::kBF16 ? byRows<4, FloatType::kBF16>(a, stream) : byRows<4, FloatType::kF16>(a, stream);
}

}  // namespace pt2q::cuda
