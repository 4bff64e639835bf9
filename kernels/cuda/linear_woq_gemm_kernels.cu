// linear_w8a16 / linear_w4a16 for many rows of bf16 / fp16 x (linear_woq_cuda_kernels.h): a
// tensor-core GEMM that dequantizes the packed weight in registers, so that the weight crosses
// memory once as codes instead of being written out in x's dtype and read back by cuBLAS.
//
// Numerics are the dequantize + F.linear path's (the CPU's from 64 rows on): each weight value is
// (code - zero point) * scale in fp32, rounded to x's dtype to nearest even, exactly as
// dequantWeight writes it; the mma multiplies it by x exactly and sums in fp32. Only the order of
// that sum differs from cuBLAS.
//
// A block owns 128 rows of x (the B operand: 16 tiles of 8 columns) and 128 weight rows (the A
// operand: 16 per warp) over a range of K, walked one span of 64 (int8) or 128 (int4) values at a
// time. Each span of x and of the packed weight is copied into shared memory by cp.async, a few
// spans ahead. A lane reads its rows' 16 bytes of a span (one chunk) as the GEMV does, and the
// k renaming of the GEMV (linear_woq_mma_kernels.cu) lets it decode them without shuffles: x is
// read under the same renaming.
//
// Few output tiles (128 rows of x by 4096 weight rows make 32) would leave most of the
// multiprocessors idle, so K is split over the blocks of a thread-block cluster (Hopper): each
// block leaves its fp32 sums in its shared memory, and after a cluster barrier block r adds the
// splits of its share of the tile's rows of x, in split order (deterministic), reading the
// others' shared memory directly. No workspace, no second kernel.
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/linear_woq_cuda_kernels.h"
#include "kernels/cuda/mma_tiles.cuh"
#include "kernels/cuda/smem_limit.h"
#include "kernels/cuda/woq_gemm.cuh"

namespace pt2q::cuda {
namespace {

namespace cg = cooperative_groups;

constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
constexpr int kTokens = 128;          // rows of x per block
constexpr int kNT = kTokens / 8;      // their 8-column tiles
constexpr int kRows = 16 * kWarps;    // weight rows per block
constexpr int kBlocks4 = kRows / 4;   // their packed 4-row blocks
constexpr int kWStage = kBlocks4 * 4 * 64;  // one span (4 chunks of 64 bytes) of those blocks
constexpr int kPartStride = kRows + 4;      // floats per row of x in the sums' staging
constexpr int kMaxSplits = 8;               // the portable cluster size

template <int BITS>
struct Geo {
  static constexpr int KPC = BITS == 8 ? 16 : 32;     // k values per chunk
  static constexpr int SPAN_K = 4 * KPC;              // k per span: 4 lanes of a row, a chunk each
  static constexpr int SLOTS = SPAN_K * 2 / 16;       // 16-byte slots of a row of x in a stage
  static constexpr int X_STAGE = kTokens * SPAN_K * 2;
  static constexpr int STAGE = X_STAGE + kWStage;
  // Two blocks per multiprocessor: 4 x 24 KiB (int8) or 2 x 40 KiB (int4) of stages each.
  static constexpr int STAGES = BITS == 8 ? 4 : 2;
  static constexpr int PART = kTokens * kPartStride * 4;
  static constexpr int SMEM = STAGES * STAGE > PART ? STAGES * STAGE : PART;
};

// A row's 16-byte slot in x's stage, XOR-ed so that the 8 lanes of one phase of a 16-byte load
// (rows g and g + 1, lanes t = 0..3 at slots 2t / 4t + 2r) hit distinct banks; int4 rows span 16
// slots, two per bank group, so bit 3 of the slot moves too.
template <int BITS>
__device__ __forceinline__ int xSlot(int row, int slot) {
  return slot ^ ((row & 1) | (BITS == 4 ? ((slot >> 3) & 1) << 1 : 0));
}

__device__ __forceinline__ void shared16(const uint8_t* p, uint32_t* w) {
  const uint4 v = *reinterpret_cast<const uint4*>(p);
  w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
}

// NTB: 8-column tiles of x whose mmas interleave (independent accumulators back to back).
template <int BITS, FloatType T, bool GROUPED, bool ZP, int NTB>
__global__ void __launch_bounds__(kThreads, 2) woqGemm(WoqGemv a, int chunks, int spans) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using G = Geo<BITS>;
  constexpr int RUNS = BITS == 8 ? 1 : 2;
  extern __shared__ __align__(16) uint8_t smem[];
  cg::cluster_group cluster = cg::this_cluster();
  const int splits = static_cast<int>(cluster.num_blocks()), z = static_cast<int>(cluster.block_rank());
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane >> 2, t = lane & 3;
  const int64_t m0 = static_cast<int64_t>(blockIdx.x) * kTokens;
  const int64_t blk0 = static_cast<int64_t>(blockIdx.y) * kBlocks4;  // first packed 4-row block
  const int64_t nb = (a.n + 3) / 4;
  const int per = (spans + splits - 1) / splits;
  const int s0 = min(spans, z * per), count = min(spans, s0 + per) - s0;

  // One span's copies: x (zeros past m and k) and the weight's blocks (zeros past n and k: x is
  // zero there, and those rows are never stored). A thread's copies are a fixed stride apart, so
  // it keeps one source pointer and stride per operand (addresses hoisted per copy spilled).
  constexpr int XR = kThreads / G::SLOTS;  // rows of x between a thread's copies
  const int xrow = tid / G::SLOTS, xslot = tid % G::SLOTS;
  const uint16_t* xsrc = static_cast<const uint16_t*>(a.x) + (m0 + xrow) * a.k + xslot * 8;
  const int64_t xstep = XR * a.k;
  const int xdst = xrow * (G::SLOTS * 16) + (xSlot<BITS>(xrow, xslot) << 4);  // XR is even
  const int wb = tid / 16, wc = (tid / 4) % 4, wr = tid % 4;
  const int8_t* wsrc = a.packed + ((blk0 + wb) * chunks + wc) * mma::kChunkBytes + wr * 16;
  const int64_t wstep = 16 * int64_t(chunks) * mma::kChunkBytes;  // 16 packed blocks
  const int wdst = ((wb * 4 + wc) * 4 + (wr ^ (wc & 2))) * 16;
  auto loadStage = [&](int buf, int span) {
    uint8_t* xs = smem + buf * G::STAGE;
    uint8_t* ws = xs + G::X_STAGE;
    const bool kx = static_cast<int64_t>(span) * G::SPAN_K + xslot * 8 < a.k;
#pragma unroll
    for (int j = 0; j < G::X_STAGE / 16 / kThreads; ++j) {
      uint8_t* dst = xs + xdst + j * XR * (G::SLOTS * 16);
      if (kx && m0 + xrow + j * XR < a.m) {
        mma::cpAsync16(dst, xsrc + j * xstep + static_cast<int64_t>(span) * G::SPAN_K);
      } else {
        *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
      }
    }
    const bool kw = span * 4 + wc < chunks;
#pragma unroll
    for (int j = 0; j < kWStage / 16 / kThreads; ++j) {
      uint8_t* dst = ws + wdst + j * 16 * (4 * 4 * 16);
      if (kw && blk0 + wb + 16 * j < nb) {
        mma::cpAsync16(dst, wsrc + j * wstep + static_cast<int64_t>(span) * 4 * mma::kChunkBytes);
      } else {
        *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
      }
    }
  };

  float acc[kNT][4];
#pragma unroll
  for (int nt = 0; nt < kNT; ++nt) {
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[nt][i] = 0.0f;
  }
  // The lane's rows g and g + 8 of the warp's 16; past n, the last row's scales (never stored).
  int64_t srow[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) srow[h] = min(blk0 * 4 + warp * 16 + g + 8 * h, a.n - 1) * a.groups;
  float sc[2], zc[2] = {0.0f, 0.0f};
  if constexpr (!GROUPED) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      sc[h] = __ldg(a.scales + srow[h]);
      if constexpr (ZP) zc[h] = __ldg(a.zero_points + srow[h]);
    }
  }

#pragma unroll
  for (int s = 0; s < G::STAGES - 1; ++s) {
    if (s < count) loadStage(s, s0 + s);
    mma::cpAsyncCommit();
  }
  for (int i = 0; i < count; ++i) {
    const int span = s0 + i;
    if constexpr (GROUPED) {
      // the lane's chunk lies in one group (the glue checks group_size % KPC == 0)
      const int64_t grp = static_cast<int64_t>(span * 4 + t) * G::KPC / a.group_size;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        sc[h] = __ldg(a.scales + srow[h] + grp);
        if constexpr (ZP) zc[h] = __ldg(a.zero_points + srow[h] + grp);
      }
    }
    mma::cpAsyncWait<G::STAGES - 2>();
    __syncthreads();
    const int next = i + G::STAGES - 1;
    if (next < count) loadStage(next % G::STAGES, s0 + next);
    mma::cpAsyncCommit();
    const uint8_t* xs = smem + (i % G::STAGES) * G::STAGE;
    const uint8_t* ws = xs + G::X_STAGE;
    uint32_t w[2][4];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int b = warp * 4 + h * 2 + g / 4, r = g % 4;
      shared16(ws + ((b * 4 + t) * 4 + (r ^ (t & 2))) * 16, w[h]);
    }
#pragma unroll
    for (int run = 0; run < RUNS; ++run) {
      // A fragments of mma j: values 4j, 4j + 1 (k 2t, 2t + 1 of the mma) and 4j + 2, 4j + 3
      // (k 2t + 8, 2t + 9) of the lane's chunk (this run), rows g and g + 8.
      uint32_t fa[4][4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float v[4];
#pragma unroll
          for (int b = 0; b < 4; ++b) v[b] = woq::dequant<ZP>(woq::codeOf<BITS>(w[h][j], b, run), sc[h], zc[h]);
          fa[j][h] = woq::pack2<T>(v[0], v[1]);
          fa[j][h + 2] = woq::pack2<T>(v[2], v[3]);
        }
      }
      const int slot0 = (t * G::KPC + 16 * run) / 8;  // the lane's 16 values of x: two slots
#pragma unroll
      for (int nt0 = 0; nt0 < kNT; nt0 += NTB) {
        uint32_t xw[NTB][8];
#pragma unroll
        for (int q = 0; q < NTB; ++q) {
          const int xr = (nt0 + q) * 8 + g;
          const uint8_t* row = xs + xr * (G::SLOTS * 16);
          shared16(row + (xSlot<BITS>(xr, slot0) << 4), xw[q]);
          shared16(row + (xSlot<BITS>(xr, slot0 + 1) << 4), xw[q] + 4);
        }
#pragma unroll
        for (int j = 0; j < 4; ++j) {
#pragma unroll
          for (int q = 0; q < NTB; ++q) mma::mma16816<T == FloatType::kBF16>(acc[nt0 + q], fa[j], xw[q][2 * j], xw[q][2 * j + 1]);
        }
      }
    }
  }
  mma::cpAsyncWait<0>();
  __syncthreads();

  // The block's sums into its shared memory ([row of x][weight row]), then each block of the
  // cluster finishes its share of the rows of x over all the splits.
  float* part = reinterpret_cast<float*>(smem);
#pragma unroll
  for (int nt = 0; nt < kNT; ++nt) {
#pragma unroll
    for (int i = 0; i < 4; ++i) part[(nt * 8 + 2 * t + (i & 1)) * kPartStride + warp * 16 + g + 8 * (i >> 1)] = acc[nt][i];
  }
  cluster.sync();
  woq::finishRows<T, kTokens, kPartStride>(cluster, part, a, m0, blk0 * 4, warp, kWarps, lane);
  cluster.sync();  // no block leaves while another still reads its shared memory
#else
  __trap();  // launched only on compute capability 9.0 and up (linearWeightOnlyGemm)
#endif
}

template <int BITS, FloatType T, bool GROUPED, bool ZP>
cudaError_t launchGemm(const WoqGemv& a, int splits, cudaStream_t stream) {
  using G = Geo<BITS>;
  constexpr int NTB = 2;
  constexpr auto kernel = woqGemm<BITS, T, GROUPED, ZP, NTB>;
  if (const cudaError_t e = allowSharedMemory<kernel>(G::SMEM); e != cudaSuccess) return e;
  const int chunks = static_cast<int>(a.k / G::KPC), spans = (chunks + 3) / 4;
  return woq::launchSplits(kernel, static_cast<unsigned>((a.m + kTokens - 1) / kTokens),
                           static_cast<unsigned>((a.n + kRows - 1) / kRows), splits, kThreads, G::SMEM, stream, a,
                           chunks, spans);
}

template <int BITS>
cudaError_t byType(const WoqGemv& a, int splits, cudaStream_t stream) {
  return woq::byLayout(a, [&](auto t, auto grouped, auto zp) {
    return launchGemm<BITS, decltype(t)::value, decltype(grouped)::value, decltype(zp)::value>(a, splits, stream);
  });
}

}  // namespace

bool linearWeightOnlyGemmTakes(const WoqGemv& a, int compute_major) {
  const int64_t kpc = a.bits == 8 ? 16 : 32;
  return compute_major >= 9 && a.xt != FloatType::kF32 && a.m > 0 && a.n > 0 && a.k % kpc == 0 &&
         a.k / kpc <= INT32_MAX - 3 && (a.groups == 1 || a.group_size % kpc == 0) &&
         reinterpret_cast<uintptr_t>(a.x) % 16 == 0;
}

int linearWeightOnlyGemmSplits(const WoqGemv& a) {
  // The largest power of two up to 8 that keeps the blocks within 3 per multiprocessor and 4
  // spans per split. Swept on the H100 at 64 and 128 rows (splits 1, 2, 4, 8): 8 was fastest for
  // 32 tiles (N = 4096), 4 for 86 (N = 11008); a cluster of 3 ran 1.3x slower than one of 4.
  const int64_t kpc = a.bits == 8 ? 16 : 32, spans = (a.k / kpc + 3) / 4;
  const int64_t tiles = ((a.m + kTokens - 1) / kTokens) * ((a.n + kRows - 1) / kRows);
  int splits = 1;
  while (splits < kMaxSplits && tiles * splits * 2 <= 3 * int64_t(a.sm_count) && spans >= 4 * splits * 2) splits *= 2;
  return splits;
}

cudaError_t linearWeightOnlyGemm(const WoqGemv& a, int splits, cudaStream_t stream) {
  if (splits < 1 || splits > kMaxSplits) return cudaErrorInvalidValue;
  return a.bits == 8 ? byType<8>(a, splits, stream) : byType<4>(a, splits, stream);
}

}  // namespace pt2q::cuda
