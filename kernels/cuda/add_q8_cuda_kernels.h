// Torch-free add_q8 on CUDA: int8 codes a and b of the same shape (contiguous) give the codes of
// dq(a) + dq(b), with the CPU's fp32 steps (cpu/q8_requantize_impl.h) in the same order, so the
// two devices agree bit for bit. The glue is kernels/cuda/add_q8_cuda.cpp.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace pt2q::cuda {

struct AddQ8 {
  const int8_t* a = nullptr;
  const int8_t* b = nullptr;
  int8_t* out = nullptr;
  int64_t n = 0;
  float sa = 1.0f, za = 0.0f, sb = 1.0f, zb = 0.0f;           // dq(v) = (float(v) - z) * s
  float inv = 1.0f, zo = 0.0f, lo = -128.0f, hi = 127.0f;    // the output's quantization
  bool multiply = false;                                     // mul_q8: dq(a) * dq(b)
};

cudaError_t addQ8(const AddQ8& a, cudaStream_t stream);

}  // namespace pt2q::cuda
