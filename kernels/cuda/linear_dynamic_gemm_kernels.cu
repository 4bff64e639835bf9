// linear_w8a8 / linear_w4a8 / linear_q8 for many rows of x (linear_dynamic_cuda_kernels.h): an int8
// tensor-core GEMM over the CPU's packed weights, with the GEMV's arithmetic (dynMma in
// linear_dynamic_cuda_kernels.cu) but each weight tile read once per 128 rows of x instead of once
// per 16.
//
// A block owns 128 rows of x (the B operand: 16 tiles of 8 columns) and 8 warps x RT x 16 output
// rows (the A operand); it walks K in stages of 128 values. Each stage of x's codes and of the
// packed weight blocks is copied into shared memory by cp.async, kStages - 1 stages ahead of the
// mma. The weight keeps its packed order there (4-row blocks, 64-byte chunks); a lane reads its
// rows' bytes as the GEMV reads them from global memory, under the same renaming of k, so that x
// is read under that renaming too. Both layouts XOR the 16-byte slot with a few row bits so that
// the 8 (or 16, or 32) lanes of one shared-memory phase hit distinct banks.
//
// Numerics are the GEMV's: exact int32 sums per span of a group (per channel: over all of K),
// scaled in fp32 per span in K order; linear_q8 requantizes the exact int32 sum.
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/dyn_mma.cuh"
#include "kernels/cuda/env.h"
#include "kernels/cuda/linear_dynamic_cuda_kernels.h"
#include "kernels/cuda/mma_tiles.cuh"
#include "kernels/cuda/smem_limit.h"

namespace pt2q::cuda {
namespace {

using namespace dyn;
using mma::kChunkBytes;

constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
constexpr int kTokens = 128;            // rows of x per block
constexpr int kNT = kTokens / 8;        // their 8-column tiles
constexpr int kStageK = 128;            // k values per pipeline stage
constexpr int kStages = 3;
constexpr int kXStageBytes = kTokens * kStageK;

// The XOR of a row's 16-byte slot in x's stage: for each span width, the rows of one phase of the
// lanes' loads land on distinct banks (kernels/README.md, "Quantized linears on CUDA").
template <int BITS, int W>
__device__ __forceinline__ int xSwizzle(int row) {
  if constexpr (BITS == 8 && W == 16) return (row & 1) << 2;   // 16-byte loads at 16t
  if constexpr (BITS == 8 && W == 8) return (row & 3) << 1;    // 8-byte loads at 8t
  if constexpr (BITS == 4 && W == 16) return row & 1;          // 16-byte loads at 32t, 32t + 16
  if constexpr (BITS == 4 && W == 8) return (row & 1) | ((row & 2) << 1);
  return row & 7;                                              // int4, 4-byte loads at 4t
}

// N 32-bit words from shared memory at p (aligned to their size).
template <int N>
__device__ __forceinline__ void sharedWords(const uint8_t* p, uint32_t (&w)[N]) {
  if constexpr (N == 4) {
    const uint4 v = *reinterpret_cast<const uint4*>(p);
    w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
  } else if constexpr (N == 2) {
    const uint2 v = *reinterpret_cast<const uint2*>(p);
    w[0] = v.x, w[1] = v.y;
  } else {
    static_assert(N == 1);
    w[0] = *reinterpret_cast<const uint32_t*>(p);
  }
}

// W: bytes per lane per row per span, as in the GEMV. RT: 16-row tiles of the weight per warp.
template <int BITS, int W, int RT, bool GROUPED, bool ZP, bool Q8>
__global__ void __launch_bounds__(kThreads, RT == 1 ? 2 : 1) dynGemm(DynGemv a, int64_t chunks, int64_t spans) {
  static_assert(!Q8 || (BITS == 8 && !GROUPED && !ZP), "linear_q8: int8 per channel, symmetric");
  using Acc = std::conditional_t<GROUPED, float, int>;
  constexpr int WORDS = W / 4;
  constexpr int CHUNKS = W / 4;                  // chunks per span
  constexpr int RUNS = BITS == 8 ? 1 : 2;
  constexpr int KPC = BITS == 8 ? 16 : 32;       // k per chunk
  constexpr int SPAN_K = CHUNKS * KPC;
  constexpr int SPS = kStageK / SPAN_K;          // spans per stage
  constexpr int CHS = kStageK / KPC;             // chunks per stage
  constexpr int BLOCKS = kWarps * RT * 4;        // packed 4-row blocks per block of threads
  constexpr int W_STAGE = BLOCKS * CHS * int(kChunkBytes);
  constexpr int STAGE = kXStageBytes + W_STAGE;
  static_assert(BITS == 4 || WORDS % 2 == 0, "an int8 mma takes two words of a row per lane");
  static_assert(kStageK % SPAN_K == 0, "a stage holds whole spans");
  constexpr int NTB = GROUPED ? 2 : 4;           // column tiles whose mmas interleave
  extern __shared__ __align__(16) uint8_t smem[];
  __shared__ int zx_s[kTokens];

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane >> 2, t = lane & 3;
  const int64_t m0 = static_cast<int64_t>(blockIdx.x) * kTokens;
  const int64_t blk0 = static_cast<int64_t>(blockIdx.y) * BLOCKS;  // first packed block
  const int64_t nb = (a.n + 3) / 4;
  const int64_t stages = (chunks + CHS - 1) / CHS;
  const int8_t* codes = a.x.codes;
  if (tid < kTokens) {
    const int64_t tok = m0 + tid;
    zx_s[tid] = tok >= a.m ? 0 : Q8 ? a.q8.zx : a.x.zero_points[tok];
  }
  __syncthreads();

  // One stage's copies: x's codes (zeros past m and k) and the weight's blocks (zeros, or int4
  // zero codes, past n and k, so that the weight's row sums stay right).
  auto loadStage = [&](int buf, int64_t st) {
    uint8_t* xs = smem + buf * STAGE;
    uint8_t* ws = xs + kXStageBytes;
#pragma unroll
    for (int j = 0; j < kXStageBytes / 16 / kThreads; ++j) {
      const int id = tid + j * kThreads, row = id / (kStageK / 16), slot = id % (kStageK / 16);
      const int64_t k0 = st * kStageK + slot * 16;
      uint8_t* dst = xs + row * kStageK + ((slot ^ xSwizzle<BITS, W>(row)) << 4);
      if (m0 + row < a.m && k0 < a.k) {
        mma::cpAsync16(dst, codes + (m0 + row) * a.k + k0);
      } else {
        *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
      }
    }
    constexpr uint32_t fill = BITS == 4 ? 0x88888888u : 0u;
#pragma unroll
    for (int j = 0; j < W_STAGE / 16 / kThreads; ++j) {
      const int id = tid + j * kThreads, b = id / (CHS * 4), c = (id / 4) % CHS, r = id % 4;
      const int64_t gc = st * CHS + c;
      uint8_t* dst = ws + ((b * CHS + c) * 4 + (r ^ (c & 2))) * 16;
      if (blk0 + b < nb && gc < chunks) {
        mma::cpAsync16(dst, a.packed + ((blk0 + b) * chunks + gc) * kChunkBytes + r * 16);
      } else {
        *reinterpret_cast<uint4*>(dst) = make_uint4(fill, fill, fill, fill);
      }
    }
  };

  Acc acc[RT][kNT][4];
#pragma unroll
  for (int rt = 0; rt < RT; ++rt) {
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[rt][nt][i] = 0;
    }
  }
  int wsum[RT][2] = {};  // per channel: row sums of the weight codes (this lane's share)
  int qsum[kNT] = {};    // per channel with ZP: sums of q for token 8 nt + g (this lane's share)
  int64_t row[RT][2];
#pragma unroll
  for (int rt = 0; rt < RT; ++rt) {
    row[rt][0] = (blk0 + (warp * RT + rt) * 4) * 4 + g;
    row[rt][1] = row[rt][0] + 8;
  }
  const int lc = (W * t) / 16, off = (W * t) % 16;  // this lane's chunk in a span, byte offset
  const int xoff = lc * KPC + off;

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < stages) loadStage(s, s);
    mma::cpAsyncCommit();
  }
  for (int64_t st = 0; st < stages; ++st) {
    mma::cpAsyncWait<kStages - 2>();
    __syncthreads();
    const int64_t next = st + kStages - 1;
    if (next < stages) loadStage(static_cast<int>(next % kStages), next);
    mma::cpAsyncCommit();
    const uint8_t* xs = smem + (st % kStages) * STAGE;
    const uint8_t* ws = xs + kXStageBytes;
#pragma unroll 1
    for (int sp = 0; sp < SPS; ++sp) {
      const int64_t span = st * SPS + sp;
      if (span >= spans) break;
      // The A operand's words (signed bytes) of this span, and the rows' code sums.
      uint32_t lo[RT][2][WORDS], hi[RT][2][WORDS];
      int wss[RT][2];
      const int c = sp * CHUNKS + lc;
#pragma unroll
      for (int rt = 0; rt < RT; ++rt) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int b = (warp * RT + rt) * 4 + h * 2 + g / 4, r = g % 4;
          uint32_t w[WORDS];
          sharedWords<WORDS>(ws + ((b * CHS + c) * 4 + (r ^ (c & 2))) * 16 + off, w);
          wss[rt][h] = 0;
#pragma unroll
          for (int j = 0; j < WORDS; ++j) {
            if constexpr (BITS == 8) {
              lo[rt][h][j] = w[j];
              wss[rt][h] = byteSum(w[j], wss[rt][h]);
            } else {
              lo[rt][h][j] = nibblesToBytes(w[j]);
              hi[rt][h][j] = nibblesToBytes(w[j] >> 4);
              wss[rt][h] = byteSum(hi[rt][h][j], byteSum(lo[rt][h][j], wss[rt][h]));
            }
          }
        }
      }
      float sc[RT][2], zc[RT][2];
      if constexpr (GROUPED) {
        const int64_t grp = span * SPAN_K / a.group_size;
#pragma unroll
        for (int rt = 0; rt < RT; ++rt) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            wss[rt][h] += __shfl_xor_sync(0xFFFFFFFFu, wss[rt][h], 1);
            wss[rt][h] += __shfl_xor_sync(0xFFFFFFFFu, wss[rt][h], 2);
          }
          mma::rowScales(a.scales, a.zero_points, a.groups, grp, row[rt], a.n, sc[rt], zc[rt]);
        }
      } else {
#pragma unroll
        for (int rt = 0; rt < RT; ++rt) wsum[rt][0] += wss[rt][0], wsum[rt][1] += wss[rt][1];
      }
      // NTB column tiles at a time, their mmas interleaved (RT x NTB independent accumulators in a
      // row): two dependent mmas back to back left the H100's tensor pipe idle 2/3 of the time.
#pragma unroll
      for (int nt0 = 0; nt0 < kNT; nt0 += NTB) {
        uint32_t xq[NTB][RUNS][WORDS];
        float q0[NTB], q1[NTB];
        int zx0[NTB], zx1[NTB];
#pragma unroll
        for (int nb = 0; nb < NTB; ++nb) {
          const int nt = nt0 + nb, xr = nt * 8 + g;
#pragma unroll
          for (int run = 0; run < RUNS; ++run) {
            const int o = sp * SPAN_K + xoff + 16 * run;
            sharedWords<WORDS>(xs + xr * kStageK + (((o >> 4) ^ xSwizzle<BITS, W>(xr)) << 4) + (o & 15), xq[nb][run]);
          }
          int qs = 0;
          if constexpr (ZP) {
#pragma unroll
            for (int run = 0; run < RUNS; ++run) {
#pragma unroll
              for (int j = 0; j < WORDS; ++j) qs = byteSum(xq[nb][run][j], qs);
            }
            if constexpr (!GROUPED) qsum[nt] += qs;
          }
          q0[nb] = 0.0f, q1[nb] = 0.0f, zx0[nb] = 0, zx1[nb] = 0;
          if constexpr (GROUPED) {
            if constexpr (ZP) mma::columnSums(static_cast<float>(qs), t, q0[nb], q1[nb]);
            zx0[nb] = zx_s[nt * 8 + 2 * t], zx1[nb] = zx_s[nt * 8 + 2 * t + 1];
            q0[nb] -= static_cast<float>(zx0[nb] * SPAN_K), q1[nb] -= static_cast<float>(zx1[nb] * SPAN_K);
          }
        }
        // per channel the int32 sums accumulate in acc itself; per group in d, folded per span
        int d[RT][NTB][4];
#pragma unroll
        for (int rt = 0; rt < RT; ++rt) {
#pragma unroll
          for (int nb = 0; nb < NTB; ++nb) {
#pragma unroll
            for (int i = 0; i < 4; ++i) d[rt][nb][i] = GROUPED ? 0 : static_cast<int>(acc[rt][nt0 + nb][i]);
          }
        }
        if constexpr (BITS == 8) {
#pragma unroll
          for (int p = 0; p < WORDS / 2; ++p) {
#pragma unroll
            for (int nb = 0; nb < NTB; ++nb) {
#pragma unroll
              for (int rt = 0; rt < RT; ++rt) {
                const uint32_t fa[4] = {lo[rt][0][2 * p], lo[rt][1][2 * p], lo[rt][0][2 * p + 1], lo[rt][1][2 * p + 1]};
                mmaS8(d[rt][nb], fa, xq[nb][0][2 * p], xq[nb][0][2 * p + 1]);
              }
            }
          }
        } else {
#pragma unroll
          for (int j = 0; j < WORDS; ++j) {
#pragma unroll
            for (int nb = 0; nb < NTB; ++nb) {
#pragma unroll
              for (int rt = 0; rt < RT; ++rt) {
                const uint32_t fa[4] = {lo[rt][0][j], lo[rt][1][j], hi[rt][0][j], hi[rt][1][j]};
                mmaS8(d[rt][nb], fa, xq[nb][0][j], xq[nb][RUNS - 1][j]);
              }
            }
          }
        }
#pragma unroll
        for (int rt = 0; rt < RT; ++rt) {
#pragma unroll
          for (int nb = 0; nb < NTB; ++nb) {
#pragma unroll
            for (int i = 0; i < 4; ++i) {
              if constexpr (GROUPED) {
                const int h = i / 2, j = i % 2;
                const float e = static_cast<float>(d[rt][nb][i] - (j ? zx1[nb] : zx0[nb]) * wss[rt][h]);
                acc[rt][nt0 + nb][i] =
                    fmaf(sc[rt][h], ZP ? fmaf(-zc[rt][h], j ? q1[nb] : q0[nb], e) : e, acc[rt][nt0 + nb][i]);
              } else {
                acc[rt][nt0 + nb][i] = d[rt][nb][i];
              }
            }
          }
        }
      }
    }
  }
  mma::cpAsyncWait<0>();

  // Epilogue: the GEMV's per-channel scaling (per group it is done), then x's scale and the bias.
#pragma unroll
  for (int rt = 0; rt < RT; ++rt) {
    float sc[2] = {0.0f, 0.0f}, zc[2] = {0.0f, 0.0f};
    if constexpr (!GROUPED) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        wsum[rt][h] += __shfl_xor_sync(0xFFFFFFFFu, wsum[rt][h], 1);
        wsum[rt][h] += __shfl_xor_sync(0xFFFFFFFFu, wsum[rt][h], 2);
      }
      if constexpr (!Q8) mma::rowScales(a.scales, a.zero_points, 1, 0, row[rt], a.n, sc, zc);
    }
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) {
      float q0 = 0.0f, q1 = 0.0f;
      if constexpr (ZP && !GROUPED) mma::columnSums(static_cast<float>(qsum[nt]), t, q0, q1);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int h = i / 2, j = i % 2, tk = nt * 8 + 2 * t + j;
        const int64_t r = row[rt][h], tok = m0 + tk;
        if (r >= a.n || tok >= a.m) continue;
        if constexpr (Q8) {
          const int sum = acc[rt][nt][i] - zx_s[tk] * wsum[rt][h];
          static_cast<int8_t*>(a.y)[tok * a.n + r] =
              requantize(a.q8, a.scales[r], sum, a.bias != nullptr ? a.bias[r] : 0.0f, tok * a.n + r);
        } else {
          float y;
          if constexpr (GROUPED) {
            y = acc[rt][nt][i];
          } else {
            const float qq = (j ? q1 : q0) - static_cast<float>(zx_s[tk]) * static_cast<float>(a.k);
            const float e = static_cast<float>(acc[rt][nt][i] - zx_s[tk] * wsum[rt][h]);
            y = sc[h] * (ZP ? fmaf(-zc[h], qq, e) : e);
          }
          y = y * a.x.scales[tok];
          if (a.bias != nullptr) y += a.bias[r];
          storeOut(a.y, a.yt, tok * a.n + r, y);
        }
      }
    }
  }
}

template <int BITS, int W, int RT, bool GROUPED, bool ZP, bool Q8>
cudaError_t launchGemm(const DynGemv& a, cudaStream_t stream) {
  constexpr int KPC = BITS == 8 ? 16 : 32;
  constexpr int BLOCKS = kWarps * RT * 4;
  constexpr int bytes = kStages * (kXStageBytes + BLOCKS * (kStageK / KPC) * int(kChunkBytes));
  constexpr auto kernel = dynGemm<BITS, W, RT, GROUPED, ZP, Q8>;
  if (const cudaError_t e = allowSharedMemory<kernel>(bytes); e != cudaSuccess) return e;
  const int64_t chunks = a.k / KPC, spans = (chunks + W / 4 - 1) / (W / 4);
  const int64_t rows_per_block = BLOCKS * 4;
  const dim3 grid(static_cast<unsigned>((a.m + kTokens - 1) / kTokens),
                  static_cast<unsigned>((a.n + rows_per_block - 1) / rows_per_block));
  kernel<<<grid, kThreads, bytes, stream>>>(a, chunks, spans);
  return cudaGetLastError();
}

template <int BITS, int W, int RT, bool GROUPED>
cudaError_t byZeroPoints(const DynGemv& a, cudaStream_t stream) {
  if constexpr (BITS == 8 && !GROUPED) {
    if (a.q8.on) return launchGemm<8, W, RT, false, false, true>(a, stream);
  }
  return a.zero_points != nullptr ? launchGemm<BITS, W, RT, GROUPED, true, false>(a, stream)
                                  : launchGemm<BITS, W, RT, GROUPED, false, false>(a, stream);
}

template <int BITS, int RT>
cudaError_t bySpan(const DynGemv& a, cudaStream_t stream) {
  return withSpan<BITS>(a, [&](auto w, auto grouped) {
    return byZeroPoints<BITS, decltype(w)::value, RT, decltype(grouped)::value>(a, stream);
  });
}

}  // namespace

int64_t dynGemmMinRows() { return envOr("PT2Q_CUDA_GEMM_MIN_ROWS", kDynGemmMinRows); }

cudaError_t linearDynamicGemm(const DynGemv& a, cudaStream_t stream) {
  if (a.m == 0 || a.n == 0) return cudaSuccess;
  if (!linearDynamicGemvTakes(a.bits, a.groups, a.group_size)) return cudaErrorInvalidValue;
  if (a.q8.on && (a.bits != 8 || a.groups != 1 || a.zero_points != nullptr)) return cudaErrorInvalidValue;
  // 32 weight rows per warp (one block per multiprocessor) where that still gives every
  // multiprocessor a block; else 16 (two blocks each). On the H100 at 128 rows of x, 16 ran
  // 1.3-1.5x faster (16-56 blocks of 32 rows were too few); at 2048 the two were within 10 %.
  const int64_t wide_blocks = ((a.m + kTokens - 1) / kTokens) * ((a.n + 255) / 256);
  const bool wide = wide_blocks >= a.sm_count;
  if (hasWorkspace(a) && linearDynamicWgmmaTakes(a)) {
    // cudaErrorNotSupported: the driver could not describe the operands to the copy engine
    const cudaError_t e = linearDynamicWgmma(a, wide ? 256 : 128, stream);
    if (e != cudaErrorNotSupported) return e;
  }
  if (a.bits == 8) return wide ? bySpan<8, 2>(a, stream) : bySpan<8, 1>(a, stream);
  return wide ? bySpan<4, 2>(a, stream) : bySpan<4, 1>(a, stream);
}

}  // namespace pt2q::cuda
