// Torch-free im2col of conv2d_q8 on CUDA: the int8 codes of a channels-last input become one row
// per output pixel, in the packed weight's (kh, kw, c) order, so that the linear_q8 GEMV
// (linear_dynamic_cuda_kernels.h, Q8Requant) computes the convolution. The glue is
// kernels/cuda/linear_static_cuda.cpp.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace pt2q::cuda {

struct Im2ColQ8 {
  const int8_t* x = nullptr;  // [n, h, w, c] contiguous
  int8_t* rows = nullptr;     // [n * oh * ow, ld]: row bytes k = kh * kw * c, then zeros up to ld
  int64_t n = 0, c = 0, h = 0, w = 0, kh = 0, kw = 0, oh = 0, ow = 0;
  int64_t sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
  int64_t ld = 0;  // a multiple of 16, at least k
  int8_t pad = 0;  // the code of a padded pixel: x's zero point (x - zp is then 0)
};

cudaError_t im2colQ8(const Im2ColQ8& a, cudaStream_t stream);

}  // namespace pt2q::cuda
