// The tensor-core GEMV of linear_mx for bf16 / fp16 x (linear_mx_cuda_kernels.h): byte codes
// (MXINT8, MXFP8) and 4-bit codes (MXFP4, MXINT4) whose values are exact in x's type, as the
// A operand of mma.m16n8k16 in the way of the weight-only GEMV (mma_tiles.cuh): a warp owns 16
// weight rows over a range of K (split over the block's warps when K is long), a lane holds rows
// g and g + 8, and x's rows are the B operand's 8 columns (two column tiles for 9 to 16 rows).
//
// A "span" is 32 codes of a row: 4 lanes x 8 codes, inside one scale block (blocks are whole spans).
// A lane's 8 codes are contiguous in the row (8 bytes, or 4 of nibbles) but the A fragment wants
// each lane's 4 k positions per mma spread as 2t, 2t + 1, 2t + 8, 2t + 9; the sum over k does not
// care about the order, so mma j takes the lane's codes 4j..4j+3 as those positions and x is read
// under the same renaming (8 contiguous values of x per lane and span, words 2j and 2j + 1 for
// mma j). Codes become x's type by a table in shared memory: one 16-bit value per code for byte
// codes, the two values of a byte's nibbles as one word for 4-bit codes. The mma sums exact
// products in fp32; each span's sum is multiplied by its block's 2^(s - 127) in fp32, as the
// CUDA-core GEMV scales its chunk sums.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/aligned.h"
#include "kernels/cuda/linear_mx_cuda_kernels.h"
#include "kernels/cuda/mma_tiles.cuh"
#include "kernels/cuda/mx_numerics.cuh"

namespace pt2q::cuda {
namespace {

using mma::kThreads;
using mma::kUnroll;
using mma::kWarps;

constexpr int kSpanCodes = 32;

// BITS 8: lane bytes per span 8 (two words); BITS 4: 4 (one word).
template <int BITS>
struct Span {
  static constexpr int kLaneBytes = 8 * BITS / 8;
  static constexpr int kWords = kLaneBytes / 4;
};

// The A fragment words of row half h for mma j from the lane's span words: byte codes look up
// their 16-bit values and pair them; a byte of nibbles looks up its pair directly.
template <int BITS>
__device__ __forceinline__ void fragment(const uint32_t* tab, const uint32_t (&w)[Span<BITS>::kWords], int j,
                                         uint32_t& lo, uint32_t& hi) {
  if constexpr (BITS == 8) {
    const uint32_t v = w[j];  // codes 4j..4j+3
    const uint32_t c0 = tab[v & 0xFFu], c1 = tab[(v >> 8) & 0xFFu], c2 = tab[(v >> 16) & 0xFFu], c3 = tab[v >> 24];
    lo = __byte_perm(c0, c1, 0x5410);
    hi = __byte_perm(c2, c3, 0x5410);
  } else {
    const uint32_t v = w[0];  // bytes 2j, 2j + 1 hold codes 4j..4j+3
    lo = tab[(v >> (16 * j)) & 0xFFu];
    hi = tab[(v >> (16 * j + 8)) & 0xFFu];
  }
}

template <int BITS, FloatType T, int NT>
__global__ void __launch_bounds__(kThreads, 2) linearMxMmaKernel(LinearMxGemv a, MxHalfTable table, int splits,
                                                                 int spans) {
  using S = Span<BITS>;
  __shared__ uint32_t tab[256];
  __shared__ float part[kWarps][16][NT * 8];
  for (int i = threadIdx.x; i < 256; i += kThreads) tab[i] = table.v[i];
  __syncthreads();
  // blockIdx.y: which 16 rows of x (more than 16 rows re-read the weight tile, mostly from L2)
  const mma::TileLane at(a.n, a.m, splits);
  const int g = at.g, t = at.t, sp = at.sp;
  const int64_t tiles = at.tiles, tile = at.tile, m0 = at.m0, m = at.m;
  float acc[NT][4];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
    for (int q = 0; q < 4; ++q) acc[nt][q] = 0.0f;
  }
  if (tile < tiles) {
    const int per = (spans + splits - 1) / splits;
    const int i0 = sp * per, i1 = min(spans, i0 + per);
    const int spb = static_cast<int>(a.block / kSpanCodes);  // spans per scale block
    const uint8_t* wp[2];
    const uint8_t* sc[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      // rows past n read the last row (never stored)
      const int64_t row = min(tile * 16 + g + 8 * h, a.n - 1);
      wp[h] = a.codes + row * a.row_bytes + static_cast<int64_t>(i0) * 4 * S::kLaneBytes + t * S::kLaneBytes;
      sc[h] = a.scales + row * a.blocks;
    }
    const uint16_t* xp[NT];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const int64_t tok = min(int64_t(g + 8 * nt), m - 1);
      xp[nt] = static_cast<const uint16_t*>(a.x) + (m0 + tok) * a.k + static_cast<int64_t>(i0) * kSpanCodes + 8 * t;
    }
    int blk = i0 / spb, in_blk = i0 % spb;
    for (int it = i0; it < i1; it += kUnroll) {
      uint32_t w[kUnroll][2][S::kWords];
      uint32_t sb[kUnroll][2];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        if (it + u < i1) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            mma::loadWords(wp[h] + u * 4 * S::kLaneBytes, w[u][h], true);
            sb[u][h] = __ldg(sc[h] + blk);
          }
          if (++in_blk == spb) in_blk = 0, ++blk;
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        if (it + u >= i1) break;
        float d[NT][4];
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
          for (int q = 0; q < 4; ++q) d[nt][q] = 0.0f;
          uint32_t xw[4];
          mma::loadWords(xp[nt] + (it - i0 + u) * kSpanCodes, xw, false);
#pragma unroll
          for (int j = 0; j < 2; ++j) {
            uint32_t fa[4];
            fragment<BITS>(tab, w[u][0], j, fa[0], fa[2]);
            fragment<BITS>(tab, w[u][1], j, fa[1], fa[3]);
            mma::mma16816<T == FloatType::kBF16>(d[nt], fa, xw[2 * j], xw[2 * j + 1]);
          }
        }
        const float s0 = mxd::scaleValue(sb[u][0]), s1 = mxd::scaleValue(sb[u][1]);  // NaN for 255
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          acc[nt][0] = fmaf(d[nt][0], s0, acc[nt][0]);
          acc[nt][1] = fmaf(d[nt][1], s0, acc[nt][1]);
          acc[nt][2] = fmaf(d[nt][2], s1, acc[nt][2]);
          acc[nt][3] = fmaf(d[nt][3], s1, acc[nt][3]);
        }
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) wp[h] += kUnroll * 4 * S::kLaneBytes;
    }
  }
  mma::finishTile<NT>(part, acc, sp, splits, tile, tiles, a.n, m, [&](int64_t row, int tok, float y) {
    if (a.bias != nullptr) y += a.bias[row];
    const int64_t i = (m0 + tok) * a.n + row;
    if constexpr (T == FloatType::kBF16) {
      static_cast<__nv_bfloat16*>(a.y)[i] = __float2bfloat16_rn(y);
    } else {
      static_cast<__half*>(a.y)[i] = __float2half_rn(y);
    }
  });
}

template <int BITS, FloatType T>
cudaError_t launch(const LinearMxGemv& a, const MxHalfTable& table, cudaStream_t stream) {
  const int spans = static_cast<int>(a.k / kSpanCodes);
  const int splits = mma::splitsFor(spans);
  const dim3 grid = mma::gridFor(a.n, a.m, splits);
  if (a.m <= 8) {
    linearMxMmaKernel<BITS, T, 1><<<grid, kThreads, 0, stream>>>(a, table, splits, spans);
  } else {
    linearMxMmaKernel<BITS, T, 2><<<grid, kThreads, 0, stream>>>(a, table, splits, spans);
  }
  return cudaGetLastError();
}

template <int BITS>
cudaError_t byType(const LinearMxGemv& a, const MxHalfTable& table, cudaStream_t stream) {
  return a.xt == FloatType::kBF16 ? launch<BITS, FloatType::kBF16>(a, table, stream)
                                  : launch<BITS, FloatType::kF16>(a, table, stream);
}

}  // namespace

bool linearMxMmaTakes(const LinearMxGemv& a) {
  const bool bytes = a.packing.bits == 8 && a.packing.per_group == 1;
  const bool nibbles = a.packing.bits == 4 && a.packing.per_group == 2 && a.packing.group_bytes == 1;
  if (!(bytes || nibbles) || (a.xt != FloatType::kBF16 && a.xt != FloatType::kF16)) return false;
  if (a.m < 1 || a.m > kLinearMxMmaMaxRows || a.n < 1 || a.k < 1 || a.block < 1 || a.k % kSpanCodes != 0 ||
      a.block % kSpanCodes != 0) {
    return false;
  }
  if (a.k / kSpanCodes > INT32_MAX || a.row_bytes != a.k * a.packing.bits / 8) return false;
  if (a.blocks != (a.k + a.block - 1) / a.block) return false;
  return aligned(a.codes, bytes ? 8 : 4) && aligned(a.x, 16);
}

cudaError_t linearMxMma(const LinearMxGemv& a, const MxHalfTable& table, cudaStream_t stream) {
  if (!linearMxMmaTakes(a)) return cudaErrorInvalidValue;
  return a.packing.bits == 8 ? byType<8>(a, table, stream) : byType<4>(a, table, stream);
}

}  // namespace pt2q::cuda
