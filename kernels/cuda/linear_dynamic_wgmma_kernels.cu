// linear_w8a8 and linear_q8 for many rows of x on Hopper's warpgroup mma (wgmma, sm_90a): int8
// weights per channel without zero points, the layout of Int8DynActInt8WeightQuantizer, XNNPACK's
// dynamic config and the static int8 linears. Other layouts keep the mma.sync GEMM
// (linear_dynamic_gemm_kernels.cu): per-span scaling and weight zero points need more registers
// than wgmma's accumulators leave.
//
// A block is two consumer warpgroups and one producer warp: 128 rows of x (64 per warpgroup, the
// A operand) by TN = 256 or 128 weight rows (the B operand); D = x w^T is tokens x outputs, so the
// accumulators map straight to rows of y. K goes in stages of 128 values. The producer's first
// lane has the tensor copy engine bring each stage's x codes and weight rows into 128-byte-
// swizzled K-major tiles (wgmma.cuh), kStages buffers deep, through 2-D tensor maps over x's codes
// and over the weight unpacked to rows [n, k] (a workspace written, with the weight's row sums, by
// a small kernel before the GEMM: one pass over the weight); out-of-bounds parts arrive as zeros.
// Each stage is four m64nTNk32 wgmmas per warpgroup; one stage's wgmmas stay in flight while the
// next are issued, and a consumer releases a buffer once the wgmmas that read it are done.
//
// Numerics are the other GEMM's, bit for bit: the exact int32 sum of q w over K, then
// sum - zx * rowsum(w) (the row sums from the same small kernel), scaled in fp32 in the same order
// (W8A8) or requantized by the same steps (linear_q8, dyn::requantize).
#include <cuda.h>

#include <cstdint>

#include "kernels/cuda/dyn_mma.cuh"
#include "kernels/cuda/env.h"
#include "kernels/cuda/linear_dynamic_cuda_kernels.h"
#include "kernels/cuda/mma_tiles.cuh"
#include "kernels/cuda/smem_limit.h"
#include "kernels/cuda/tensor_map.h"
#include "kernels/cuda/wgmma.cuh"

namespace pt2q::cuda {
namespace {

using mma::kChunkBytes;

constexpr int kConsumers = 256;                // two warpgroups
constexpr int kThreads = kConsumers + 32;      // and the producer warp
constexpr int kTokens = 128;                   // rows of x per block, 64 per warpgroup
constexpr int kStageK = 128;                   // k values (bytes) per stage: one swizzled row
constexpr int kChunksPerStage = kStageK / 16;
constexpr int kStages = 4;
constexpr int kXBytes = kTokens * kStageK;

template <int TN>
__host__ __device__ constexpr int stageBytes() {
  return kXBytes + TN * kStageK;
}
// The stages, their 2 x kStages barriers, and slack to align the tiles to 1024 bytes.
template <int TN>
__host__ __device__ constexpr int smemBytes() {
  return kStages * stageBytes<TN>() + 2 * kStages * 8 + wgmma::kAtomBytes;
}

// Row sums of the packed int8 weight (zero codes pad the last 4-row block), and the weight unpacked
// to rows [n, k] for the copy engine: one warp per 4-row block; lane l reads 16-byte pieces l,
// l + 32, ... of the block's contiguous chunks, all of row l % 4.
__global__ void __launch_bounds__(256)
    weightRowSums(const int8_t* packed, int64_t n, int64_t chunks, int* out, int8_t* rows) {
  const int64_t blk = static_cast<int64_t>(blockIdx.x) * 8 + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (blk * 4 >= n) return;
  const uint4* p = reinterpret_cast<const uint4*>(packed + blk * chunks * kChunkBytes);
  const int64_t row = blk * 4 + lane % 4;
  int s = 0;
  for (int64_t i = lane; i < chunks * 4; i += 32) {
    const uint4 v = __ldg(p + i);
    s = dyn::byteSum(v.w, dyn::byteSum(v.z, dyn::byteSum(v.y, dyn::byteSum(v.x, s))));
    if (row < n) *reinterpret_cast<uint4*>(rows + row * chunks * 16 + (i / 4) * 16) = v;
  }
  s += __shfl_xor_sync(0xFFFFFFFFu, s, 4);
  s += __shfl_xor_sync(0xFFFFFFFFu, s, 8);
  s += __shfl_xor_sync(0xFFFFFFFFu, s, 16);
  if (lane < 4 && row < n) out[row] = s;
}

// Registers are allotted per scheduler (16384 each, in units of 256 a warp), and 9 warps put 3 on
// one of the four, so a thread may hold at most 168. __launch_bounds__(288, 1) would size the cap
// for 384 threads (168, spills at TN = 256); W8A8's cap of 176 compiles to 164. linear_q8 (Q8)
// runs at TN = 128 only, under 168 (162 used): its first instantiation, at TN = 256 with 222 and
// then 176 registers, did not launch ("too many resources requested for launch").
template <int TN, bool Q8>
__global__ void __maxnreg__(Q8 ? 168 : 176)
    dynWgmma(DynGemv a, const __grid_constant__ CUtensorMap xmap, const __grid_constant__ CUtensorMap wmap,
             int64_t chunks) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int STAGE = stageBytes<TN>();
  constexpr int R = TN / 2;  // accumulators per thread
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = smem_raw + ((wgmma::kAtomBytes - (__cvta_generic_to_shared(smem_raw) & (wgmma::kAtomBytes - 1))) &
                              (wgmma::kAtomBytes - 1));
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + kStages * STAGE);
  uint64_t* empty = full + kStages;
  const int tid = threadIdx.x;
  const int64_t m0 = static_cast<int64_t>(blockIdx.x) * kTokens;
  const int64_t blk0 = static_cast<int64_t>(blockIdx.y) * (TN / 4);  // first packed 4-row block
  const int stages = static_cast<int>((chunks + kChunksPerStage - 1) / kChunksPerStage);
  if (tid == kConsumers) {
    for (int s = 0; s < kStages; ++s) {
      wgmma::barrierInit(&full[s], 1);
      wgmma::barrierInit(&empty[s], kConsumers);
    }
    wgmma::barrierInitFence();
  }
  __syncthreads();

  if (tid >= kConsumers) {
    if (tid == kConsumers) {
      for (int st = 0; st < stages; ++st) {
        const int s = st % kStages;
        if (st >= kStages) wgmma::waitParity(&empty[s], ((st / kStages) - 1) & 1);
        uint8_t* xs = smem + s * STAGE;
        wgmma::arriveExpectBytes(&full[s], STAGE);
        wgmma::copyBox2d(xs, &xmap, st * kStageK, static_cast<int>(m0), &full[s]);
        wgmma::copyBox2d(xs + kXBytes, &wmap, st * kStageK, static_cast<int>(blk0 * 4), &full[s]);
      }
    }
    return;
  }

  const int wg = tid / 128;
  int acc[R];
#pragma unroll
  for (int i = 0; i < R; ++i) acc[i] = 0;
  for (int st = 0; st < stages; ++st) {
    const int s = st % kStages;
    wgmma::waitParity(&full[s], (st / kStages) & 1);
    const uint8_t* xs = smem + s * STAGE + wg * 64 * kStageK;
    const uint8_t* ws = smem + s * STAGE + kXBytes;
    wgmma::pin(acc);
    wgmma::fence();
#pragma unroll
    for (int kk = 0; kk < kStageK / 32; ++kk) {
      const uint64_t da = wgmma::descriptor(xs + kk * 32), db = wgmma::descriptor(ws + kk * 32);
      if constexpr (TN == 256) {
        wgmma::wgmmaS8N256(acc, da, db, 1);
      } else {
        wgmma::wgmmaS8N128(acc, da, db, 1);
      }
    }
    wgmma::commit();
    wgmma::wait<1>();  // the previous stage's wgmmas are done: its buffer may be refilled
    wgmma::pin(acc);
    if (st > 0) wgmma::arrive(&empty[(st - 1) % kStages]);
  }
  wgmma::wait<0>();
  wgmma::pin(acc);

  // Accumulator i of a thread: token 16 warp + g (+ 8 for i % 4 >= 2) of the warpgroup's 64,
  // output 8 (i / 4) + 2t (+ 1 for odd i).
  const int warp = (tid % 128) / 32, lane = tid % 32, g = lane >> 2, t = lane & 3;
  const int64_t n0 = blk0 * 4;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int64_t tok = m0 + wg * 64 + warp * 16 + g + 8 * h;
    if (tok >= a.m) continue;
    const int zx = Q8 ? a.q8.zx : a.x.zero_points[tok];
    const float sx = Q8 ? 0.0f : a.x.scales[tok];  // linear_q8: x's scale is in q8
#pragma unroll
    for (int i = 0; i < R / 4; ++i) {
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int64_t r = n0 + 8 * i + 2 * t + j;
        if (r >= a.n) continue;
        const int sum = acc[4 * i + 2 * h + j] - zx * a.row_sums[r];
        if constexpr (Q8) {
          static_cast<int8_t*>(a.y)[tok * a.n + r] =
              dyn::requantize(a.q8, a.scales[r], sum, a.bias != nullptr ? a.bias[r] : 0.0f, tok * a.n + r);
        } else {
          float y = a.scales[r] * static_cast<float>(sum);
          y = y * sx;
          if (a.bias != nullptr) y += a.bias[r];
          dyn::storeOut(a.y, a.yt, tok * a.n + r, y);
        }
      }
    }
  }
#endif
}

// x's codes [m, k] and the weight's rows [n, k] (unpacked by weightRowSums) in boxes of 128 k x
// 128 or TN rows, 128-byte swizzled, zeros out of bounds. (A 4-D map straight over the packed
// layout wrote outside its box in the 128-byte swizzle, likely laying 16-byte inner rows over 128
// bytes; without swizzle it was bit for bit but 1.6-2.1x slower on the H100: docs/perf_linear_cuda.md.)
bool encodeMaps(const DynGemv& a, int tn, CUtensorMap* xmap, CUtensorMap* wmap) {
  const wgmma::EncodeTiled encode = wgmma::encodeTiled();
  if (encode == nullptr) return false;
  const cuuint64_t stride[1] = {static_cast<cuuint64_t>(a.k)};
  const cuuint32_t ones[2] = {1, 1};
  auto map = [&](CUtensorMap* out, const int8_t* base, int64_t rows, int box_rows) {
    const cuuint64_t dim[2] = {static_cast<cuuint64_t>(a.k), static_cast<cuuint64_t>(rows)};
    const cuuint32_t box[2] = {kStageK, static_cast<cuuint32_t>(box_rows)};
    return encode(out, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, const_cast<int8_t*>(base), dim, stride, box, ones,
                  CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
  };
  return map(xmap, a.x.codes, a.m, kTokens) && map(wmap, a.weight_rows, a.n, tn);
}

template <int TN, bool Q8>
cudaError_t launch(const DynGemv& a, cudaStream_t stream) {
  CUtensorMap xmap, wmap;
  if (!encodeMaps(a, TN, &xmap, &wmap)) return cudaErrorNotSupported;
  constexpr auto kernel = dynWgmma<TN, Q8>;
  if (const cudaError_t e = allowSharedMemory<kernel>(smemBytes<TN>()); e != cudaSuccess) return e;
  const int64_t chunks = a.k / 16;
  weightRowSums<<<static_cast<unsigned>(((a.n + 3) / 4 + 7) / 8), 256, 0, stream>>>(a.packed, a.n, chunks,
                                                                                     a.row_sums, a.weight_rows);
  const dim3 grid(static_cast<unsigned>((a.m + kTokens - 1) / kTokens), static_cast<unsigned>((a.n + TN - 1) / TN));
  kernel<<<grid, kThreads, smemBytes<TN>(), stream>>>(a, xmap, wmap, chunks);
  return cudaGetLastError();
}

}  // namespace

bool hasWorkspace(const DynGemv& a) {
  return a.row_sums != nullptr && a.weight_rows != nullptr && reinterpret_cast<uintptr_t>(a.weight_rows) % 16 == 0;
}

bool linearDynamicWgmmaTakes(const DynGemv& a) {
  // Past 4096 weight rows the pass that unpacks the weight (n x k bytes written and read again)
  // outweighs the wgmma's gain at 256 rows (H100, tools/gpu/wgmma_probe.cu, the tile the op picks:
  // W8A8 14336 x 4096 107.1 us against the mma.sync GEMM's 87.7, 11008 x 4096 93.5 against 87.8;
  // linear_q8 0.90x on 11008 x 4096), not at 512 (1.13-1.38x on those shapes).
  // PT2Q_CUDA_WGMMA_MIN_ROWS overrides both (the probe).
  const int64_t min_rows = envOr("PT2Q_CUDA_WGMMA_MIN_ROWS", a.n > 4096 ? kDynWgmmaWideMinRows : kDynWgmmaMinRows);
  if (a.m < min_rows) return false;
  if (a.bits != 8 || a.groups != 1 || a.zero_points != nullptr) return false;
  // The copy engine wants 16-byte aligned bases and strides, and takes int32 coordinates.
  if (a.k % 16 != 0 || a.m > INT32_MAX || a.k > INT32_MAX || reinterpret_cast<uintptr_t>(a.x.codes) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(a.packed) % 16 != 0) {
    return false;
  }
  // The kernels exist for sm_90a only: a device that cannot load them keeps the other GEMM.
  return wgmma::runsHere<dynWgmma<256, false>>();
}

cudaError_t linearDynamicWgmma(const DynGemv& a, int tile_rows, cudaStream_t stream) {
  if (a.m == 0 || a.n == 0) return cudaSuccess;
  if (!linearDynamicWgmmaTakes(a) || !hasWorkspace(a) || (tile_rows != 128 && tile_rows != 256)) {
    return cudaErrorInvalidValue;
  }
  if (a.q8.on) return launch<128, true>(a, stream);
  return tile_rows == 256 ? launch<256, false>(a, stream) : launch<128, false>(a, stream);
}

}  // namespace pt2q::cuda
