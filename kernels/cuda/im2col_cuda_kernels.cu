// im2col for conv2d_q8 (im2col_cuda_kernels.h). One thread per V bytes of a row: V = 4 when the
// channel count is a multiple of 4 (a word never straddles two taps), else 1. Each row's tail past
// k is written with zeros: the packed weight is zero there, so any value would do, but zeros keep
// the buffer deterministic for compute-sanitizer's initcheck.
#include <algorithm>
#include <type_traits>

#include "kernels/cuda/im2col_cuda_kernels.h"

namespace pt2q::cuda {
namespace {

template <int V>
__global__ void im2col(Im2ColQ8 a, int64_t total) {
  using Word = std::conditional_t<V == 4, uint32_t, uint8_t>;
  const int64_t k = a.kh * a.kw * a.c, ldv = a.ld / V;
  const Word padw = V == 4 ? static_cast<Word>(0x01010101u * static_cast<uint8_t>(a.pad)) : static_cast<Word>(static_cast<uint8_t>(a.pad));
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / ldv, j = (i % ldv) * V;
    Word v = 0;
    if (j < k) {
      const int64_t tap = j / a.c, ch = j % a.c;
      const int64_t ki = tap / a.kw, kj = tap % a.kw;
      const int64_t b = r / (a.oh * a.ow), p = r % (a.oh * a.ow);
      const int64_t ih = (p / a.ow) * a.sh - a.ph + ki * a.dh, iw = (p % a.ow) * a.sw - a.pw + kj * a.dw;
      v = ih >= 0 && ih < a.h && iw >= 0 && iw < a.w
              ? *reinterpret_cast<const Word*>(a.x + ((b * a.h + ih) * a.w + iw) * a.c + ch)
              : padw;
    }
    reinterpret_cast<Word*>(a.rows)[i] = v;
  }
}

}  // namespace

cudaError_t im2colQ8(const Im2ColQ8& a, cudaStream_t stream) {
  const int64_t rows = a.n * a.oh * a.ow;
  if (rows == 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const bool words = a.c % 4 == 0 && reinterpret_cast<uintptr_t>(a.x) % 4 == 0;
  const int64_t total = rows * (words ? a.ld / 4 : a.ld);
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((total + kThreads - 1) / kThreads, 65535 * 8));
  if (words) {
    im2col<4><<<blocks, kThreads, 0, stream>>>(a, total);
  } else {
    im2col<1><<<blocks, kThreads, 0, stream>>>(a, total);
  }
  return cudaGetLastError();
}

}  // namespace pt2q::cuda
