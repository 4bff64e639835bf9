// Grouped and depthwise conv2d_q8 (conv2d_q8_grouped_kernels.h). A block takes kThreads groups of
// J consecutive output pixels of one output plane (image, channel), one group per thread, so
// consecutive threads take consecutive output columns: their input bytes are consecutive
// (stride 1) or evenly spaced in one row, and their weight bytes are the same (one broadcast load
// a warp). A tap outside the input adds nothing, as the CPU's (zx - zx) w. Weights are read from
// the packed layout in place (row o of block o / 4 holds k kk at chunk kk / 16, byte kk % 16): a
// group's rows need no repacking.
// Index arithmetic is 32-bit but for the image's base (the glue keeps planes, pixels and an
// image's elements under 2^31); 3x3 kernels unroll their taps, so that a thread's loads are in
// flight together.
#include <algorithm>

#include "kernels/cuda/conv2d_q8_grouped_kernels.h"
#include "kernels/cuda/dyn_mma.cuh"

namespace pt2q::cuda {
namespace {

constexpr int kThreads = 128;

// CG: input channels per group when known at compile time (1: depthwise), else 0; K: a square
// kernel's size when known (3), else 0; J: consecutive outputs of a row per thread, which share
// the weight loads and the index arithmetic.
template <int CG, int K, int J>
__global__ void __launch_bounds__(kThreads) groupedConvQ8Kernel(GroupedConvQ8 a, int tiles) {
  const int kh = K > 0 ? K : static_cast<int>(a.kh), kw = K > 0 ? K : static_cast<int>(a.kw);
  const int cg = CG > 0 ? CG : static_cast<int>(a.c / a.groups), ocg = static_cast<int>(a.oc / a.groups);
  const int h = static_cast<int>(a.h), w = static_cast<int>(a.w), hw = h * w;
  const int ow = static_cast<int>(a.ow), ohw = static_cast<int>(a.oh) * ow, per_row = (ow + J - 1) / J;
  const int plane = static_cast<int>(blockIdx.x) / tiles;
  const int p = (static_cast<int>(blockIdx.x) - plane * tiles) * kThreads + static_cast<int>(threadIdx.x);
  if (p >= static_cast<int>(a.oh) * per_row) return;
  const int oc = static_cast<int>(a.oc), o = plane % oc, img = plane / oc;
  const int row = p / per_row, col0 = (p - row * per_row) * J;
  const int chunks = (cg * kh * kw + 15) / 16;
  const int8_t* wrow = a.packed + static_cast<int64_t>(o / 4) * chunks * 64 + (o % 4) * 16;
  const int8_t* xg = a.x + (static_cast<int64_t>(img) * a.c + static_cast<int64_t>(o / ocg) * cg) * hw;
  const int ih0 = row * static_cast<int>(a.sh) - static_cast<int>(a.ph);
  const int sw = static_cast<int>(a.sw), iw0 = col0 * sw - static_cast<int>(a.pw);
  const int dh = static_cast<int>(a.dh), dw = static_cast<int>(a.dw), zx = a.q8.zx;
  int sum[J];
#pragma unroll
  for (int j = 0; j < J; ++j) sum[j] = 0;
#pragma unroll(K > 0 ? K : 1)
  for (int ki = 0; ki < kh; ++ki) {
    const int ih = ih0 + ki * dh;
    if (static_cast<unsigned>(ih) >= static_cast<unsigned>(h)) continue;
#pragma unroll(K > 0 ? K : 1)
    for (int kj = 0; kj < kw; ++kj) {
      const int8_t* px = xg + ih * w;
      int kk = (ki * kw + kj) * cg;
      for (int ch = 0; ch < cg; ++ch, ++kk) {
        const int wv = __ldg(wrow + (kk >> 4) * 64 + (kk & 15));
#pragma unroll
        for (int j = 0; j < J; ++j) {
          const int iw = iw0 + j * sw + kj * dw;
          // Columns past the row's end (a last, partial group) read nothing and are not stored.
          if (static_cast<unsigned>(iw) < static_cast<unsigned>(w) && col0 + j < ow) {
            sum[j] += (static_cast<int>(__ldg(px + ch * hw + iw)) - zx) * wv;
          }
        }
      }
    }
  }
  const float s = __ldg(a.scales + o), b = a.bias != nullptr ? __ldg(a.bias + o) : 0.0f;
  const int64_t idx = static_cast<int64_t>(plane) * ohw + row * ow + col0;
#pragma unroll
  for (int j = 0; j < J; ++j) {
    if (col0 + j < ow) a.out[idx + j] = dyn::requantize(a.q8, s, sum[j], b, idx + j);
  }
}

// Four outputs a thread along rows of at least 8 (measured on the H100: see docs/perf_linear_cuda.md).
template <int CG, int K>
void byRow(const GroupedConvQ8& a, cudaStream_t stream) {
  const int j = a.ow >= 8 ? 4 : 1;
  const int64_t tiles = (a.oh * ((a.ow + j - 1) / j) + kThreads - 1) / kThreads;
  const auto blocks = static_cast<unsigned>(a.n * a.oc * tiles);
  if (j == 4) {
    groupedConvQ8Kernel<CG, K, 4><<<blocks, kThreads, 0, stream>>>(a, static_cast<int>(tiles));
  } else {
    groupedConvQ8Kernel<CG, K, 1><<<blocks, kThreads, 0, stream>>>(a, static_cast<int>(tiles));
  }
}

template <int CG>
void launch(const GroupedConvQ8& a, cudaStream_t stream) {
  if (a.kh == 3 && a.kw == 3) {
    byRow<CG, 3>(a, stream);
  } else {
    byRow<CG, 0>(a, stream);
  }
}

}  // namespace

bool groupedConvQ8Takes(const GroupedConvQ8& a) {
  if (a.groups < 1 || a.c % a.groups != 0 || a.oc % a.groups != 0 || a.c / a.groups * a.kh * a.kw > 65536) {
    return false;
  }
  const int64_t tiles = (a.oh * a.ow + kThreads - 1) / kThreads;
  // 32-bit indices: blocks, an image's elements, padded input coordinates
  return a.n * a.oc * tiles <= INT32_MAX && a.c * a.h * a.w <= INT32_MAX && a.oh * a.ow <= INT32_MAX &&
         a.h + a.w + a.sh * a.oh + a.sw * a.ow + a.dh * a.kh + a.dw * a.kw + a.ph + a.pw <= INT32_MAX;
}

cudaError_t groupedConvQ8(const GroupedConvQ8& a, cudaStream_t stream) {
  if (!groupedConvQ8Takes(a)) return cudaErrorInvalidValue;
  if (a.n * a.oc * a.oh * a.ow == 0) return cudaSuccess;
  if (a.c == a.groups) {
    launch<1>(a, stream);
  } else {
    launch<0>(a, stream);
  }
  return cudaGetLastError();
}

}  // namespace pt2q::cuda
