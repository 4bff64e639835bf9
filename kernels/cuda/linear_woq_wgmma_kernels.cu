// linear_w8a16 / linear_w4a16 for many rows of bf16 / fp16 x on Hopper's warpgroup mma (wgmma,
// sm_90a): the GEMM of linear_woq_gemm_kernels.cu with its numerics (each weight value as
// dequantWeight rounds it, products summed in fp32) and its split of K over a cluster, but the
// tensor cores read x straight from shared memory and the weight from registers.
//
// A block is two warpgroups, two blocks per multiprocessor. Each warpgroup owns 64 weight rows
// (the A operand, m64) against 128 rows of x (the B operand, n128); K goes in stages of 64 values.
// Thread 0 has the tensor copy engine bring each stage of x into a 128-byte-swizzled K-major tile
// (wgmma.cuh) and the stage's bytes of the packed weight blocks (4 rows x 64 bytes per chunk, as
// packed) into a plain tile, kStages buffers deep; it refills a buffer once both warpgroups have
// read it to the end.
//
// wgmma takes A from registers in the mma.sync fragment: lane (g, t) of a warp holds k 2t, 2t + 1
// and 2t + 8, 2t + 9 of a k16 step for rows g and g + 8. A packed chunk holds 16 consecutive k of a
// row (int8), or 32 (int4: byte b holds k b in its low and k 16 + b in its high nibble), so each
// lane reads the two 32-bit words of its row's chunk that hold its 4 bytes and decodes them in k
// order: x needs no renaming, and the copy engine's tile is wgmma's B operand as it lands.
//
// One k16 step: decode (8 values per lane, woq::GroupScale's fast decode where the group's scales
// allow it), then one m64n128k16 wgmma; the next step's decode overlaps it (A registers
// double-buffered, at most two wgmmas in flight).
#include <cuda.h>

#include <cooperative_groups.h>
#include <cstdint>

#include "kernels/cuda/linear_woq_cuda_kernels.h"
#include "kernels/cuda/smem_limit.h"
#include "kernels/cuda/tensor_map.h"
#include "kernels/cuda/wgmma.cuh"
#include "kernels/cuda/woq_gemm.cuh"

namespace pt2q::cuda {
namespace {

namespace cg = cooperative_groups;

constexpr int kThreads = 256;               // two warpgroups
constexpr int kTokens = 128;                // rows of x per block (wgmma's n)
constexpr int kRows = 128;                  // weight rows per block, 64 per warpgroup
constexpr int kStageK = 64;                 // k per stage: one 128-byte swizzled row of x
constexpr int kStages = 4;
constexpr int kXBytes = kTokens * kStageK * 2;
constexpr int kPartStride = kRows + 4;      // floats per row of x in the sums' staging
constexpr int kMaxSplits = 8;

template <int BITS>
struct Geo {
  static constexpr int KPC = BITS == 8 ? 16 : 32;           // k per chunk
  static constexpr int BLOCK_BYTES = kStageK / KPC * 64;    // one 4-row block's bytes per stage
  static constexpr int W_BYTES = kRows / 4 * BLOCK_BYTES;
  static constexpr int STAGE = kXBytes + W_BYTES;
  // stages, their barriers, and slack to align the swizzled tiles to 1024 bytes
  static constexpr int SMEM = kStages * STAGE + 2 * kStages * 8 + wgmma::kAtomBytes;
  static_assert(kTokens * kPartStride * 4 <= kStages * STAGE, "the sums' staging reuses the stages");
};

// Two blocks per multiprocessor (128 registers): sixteen warps, four per scheduler, to hide the
// latency of each warp's decode -> wgmma -> wait chain. A producer warp would make 9 warps a block,
// and a scheduler holding 5 of 18 warps would leave 102 registers; one consumer thread issues the
// copies instead.
template <int BITS, FloatType T, bool GROUPED, bool ZP>
__global__ void __launch_bounds__(kThreads, 2)
    woqWgmma(WoqGemv a, const __grid_constant__ CUtensorMap xmap, const __grid_constant__ CUtensorMap wmap,
             int stages_total) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using G = Geo<BITS>;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = smem_raw + ((wgmma::kAtomBytes - (__cvta_generic_to_shared(smem_raw) & (wgmma::kAtomBytes - 1))) &
                              (wgmma::kAtomBytes - 1));
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + kStages * G::STAGE);
  uint64_t* empty = full + kStages;
  cg::cluster_group cluster = cg::this_cluster();
  const int splits = static_cast<int>(cluster.num_blocks()), z = static_cast<int>(cluster.block_rank());
  const int tid = threadIdx.x;
  const int64_t m0 = static_cast<int64_t>(blockIdx.x) * kTokens;
  const int64_t blk0 = static_cast<int64_t>(blockIdx.y) * (kRows / 4);  // first packed 4-row block
  const int per = (stages_total + splits - 1) / splits;
  const int st0 = min(stages_total, z * per), count = min(stages_total, st0 + per) - st0;
  // Stage i of this block's share of K into buffer i % kStages, by the threads with `on` (one).
  auto load = [&](int i, bool on) {
    const int s = i % kStages, st = st0 + i;
    uint8_t* xs = smem + s * G::STAGE;
    wgmma::arriveExpectBytes(&full[s], G::STAGE, on);
    wgmma::copyBox2d(xs, &xmap, st * kStageK, static_cast<int>(m0), &full[s], on);
    wgmma::copyBox2d(xs + kXBytes, &wmap, st * G::BLOCK_BYTES, static_cast<int>(blk0), &full[s], on);
  };
  if (tid == 0) {
    for (int s = 0; s < kStages; ++s) {
      wgmma::barrierInit(&full[s], 1);
      wgmma::barrierInit(&empty[s], kThreads);
    }
    wgmma::barrierInitFence();
    for (int i = 0; i < min(kStages, count); ++i) load(i, true);
  }
  __syncthreads();

  float acc[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
  const int wg = tid / 128, warp = (tid % 128) / 32, lane = tid % 32, g = lane >> 2, t = lane & 3;
  {
    // The lane's rows g and g + 8 of its warp's 16: packed block (in the block's tile) and row in it.
    const int pb = wg * 16 + warp * 4 + g / 4, pr = g % 4;
    // Each row's scale (and zero point) of the current group, at so[h] in scales and zero_points;
    // grouped, the next group's are loaded a whole group ahead, so that no step waits on them.
    // (A split with no stages of K starts past the last group: clamped, it reads nothing out of range.)
    const int groups = static_cast<int>(a.groups);
    int grp = GROUPED ? static_cast<int>(min(static_cast<int64_t>(st0) * kStageK / a.group_size, a.groups - 1)) : 0;
    int64_t so[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) so[h] = min(blk0 * 4 + pb * 4 + 8 * h + pr, a.n - 1) * a.groups + grp;
    woq::GroupScale<BITS> gs[2];
    float ns[2] = {0.0f, 0.0f}, nz[2] = {0.0f, 0.0f};
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      gs[h] = woq::groupScale<BITS>(__ldg(a.scales + so[h]), ZP ? __ldg(a.zero_points + so[h]) : 0.0f);
    }
    auto prefetch = [&]() {
      if (grp + 1 < groups) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          ns[h] = __ldg(a.scales + so[h] + 1);
          if constexpr (ZP) nz[h] = __ldg(a.zero_points + so[h] + 1);
        }
      }
    };
    // Grouped: the k values left in the current group. Steps past K (in a last partial stage) keep
    // the last group: their x is zero.
    int left = GROUPED ? static_cast<int>((grp + 1) * a.group_size - static_cast<int64_t>(st0) * kStageK) : 0;
    if constexpr (GROUPED) prefetch();
    auto nextGroup = [&]() {
      ++grp;
      left = a.group_size;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        gs[h] = woq::groupScale<BITS>(ns[h], nz[h]);
        ++so[h];
      }
      prefetch();
    };
    // Groups of whole stages change only between stages: a stage is then decoded with one group's
    // scales throughout, and without a test per step where its warpgroup voted them all fast.
    const bool stageGroups = !GROUPED || a.group_size % kStageK == 0;
    // A vote of the warpgroup at its own named barrier (an immediate: a barrier id in a register
    // reserves all 16 of the block's, and two blocks would no longer fit a multiprocessor)
    auto voteFast = [&](bool p) { return wg == 0 ? wgmma::allOf<1>(p) : wgmma::allOf<2>(p); };
    bool fast = voteFast(gs[0].fast && gs[1].fast);
    const int sh = 16 * (t & 1), bo = 2 * (t & 1);  // the lane's bytes bo, bo + 1 of each word
    const int wo = 4 * (t / 2);                     // the lane's word offset in a row's chunk
    uint32_t fa[2][4];

    // One k16 step's A fragment (chunk c, run: int4's low nibbles' k16, then the high nibbles')
    // from the stage's words, by the fast decode or by codeOf + dequant.
    constexpr int CHUNKS = kStageK / G::KPC;
    auto decode = [&](uint32_t* f, const uint32_t (&lo)[CHUNKS][2], const uint32_t (&hi)[CHUNKS][2], int c, int run,
                      bool quick) {
      // int8 keeps codeOf + dequant: on the H100 its fast form (the same three instructions a
      // value, with more registers live) ran 5-10 % slower.
      if (BITS == 4 && quick) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          // the lane's two bytes moved to bits 0-15: nibbles at bits 0 / 4 (run 0 / 1) and 8 / 12
          const uint32_t l = lo[c][h] >> sh, u = hi[c][h] >> sh;
          float v[4];
          if (run == 0) {
            v[0] = woq::nibbleFast<0>(l, gs[h]);
            v[1] = woq::nibbleFast<0>(l >> 8, gs[h]);
            v[2] = woq::nibbleFast<0>(u, gs[h]);
            v[3] = woq::nibbleFast<0>(u >> 8, gs[h]);
          } else {
            v[0] = woq::nibbleFast<4>(l, gs[h]);
            v[1] = woq::nibbleFast<4>(l >> 8, gs[h]);
            v[2] = woq::nibbleFast<4>(u, gs[h]);
            v[3] = woq::nibbleFast<4>(u >> 8, gs[h]);
          }
          f[h] = woq::pack2<T>(v[0], v[1]);
          f[h + 2] = woq::pack2<T>(v[2], v[3]);
        }
      } else {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float sc = gs[h].s, zc = ZP ? a.zero_points[so[h]] : 0.0f;
          const float v0 = woq::dequant<ZP>(woq::codeOf<BITS>(lo[c][h], bo, run), sc, zc);
          const float v1 = woq::dequant<ZP>(woq::codeOf<BITS>(lo[c][h], bo + 1, run), sc, zc);
          const float v2 = woq::dequant<ZP>(woq::codeOf<BITS>(hi[c][h], bo, run), sc, zc);
          const float v3 = woq::dequant<ZP>(woq::codeOf<BITS>(hi[c][h], bo + 1, run), sc, zc);
          f[h] = woq::pack2<T>(v0, v1);
          f[h + 2] = woq::pack2<T>(v2, v3);
        }
      }
    };

    for (int i = 0; i < count; ++i) {
      const int s = i % kStages;
      if (i > 0) {
        // The previous stage's wgmmas are all done (one drain a stage: ptxas serializes every
        // wgmma (C7513) where the refill below sits among wgmmas in flight), so its buffer may
        // take stage j + kStages once the other warpgroup is done with it too.
        wgmma::drainRegA(acc, fa);
        const int j = i - 1;
        wgmma::arrive(&empty[j % kStages]);
        if (tid < 32 && j + kStages < count) {
          wgmma::waitParity(&empty[j % kStages], (j / kStages) & 1);
          load(j + kStages, tid == 0);
        }
      }
      wgmma::waitParity(&full[s], (i / kStages) & 1);
      const uint8_t* xs = smem + s * G::STAGE;
      const uint8_t* ws = xs + kXBytes;
      const uint64_t desc = wgmma::descriptor(xs);  // k16 step kk: + 2 kk (32 bytes, in 16s)
      // The stage's words of the lane's two rows, loaded before the first wgmma: each wgmma's
      // memory clobber would otherwise hold the next step's loads (and their latency) behind it.
      uint32_t lo[CHUNKS][2], hi[CHUNKS][2];
#pragma unroll
      for (int c = 0; c < CHUNKS; ++c) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const uint8_t* row = ws + (pb + 2 * h) * G::BLOCK_BYTES + c * 64 + pr * 16;
          lo[c][h] = *reinterpret_cast<const uint32_t*>(row + wo);
          hi[c][h] = *reinterpret_cast<const uint32_t*>(row + 8 + wo);
        }
      }
      if (GROUPED && stageGroups) {
        if (left == 0 && grp + 1 < groups) {
          nextGroup();
          fast = voteFast(gs[0].fast && gs[1].fast);
        }
        left -= kStageK;
      }
      if (stageGroups && fast) {  // uniform over the warpgroup, as its wgmmas must be
#pragma unroll
        for (int kk = 0; kk < kStageK / 16; ++kk) {
          decode(fa[kk % 2], lo, hi, BITS == 8 ? kk : kk / 2, BITS == 8 ? 0 : kk % 2, true);
          wgmma::stepRegA<T == FloatType::kF16>(acc, fa, kk, desc + 2 * kk);
        }
      } else {
#pragma unroll
        for (int kk = 0; kk < kStageK / 16; ++kk) {
          if (GROUPED && !stageGroups) {
            if (left == 0 && grp + 1 < groups) nextGroup();
            left -= 16;
          }
          decode(fa[kk % 2], lo, hi, BITS == 8 ? kk : kk / 2, BITS == 8 ? 0 : kk % 2, gs[0].fast && gs[1].fast);
          wgmma::stepRegA<T == FloatType::kF16>(acc, fa, kk, desc + 2 * kk);
        }
      }
    }
    wgmma::drainRegA(acc, fa);
  }
  __syncthreads();  // every copy has landed and been read: the stages may hold the sums

  float* part = reinterpret_cast<float*>(smem);
  wgmma::stageSums<kPartStride>(part, acc, wg, warp, g, t);
  cluster.sync();
  woq::finishRows<T, kTokens, kPartStride>(cluster, part, a, m0, blk0 * 4, tid / 32, 8, lane);
  cluster.sync();  // no block leaves while another still reads its shared memory
#endif
}

// x [m, k] in boxes of 64 k x 128 rows, 128-byte swizzled; the packed weight as rows of 4-row
// blocks ([nb, chunks * 64 bytes]) in boxes of one stage's bytes x 32 blocks. Zeros out of bounds.
bool encodeMaps(const WoqGemv& a, int block_bytes, CUtensorMap* xmap, CUtensorMap* wmap) {
  const wgmma::EncodeTiled encode = wgmma::encodeTiled();
  if (encode == nullptr) return false;
  const cuuint32_t ones[2] = {1, 1};
  const int64_t chunk_bytes = a.k / (a.bits == 8 ? 16 : 32) * 64;
  const cuuint64_t wdim[2] = {static_cast<cuuint64_t>(chunk_bytes), static_cast<cuuint64_t>((a.n + 3) / 4)};
  const cuuint64_t wstride[1] = {static_cast<cuuint64_t>(chunk_bytes)};
  const cuuint32_t wbox[2] = {static_cast<cuuint32_t>(block_bytes), kRows / 4};
  return wgmma::encodeHalfRows(encode, xmap, a.x, a.k, a.m, kStageK, kTokens) &&
         encode(wmap, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, const_cast<int8_t*>(a.packed), wdim, wstride, wbox, ones,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

template <int BITS, FloatType T, bool GROUPED, bool ZP>
cudaError_t launch(const WoqGemv& a, int splits, cudaStream_t stream) {
  using G = Geo<BITS>;
  CUtensorMap xmap, wmap;
  if (!encodeMaps(a, G::BLOCK_BYTES, &xmap, &wmap)) return cudaErrorNotSupported;
  constexpr auto kernel = woqWgmma<BITS, T, GROUPED, ZP>;
  if (const cudaError_t e = allowSharedMemory<kernel>(G::SMEM, /*whole=*/true); e != cudaSuccess) return e;
  const int stages_total = static_cast<int>((a.k + kStageK - 1) / kStageK);
  return woq::launchSplits(kernel, static_cast<unsigned>((a.m + kTokens - 1) / kTokens),
                           static_cast<unsigned>((a.n + kRows - 1) / kRows), splits, kThreads, G::SMEM, stream, a,
                           xmap, wmap, stages_total);
}

template <int BITS>
cudaError_t byType(const WoqGemv& a, int splits, cudaStream_t stream) {
  return woq::byLayout(a, [&](auto t, auto grouped, auto zp) {
    return launch<BITS, decltype(t)::value, decltype(grouped)::value, decltype(zp)::value>(a, splits, stream);
  });
}

}  // namespace

bool linearWeightOnlyWgmmaTakes(const WoqGemv& a) {
  const int64_t kpc = a.bits == 8 ? 16 : 32;
  if (a.xt == FloatType::kF32 || a.m <= 0 || a.n <= 0 || a.k % kpc != 0 || (a.groups != 1 && a.group_size % 16 != 0)) {
    return false;
  }
  // The copy engine wants 16-byte aligned bases and strides, and takes int32 coordinates.
  if (a.m > INT32_MAX || a.k > INT32_MAX / 2 || reinterpret_cast<uintptr_t>(a.x) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(a.packed) % 16 != 0) {
    return false;
  }
  // sm_90a code: a device that cannot load it keeps the mma.sync GEMM.
  return wgmma::runsHere<woqWgmma<8, FloatType::kBF16, false, false>>();
}

int linearWeightOnlyWgmmaSplits(const WoqGemv& a) {
  const int64_t stages = (a.k + kStageK - 1) / kStageK;
  const int64_t tiles = ((a.m + kTokens - 1) / kTokens) * ((a.n + kRows - 1) / kRows);
  return woq::clusterSplits(stages, tiles, a.sm_count, kMaxSplits);
}

cudaError_t linearWeightOnlyWgmma(const WoqGemv& a, int splits, cudaStream_t stream) {
  if (splits < 1 || splits > kMaxSplits || !linearWeightOnlyWgmmaTakes(a)) return cudaErrorInvalidValue;
  return a.bits == 8 ? byType<8>(a, splits, stream) : byType<4>(a, splits, stream);
}

}  // namespace pt2q::cuda
