// Torch-free max_pool2d_q8 on CUDA: one thread per output code, the window's maximum over the
// taps inside the input. The glue is kernels/cuda/pool_q8_cuda.cpp.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace pt2q::cuda {

struct MaxPoolQ8 {
  const void* x = nullptr;  // [planes, h, w] contiguous codes
  void* out = nullptr;      // [planes, oh, ow]
  bool is_signed = true;    // int8 or uint8
  int64_t planes = 0, h = 0, w = 0, oh = 0, ow = 0;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
};

cudaError_t maxPoolQ8(const MaxPoolQ8& a, cudaStream_t stream);

}  // namespace pt2q::cuda
