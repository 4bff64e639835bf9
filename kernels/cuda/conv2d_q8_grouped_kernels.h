// Torch-free grouped and depthwise conv2d_q8 on CUDA (groups > 1): a direct convolution, one thread
// per output code, exact int32 sums of (x - zx) w over the group's channels and the taps inside
// the input, then linear_q8's requantization (dyn_mma.cuh), so the codes are the CPU kernel's bit
// for bit. The im2col + GEMV path of groups = 1 would take one GEMV launch per group here, with
// rows of 9 bytes for a depthwise 3x3. The glue is kernels/cuda/linear_static_cuda.cpp.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "kernels/cuda/linear_dynamic_cuda_kernels.h"

namespace pt2q::cuda {

struct GroupedConvQ8 {
  const int8_t* x = nullptr;       // [n, c, h, w] contiguous codes
  const int8_t* packed = nullptr;  // pack_weight_int8 of [oc, k], k = kh * kw * (c / groups) in (kh, kw, c) order
  int64_t n = 0, c = 0, h = 0, w = 0, oc = 0, kh = 0, kw = 0, oh = 0, ow = 0;
  int64_t sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
  int64_t groups = 1;
  const float* scales = nullptr;  // [oc]
  const float* bias = nullptr;    // [oc] or null
  Q8Requant q8;                   // on is ignored: this kernel always requantizes; a residual is
                                  // [n, oc, oh, ow] contiguous, as out
  int8_t* out = nullptr;          // [n, oc, oh, ow] contiguous codes
};

/// Whether the kernel takes this convolution: k = kh * kw * c / groups <= 65536, so that the int32
/// sums are exact (the glue's kQ8MaxK), and its indices fit 32 bits (else the glue runs the reference).
bool groupedConvQ8Takes(const GroupedConvQ8& a);

cudaError_t groupedConvQ8(const GroupedConvQ8& a, cudaStream_t stream);

}  // namespace pt2q::cuda
