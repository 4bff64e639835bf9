// linear_mx for many rows of bf16 x on Hopper's warpgroup mma (wgmma, sm_90a): the weight's MX
// codes are decoded to bf16 in registers and fed to the tensor cores as the A operand, x comes by
// the copy engine into wgmma's B tile. The frame is the weight-only GEMM's
// (linear_woq_wgmma_kernels.cu): two warpgroups a block, two blocks per multiprocessor, each
// warpgroup 64 weight rows (m64) against 128 rows of x (n128), K in stages of 64 values, four
// stages deep, K split over a thread-block cluster and summed through distributed shared memory
// in split order (woq_gemm.cuh).
//
// Numerics: a weight value is table[code] * 2^(scale - 127), one bf16 multiply of two bf16
// values (the code's value is exact in bf16 for every format of at most 8 bits; the power of two
// is one too, 2^-127 as a subnormal, NaN for scale 255). The product is exact, so it is the
// reference's fp32 weight, except where that weight is below bf16's normal range (|w| < 2^-126,
// rounded there to bf16's subnormal step). wgmma sums the exact products in fp32, the splits are
// added in a fixed order, the fp32 bias joins and y is rounded once to bf16: the reference's result
// within fp32 summation in another order, deterministic. Unlike the GEMVs, which scale sums, a
// weight past fp32's range is inf here, as it is in the reference.
//
// The weight tile of a stage is 128 rows of the codes as stored (64 bytes a row for byte codes,
// 32 for nibbles), by the copy engine. wgmma's A fragment gives lane (g, t) of a warp k 2t, 2t + 1
// and 2t + 8, 2t + 9 of a k16 step for rows g and g + 8. Byte codes: 16 codes (one step) are one
// 16-byte slot of the row, the lane's pairs its bytes 2t, 2t + 1 and 8 + 2t, 9 + 2t; the tile is
// in the 64-byte swizzle (slot c of row r at r * 64 + 16 (c ^ (r / 2 % 4))), so that the 8 rows a
// load touches fall in different banks. A pair of byte codes becomes two bf16 by arithmetic for
// MXINT8, MXFP8-E4M3 and -E5M2 (MxDecode), else by two lookups in a table of code -> bf16 in shared
// memory (random codes: bank conflicts, and the wgmmas read x from the same memory). Nibbles
// (element 2i in bits 0-3 of byte i): a step is 8 bytes of the row and the lane's pairs are its
// bytes t and 4 + t, each one lookup in a table of byte -> bf16 pair.
#include <cuda.h>

#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cmath>
#include <cstdint>

#include "kernels/cuda/aligned.h"
#include "kernels/cuda/linear_mx_cuda_kernels.h"
#include "kernels/cuda/smem_limit.h"
#include "kernels/cuda/tensor_map.h"
#include "kernels/cuda/wgmma.cuh"
#include "kernels/cuda/woq_gemm.cuh"

namespace pt2q::cuda {
namespace {

namespace cg = cooperative_groups;

constexpr int kThreads = 256;          // two warpgroups
constexpr int kTokens = 128;           // rows of x per block (wgmma's n)
constexpr int kRows = 128;             // weight rows per block, 64 per warpgroup
constexpr int kStageK = 64;            // k per stage: one 128-byte swizzled row of x
constexpr int kSteps = kStageK / 16;   // k16 steps (wgmmas) per stage
constexpr int kStages = 4;
constexpr int kXBytes = kTokens * kStageK * 2;
constexpr int kPartStride = kRows + 4;  // floats per row of x in the sums' staging
constexpr int kMaxSplits = 8;

template <int BITS>
struct Geo {
  static constexpr int ROW_BYTES = kStageK * BITS / 8;  // one weight row's codes per stage
  static constexpr int W_BYTES = kRows * ROW_BYTES;
  static constexpr int STAGE = kXBytes + W_BYTES;
  static constexpr int TABLE = kStages * STAGE + 2 * kStages * 8;  // after the stages and barriers
  // the table, and slack to align the swizzled tiles to 1024 bytes
  static constexpr int SMEM = TABLE + 256 * 4 + wgmma::kAtomBytes;
  static_assert(kTokens * kPartStride * 4 <= kStages * STAGE, "the sums' staging reuses the stages");
  static_assert(STAGE % wgmma::kAtomBytes == 0, "every stage's x tile starts 1024-byte aligned");
};

// 2^(e - 127) as a pair of bf16: the exponent field is e itself, 2^-127 is bf16's subnormal 0x0040,
// and scale 255 is NaN.
__device__ __forceinline__ uint32_t pow2Pair(uint32_t e) {
  const uint32_t h = e == 255u ? 0x7FC0u : (e == 0u ? 0x0040u : e << 7);
  return h | (h << 16);
}

// Both halves multiplied, rounded once to nearest even (exact here but below 2^-126).
__device__ __forceinline__ uint32_t mulBf16x2(uint32_t a, uint32_t b) {
  uint32_t r;
  asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}

// Two byte codes (bits 0-7 and 8-15 of v; higher bits ignored) as a bf16 pair, the first in the
// low half, before the block's scale.
template <MxDecode D>
__device__ __forceinline__ uint32_t bytePair(const uint32_t* tab, uint32_t v) {
  if constexpr (D == MxDecode::kTable) {
    return __byte_perm(tab[v & 0xFFu], tab[(v >> 8) & 0xFFu], 0x5410);
  } else if constexpr (D == MxDecode::kInt8) {
    // The code + 128 in the mantissa of 2^23, then (that - (2^23 + 128)) 2^-6 in one exact fma.
    const uint32_t u = v ^ 0x8080u;
    const float lo = __fmaf_rn(__uint_as_float(__byte_perm(u, 0x4B000000u, 0x7640)), 0x1p-6f, -131074.0f);
    const float hi = __fmaf_rn(__uint_as_float(__byte_perm(u, 0x4B000000u, 0x7641)), 0x1p-6f, -131074.0f);
    const __nv_bfloat162 r = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&r);
  } else {
    // Each code in the high byte of its half; sign kept, exponent and mantissa moved down into
    // bf16's fields: the value times 2^-120 (E4M3) or 2^-112 (E5M2), subnormal codes as bf16
    // subnormals. The multiply back is exact.
    constexpr int kShift = D == MxDecode::kE4M3 ? 4 : 3;
    constexpr uint32_t kMag = D == MxDecode::kE4M3 ? 0x07F007F0u : 0x0FE00FE0u;
    constexpr uint32_t kBack = D == MxDecode::kE4M3 ? (127u + 120u) << 7 : (127u + 112u) << 7;
    const uint32_t x = __byte_perm(v, 0u, 0x1404);
    return mulBf16x2((x & 0x80008000u) | ((x >> kShift) & kMag), kBack | (kBack << 16));
  }
}

template <int BITS, MxDecode D>
__global__ void __launch_bounds__(kThreads, 2)
    mxWgmma(LinearMxGemv a, MxHalfTable table, const __grid_constant__ CUtensorMap xmap,
            const __grid_constant__ CUtensorMap wmap, int stages_total) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using G = Geo<BITS>;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = smem_raw + ((wgmma::kAtomBytes - (__cvta_generic_to_shared(smem_raw) & (wgmma::kAtomBytes - 1))) &
                              (wgmma::kAtomBytes - 1));
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + kStages * G::STAGE);
  uint64_t* empty = full + kStages;
  uint32_t* tab = reinterpret_cast<uint32_t*>(smem + G::TABLE);
  cg::cluster_group cluster = cg::this_cluster();
  const int splits = static_cast<int>(cluster.num_blocks()), z = static_cast<int>(cluster.block_rank());
  const int tid = threadIdx.x;
  for (int i = tid; i < 256; i += kThreads) tab[i] = table.v[i];
  const int64_t m0 = static_cast<int64_t>(blockIdx.x) * kTokens;
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * kRows;
  const int per = (stages_total + splits - 1) / splits;
  const int st0 = min(stages_total, z * per), count = min(stages_total, st0 + per) - st0;
  // Stage i of this block's share of K into buffer i % kStages, by the threads with `on` (one).
  auto load = [&](int i, bool on) {
    const int s = i % kStages, st = st0 + i;
    uint8_t* xs = smem + s * G::STAGE;
    wgmma::arriveExpectBytes(&full[s], G::STAGE, on);
    wgmma::copyBox2d(xs, &xmap, st * kStageK, static_cast<int>(m0), &full[s], on);
    wgmma::copyBox2d(xs + kXBytes, &wmap, st * G::ROW_BYTES, static_cast<int>(row0), &full[s], on);
  };
  if (tid == 0) {
    for (int s = 0; s < kStages; ++s) {
      wgmma::barrierInit(&full[s], 1);
      wgmma::barrierInit(&empty[s], kThreads);
    }
    wgmma::barrierInitFence();
    for (int i = 0; i < min(kStages, count); ++i) load(i, true);
  }
  __syncthreads();  // the barriers and the table

  float acc[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
  const int wg = tid / 128, warp = (tid % 128) / 32, lane = tid % 32, g = lane >> 2, t = lane & 3;
  {
    // The lane's rows g and g + 8 of its warp's 16, in the block's tile, and their scale rows
    // (rows past n read the last row's; never stored).
    int r[2];
    const uint8_t* sc[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      r[h] = wg * 64 + warp * 16 + g + 8 * h;
      sc[h] = a.scales + min(row0 + r[h], a.n - 1) * a.blocks;
    }
    // Which scale block the next step to be loaded falls in, and the steps left in it. Steps past K
    // (a last partial stage) keep the last block: their x is zero.
    const int64_t spb = a.block / 16;  // k16 steps per scale block
    const int64_t step0 = static_cast<int64_t>(st0) * kSteps;
    int64_t blk = step0 / spb, left = spb - step0 % spb;
    // The scale bytes of a stage's steps, step kk in byte kk: loaded a stage ahead of their use.
    auto stageScales = [&](uint32_t (&e)[2]) {
      e[0] = e[1] = 0;
#pragma unroll
      for (int kk = 0; kk < kSteps; ++kk) {
        const int64_t b = min(blk, a.blocks - 1);
#pragma unroll
        for (int h = 0; h < 2; ++h) e[h] |= static_cast<uint32_t>(__ldg(sc[h] + b)) << (8 * kk);
        if (--left == 0) ++blk, left = spb;
      }
    };
    uint32_t cur[2], nxt[2] = {0, 0};
    stageScales(cur);
    const int sh = 16 * (t & 1);  // byte codes: the lane's bytes 2t, 2t + 1 of a word at bit sh
    uint32_t fa[2][4];
    // The stage's code words of the lane's two rows (BITS 8: words t / 2 and 2 + t / 2 of each
    // step's slot; BITS 4: the row's 32 bytes).
    constexpr int WORDS = BITS == 8 ? 2 * kSteps : 8;
    uint32_t w[2][WORDS];

    // One k16 step's A fragment: each pair of codes as bf16 values times the block's power of two.
    auto decode = [&](uint32_t* f, int kk) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint32_t p = pow2Pair((cur[h] >> (8 * kk)) & 0xFFu);
        if constexpr (BITS == 8) {
          const uint32_t lo = w[h][2 * kk] >> sh, hi = w[h][2 * kk + 1] >> sh;
          f[h] = mulBf16x2(bytePair<D>(tab, lo), p);
          f[h + 2] = mulBf16x2(bytePair<D>(tab, hi), p);
        } else {
          f[h] = mulBf16x2(tab[(w[h][2 * kk] >> (8 * t)) & 0xFFu], p);
          f[h + 2] = mulBf16x2(tab[(w[h][2 * kk + 1] >> (8 * t)) & 0xFFu], p);
        }
      }
    };

    for (int i = 0; i < count; ++i) {
      const int s = i % kStages;
      if (i > 0) {
        // The previous stage's wgmmas are all done (a drain a stage, as in the weight-only GEMM:
        // ptxas serializes every wgmma where the refill sits among wgmmas in flight), so its buffer
        // may take stage j + kStages once the other warpgroup is done with it too.
        wgmma::drainRegA(acc, fa);
        const int j = i - 1;
        wgmma::arrive(&empty[j % kStages]);
        if (tid < 32 && j + kStages < count) {
          wgmma::waitParity(&empty[j % kStages], (j / kStages) & 1);
          load(j + kStages, tid == 0);
        }
        cur[0] = nxt[0], cur[1] = nxt[1];
      }
      if (i + 1 < count) stageScales(nxt);
      wgmma::waitParity(&full[s], (i / kStages) & 1);
      const uint8_t* xs = smem + s * G::STAGE;
      const uint8_t* ws = xs + kXBytes;
      const uint64_t desc = wgmma::descriptor(xs);  // k16 step kk: + 2 kk (32 bytes, in 16s)
      // Loaded before the first wgmma: each wgmma's memory clobber would otherwise hold the next
      // step's loads (and their latency) behind it.
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint8_t* row = ws + r[h] * G::ROW_BYTES;
        if constexpr (BITS == 8) {
          const int sw = (r[h] >> 1) & 3;  // the 64-byte swizzle of the row's slots
#pragma unroll
          for (int kk = 0; kk < kSteps; ++kk) {
            const uint32_t* slot = reinterpret_cast<const uint32_t*>(row + ((kk ^ sw) << 4));
            w[h][2 * kk] = slot[t / 2];
            w[h][2 * kk + 1] = slot[2 + t / 2];
          }
        } else {
          const uint4 q0 = *reinterpret_cast<const uint4*>(row), q1 = *reinterpret_cast<const uint4*>(row + 16);
          w[h][0] = q0.x, w[h][1] = q0.y, w[h][2] = q0.z, w[h][3] = q0.w;
          w[h][4] = q1.x, w[h][5] = q1.y, w[h][6] = q1.z, w[h][7] = q1.w;
        }
      }
#pragma unroll
      for (int kk = 0; kk < kSteps; ++kk) {
        decode(fa[kk % 2], kk);
        wgmma::stepRegA<false>(acc, fa, kk, desc + 2 * kk);
      }
    }
    wgmma::drainRegA(acc, fa);
  }
  __syncthreads();  // every copy has landed and been read: the stages may hold the sums

  float* part = reinterpret_cast<float*>(smem);
  wgmma::stageSums<kPartStride>(part, acc, wg, warp, g, t);
  cluster.sync();
  woq::finishRows<FloatType::kBF16, kTokens, kPartStride>(cluster, part, a, m0, row0, tid / 32, 8, lane);
  cluster.sync();  // no block leaves while another still reads its shared memory
#endif
}

// x [m, k] in boxes of 64 k x 128 rows, 128-byte swizzled; the codes [n, row_bytes] in boxes of one
// stage's bytes x 128 rows (byte codes in the 64-byte swizzle). Zeros out of bounds.
bool encodeMaps(const LinearMxGemv& a, int stage_bytes, CUtensorMap* xmap, CUtensorMap* wmap) {
  const wgmma::EncodeTiled encode = wgmma::encodeTiled();
  if (encode == nullptr) return false;
  const cuuint32_t ones[2] = {1, 1};
  const cuuint64_t wdim[2] = {static_cast<cuuint64_t>(a.row_bytes), static_cast<cuuint64_t>(a.n)};
  const cuuint64_t wstride[1] = {static_cast<cuuint64_t>(a.row_bytes)};
  const cuuint32_t wbox[2] = {static_cast<cuuint32_t>(stage_bytes), kRows};
  return wgmma::encodeHalfRows(encode, xmap, a.x, a.k, a.m, kStageK, kTokens) &&
         encode(wmap, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, const_cast<uint8_t*>(a.codes), wdim, wstride, wbox, ones,
                CU_TENSOR_MAP_INTERLEAVE_NONE,
                stage_bytes == 64 ? CU_TENSOR_MAP_SWIZZLE_64B : CU_TENSOR_MAP_SWIZZLE_NONE,
                CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

template <int BITS, MxDecode D>
cudaError_t launch(const LinearMxGemv& a, const MxHalfTable& table, int splits, cudaStream_t stream) {
  using G = Geo<BITS>;
  CUtensorMap xmap, wmap;
  if (!encodeMaps(a, G::ROW_BYTES, &xmap, &wmap)) return cudaErrorNotSupported;
  constexpr auto kernel = mxWgmma<BITS, D>;
  if (const cudaError_t e = allowSharedMemory<kernel>(G::SMEM, /*whole=*/true); e != cudaSuccess) return e;
  const int stages_total = static_cast<int>((a.k + kStageK - 1) / kStageK);
  return woq::launchSplits(kernel, static_cast<unsigned>((a.m + kTokens - 1) / kTokens),
                           static_cast<unsigned>((a.n + kRows - 1) / kRows), splits, kThreads, G::SMEM, stream, a,
                           table, xmap, wmap, stages_total);
}

}  // namespace

bool linearMxWgmmaTakes(const LinearMxGemv& a) {
  const bool bytes = a.packing.bits == 8 && a.packing.per_group == 1;
  const bool nibbles = a.packing.bits == 4 && a.packing.per_group == 2 && a.packing.group_bytes == 1;
  if (!(bytes || nibbles) || a.xt != FloatType::kBF16 || a.m < 1 || a.n < 1 || a.k < 1) return false;
  // Scale blocks of whole k16 steps; the copy engine wants 16-byte strides and aligned bases, and
  // takes int32 coordinates.
  if (a.block < 16 || a.block % 16 != 0 || a.blocks != (a.k + a.block - 1) / a.block) return false;
  if (a.row_bytes != a.k * a.packing.bits / 8 || a.row_bytes % 16 != 0) return false;
  if (a.m > INT32_MAX || a.n > INT32_MAX || a.k > INT32_MAX / 2 || !aligned(a.codes, 16) || !aligned(a.x, 16)) {
    return false;
  }
  // sm_90a code: elsewhere the caller dequantizes for cuBLAS.
  return wgmma::runsHere<mxWgmma<8, MxDecode::kTable>>();
}

MxDecode mxByteDecode(const float* values) {
  auto all = [&](auto value) {
    for (int c = 0; c < 256; ++c) {
      if (!(value(c) == values[c])) return false;
    }
    return true;
  };
  // the decodes of bytePair, written out: a code's value by its fields
  auto fp8 = [](int c, int mbits, int bias) {
    const int e = (c & 0x7F) >> mbits, m = c & ((1 << mbits) - 1);
    const float mag = e == 0 ? std::ldexp(static_cast<float>(m), 1 - bias - mbits)
                             : std::ldexp(1.0f + std::ldexp(static_cast<float>(m), -mbits), e - bias);
    return c & 0x80 ? -mag : mag;
  };
  if (all([](int c) { return std::ldexp(static_cast<float>(static_cast<int8_t>(c)), -6); })) return MxDecode::kInt8;
  if (all([&](int c) { return fp8(c, 3, 7); })) return MxDecode::kE4M3;
  if (all([&](int c) { return fp8(c, 2, 15); })) return MxDecode::kE5M2;
  return MxDecode::kTable;
}

int linearMxWgmmaSplits(const LinearMxGemv& a, int sm_count) {
  const int64_t stages = (a.k + kStageK - 1) / kStageK;
  const int64_t tiles = ((a.m + kTokens - 1) / kTokens) * ((a.n + kRows - 1) / kRows);
  return woq::clusterSplits(stages, tiles, sm_count, kMaxSplits);
}

cudaError_t linearMxWgmma(const LinearMxGemv& a, const MxHalfTable& table, MxDecode decode, int splits,
                          cudaStream_t stream) {
  if (splits < 1 || splits > kMaxSplits || !linearMxWgmmaTakes(a)) return cudaErrorInvalidValue;
  if (a.packing.bits == 4) {
    return decode == MxDecode::kTable ? launch<4, MxDecode::kTable>(a, table, splits, stream) : cudaErrorInvalidValue;
  }
  switch (decode) {
    case MxDecode::kInt8: return launch<8, MxDecode::kInt8>(a, table, splits, stream);
    case MxDecode::kE4M3: return launch<8, MxDecode::kE4M3>(a, table, splits, stream);
    case MxDecode::kE5M2: return launch<8, MxDecode::kE5M2>(a, table, splits, stream);
    default: return launch<8, MxDecode::kTable>(a, table, splits, stream);
  }
}

}  // namespace pt2q::cuda
