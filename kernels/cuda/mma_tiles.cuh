// What the tensor-core GEMV kernels (linear_woq_mma_kernels.cu, linear_dynamic_cuda_kernels.cu)
// share: a warp owns a tile of 16 output rows (four packed 4-row blocks, kernels/README.md) over
// a range of K; the K range of a tile is split over the warps of its block when K is long, and
// the splits are summed in shared memory in a fixed order.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace pt2q::cuda::mma {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kUnroll = 4;  // spans whose weight loads a lane has in flight at once
constexpr int64_t kChunkBytes = 64;

// N 32-bit words from p (aligned to their total size), `fill` for a null p. stream: read once
// (weights), so evict first.
template <int N>
__device__ __forceinline__ void loadWords(const void* p, uint32_t (&w)[N], bool stream, uint32_t fill = 0) {
  if (p == nullptr) {
#pragma unroll
    for (int i = 0; i < N; ++i) w[i] = fill;
    return;
  }
  if constexpr (N % 4 == 0) {
#pragma unroll
    for (int i = 0; i < N / 4; ++i) {
      const uint4* q = static_cast<const uint4*>(p) + i;
      const uint4 v = stream ? __ldcs(q) : __ldg(q);
      w[4 * i] = v.x, w[4 * i + 1] = v.y, w[4 * i + 2] = v.z, w[4 * i + 3] = v.w;
    }
  } else if constexpr (N == 2) {
    const uint2* q = static_cast<const uint2*>(p);
    const uint2 v = stream ? __ldcs(q) : __ldg(q);
    w[0] = v.x, w[1] = v.y;
  } else {
    static_assert(N == 1);
    const uint32_t* q = static_cast<const uint32_t*>(p);
    w[0] = stream ? __ldcs(q) : __ldg(q);
  }
}

// A tile's two rows of a lane (g and g + 8): where their bytes `off` of chunk 0 lie in the packed
// weight (null for rows past the packed blocks), and their words of the kUnroll spans from `it`
// on, `fill` for spans at or past i1 and chunks past the last.
struct TileRows {
  const int8_t* base[2];

  __device__ __forceinline__ TileRows(const int8_t* packed, const int64_t (&row)[2], int64_t chunks, int64_t n, int off) {
    const int64_t nb = (n + 3) / 4;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      base[h] = row[h] / 4 < nb ? packed + (row[h] / 4) * chunks * kChunkBytes + (row[h] % 4) * 16 + off : nullptr;
    }
  }

  // The words of span `span` (`fill` at or past i1 and past the last chunk).
  template <int CHUNKS, int WORDS>
  __device__ __forceinline__ void loadSpan(int64_t span, int64_t i1, int lc, int64_t chunks, uint32_t (&w)[2][WORDS],
                                           uint32_t fill) const {
    const int64_t c = span * CHUNKS + lc;
    const bool ok = span < i1 && c < chunks;
#pragma unroll
    for (int h = 0; h < 2; ++h) loadWords(ok && base[h] != nullptr ? base[h] + c * kChunkBytes : nullptr, w[h], true, fill);
  }

  template <int CHUNKS, int WORDS>
  __device__ __forceinline__ void load(int64_t it, int64_t i1, int lc, int64_t chunks, uint32_t (&wr)[kUnroll][2][WORDS],
                                       uint32_t fill) const {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) loadSpan<CHUNKS>(it + u, i1, lc, chunks, wr[u], fill);
  }
};

// The group of a span: span / spans_per_group, without a 64-bit division per span (nvcc expands
// one into a long subroutine, a large share of a GEMV's work per span). hi64(span * m) with m =
// floor(2^64 / d) + 1 is exact whenever span * d < 2^64 (the error term span * (m - 2^64 / d) /
// 2^64 stays below 1 / d); d = 1 needs no division.
class SpanGroups {
 public:
  __device__ __forceinline__ explicit SpanGroups(int64_t spans_per_group)
      : m_(spans_per_group > 1 ? ~uint64_t(0) / static_cast<uint64_t>(spans_per_group) + 1 : 0) {}
  __device__ __forceinline__ int64_t of(int64_t span) const {
    return m_ != 0 ? static_cast<int64_t>(__umul64hi(static_cast<uint64_t>(span), m_)) : span;
  }

 private:
  uint64_t m_;  // 0: one span per group
};

// A lane's B operand words for one span: its row `tok` of x (elements of E bytes, rows of k) at
// chunk c, byte offset `off` of the lane; int4 spans take two runs 16 values apart (the low and
// high nibbles' k). Zeros past m rows or the last chunk.
template <int RUNS, int N, class E>
__device__ __forceinline__ void loadRuns(const E* x, int64_t k, int64_t tok, int64_t m, int64_t c, int64_t chunks,
                                         int k_per_chunk, int off, uint32_t (&xw)[RUNS][N]) {
#pragma unroll
  for (int r = 0; r < RUNS; ++r) {
    loadWords(tok < m && c < chunks ? x + tok * k + c * k_per_chunk + off + 16 * r : nullptr, xw[r], false);
  }
}

// The scale and zero point of the two rows for group grp (0 past n; zero points 0 without them).
__device__ __forceinline__ void rowScales(const float* scales, const float* zero_points, int64_t groups, int64_t grp,
                                          const int64_t (&row)[2], int64_t n, float (&s)[2], float (&z)[2]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const bool live = row[h] < n;
    s[h] = live ? __ldg(scales + row[h] * groups + grp) : 0.0f;
    z[h] = zero_points != nullptr && live ? __ldg(zero_points + row[h] * groups + grp) : 0.0f;
  }
}

// Warps per tile (the rest of the block's 8 warps take other tiles). One tile per block, K split
// over its 8 warps, when each warp still gets a full round of kUnroll spans: blocks are then the
// smallest unit of work, which spreads best over the multiprocessors (with 4 tiles per block,
// 896 tiles made 1.7 waves of 2 blocks per multiprocessor). Short K puts several tiles in a block.
inline int splitsFor(int64_t spans) {
  int splits = kWarps;
  while (splits > 1 && spans < int64_t(splits) * kUnroll) splits /= 2;
  return splits;
}

// x: tiles of output rows; y: 16-row slices of x.
inline dim3 gridFor(int64_t n, int64_t m, int splits) {
  const int64_t tiles = (n + 15) / 16, per_block = kWarps / splits;
  return dim3(static_cast<unsigned>((tiles + per_block - 1) / per_block), static_cast<unsigned>((m + 15) / 16));
}

// mma.m16n8k16 with fp32 accumulators on bf16 (BF16) or fp16 operands: c += a b.
template <bool BF16>
__device__ __forceinline__ void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (BF16) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// Where a thread of a tensor-core GEMV block is: its warp and lane, the lane's row group g and
// column pair t in the mma fragments, the warp's 16-row weight tile and its split of K (blocks of
// kWarps / splits tiles), and the block's 16-row slice of x (m0, m rows of it).
struct TileLane {
  int warp, lane, g, t, sp;
  int64_t tiles, tile, m0, m;
  __device__ __forceinline__ TileLane(int64_t n, int64_t rows, int splits)
      : warp(threadIdx.x / 32),
        lane(threadIdx.x % 32),
        g(lane >> 2),
        t(lane & 3),
        sp(warp % splits),
        tiles((n + 15) / 16),
        tile(static_cast<int64_t>(blockIdx.x) * (kWarps / splits) + warp / splits),
        m0(static_cast<int64_t>(blockIdx.y) * 16),
        m(min(rows - m0, int64_t(16))) {}
};

// This lane's 4 values of a per-lane quantity summed over the 4 lanes of its row (t = 0..3), then
// fetched for the C fragment's two columns 2t and 2t + 1.
__device__ __forceinline__ void columnSums(float own, int t, float& s0, float& s1) {
  own += __shfl_xor_sync(0xFFFFFFFFu, own, 1);
  own += __shfl_xor_sync(0xFFFFFFFFu, own, 2);
  s0 = __shfl_sync(0xFFFFFFFFu, own, 8 * t);
  s1 = __shfl_sync(0xFFFFFFFFu, own, 8 * t + 4);
}

// The warp's C fragments (rows g and g + 8, columns 2t and 2t + 1 of each 8-column tile) into
// shared memory, then the first warp of each tile sums its splits in order and hands out(row,
// column, sum) each of the tile's 16 x m results. Every thread of the block must call it. T: float,
// or int for sums that must stay exact.
template <int NT, class T, class Out>
__device__ __forceinline__ void finishTile(T (&part)[kWarps][16][NT * 8], const T (&acc)[NT][4], int sp,
                                           int splits, int64_t tile, int64_t tiles, int64_t n, int64_t m, Out out) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    part[warp][g][8 * nt + 2 * t] = acc[nt][0];
    part[warp][g][8 * nt + 2 * t + 1] = acc[nt][1];
    part[warp][g + 8][8 * nt + 2 * t] = acc[nt][2];
    part[warp][g + 8][8 * nt + 2 * t + 1] = acc[nt][3];
  }
  __syncthreads();
  if (sp != 0 || tile >= tiles) return;
  for (int idx = lane; idx < 16 * m; idx += 32) {
    const int r = idx % 16, col = idx / 16;
    const int64_t row = tile * 16 + r;
    if (row >= n) continue;
    T y = 0;
    for (int k = 0; k < splits; ++k) y += part[warp + k][r][col];
    out(row, col, y);
  }
}

// cp.async of 16 bytes into shared memory (L2 only), and its group commit / wait: the staging of
// the mma.sync GEMMs (linear_dynamic_gemm_kernels.cu, linear_woq_gemm_kernels.cu).
__device__ __forceinline__ void cpAsync16(void* smem, const void* gmem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(gmem));
}
__device__ __forceinline__ void cpAsyncCommit() { asm volatile("cp.async.commit_group;"); }
template <int N>
__device__ __forceinline__ void cpAsyncWait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N));
}

}  // namespace pt2q::cuda::mma
