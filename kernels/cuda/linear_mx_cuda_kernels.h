// Torch-free CUDA kernel of linear_mx for few rows of x (decode): a GEMV that reads the MX weight
// as mx_quantize stored it (codes [N, row_bytes], E8M0 scales [N, blocks]) and decodes it in
// registers, instead of writing the whole weight out in fp32 for a matmul. The glue is
// kernels/cuda/linear_mx_cuda.cpp.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "kernels/cuda/affine_cuda_kernels.h"
#include "kernels/cuda/mx_cuda_kernels.h"

namespace pt2q::cuda {

/// The most rows of x the GEMV takes (more: dequantize + cuBLAS). It reloads x per weight row, so
/// its time grows with the rows: on the H100 at 16 rows it was 0.8-1.2x the dequantize path.
constexpr int64_t kLinearMxGemvMaxRows = 8;

struct LinearMxGemv {
  const uint8_t* codes = nullptr;   // [n, row_bytes]: one byte per code, or packed per `packing`
  int64_t row_bytes = 0;
  const uint8_t* scales = nullptr;  // [n, blocks] E8M0 bytes
  int64_t blocks = 0;
  int64_t block = 32;               // elements per scale along k (k itself for the whole axis)
  MxPacking packing;                // bits 8 (a byte per code), 6, 4 or 2 (packed, low bits first)
  const void* x = nullptr;          // [m, k] rows, contiguous, in xt
  FloatType xt = FloatType::kF32;
  int64_t m = 1, n = 0, k = 0;
  const float* bias = nullptr;      // [n] or null
  void* y = nullptr;                // [m, n] in xt
};

/// Whether the GEMV takes `a`: 1..kLinearMxGemvMaxRows rows, codes of at most 8 bits, k a whole
/// number of 16-byte code chunks (12-byte for 6-bit codes) each inside one block, and the code,
/// x and scale pointers aligned for those loads.
bool linearMxGemvTakes(const LinearMxGemv& a);

/// y = x @ (table[code] * 2^(scale - 127))^T + bias in fp32, in a fixed order (deterministic): the
/// reference's result within fp32 summation in another order, where no dequantized weight leaves
/// fp32's range (each block's sum is scaled once, as on CPU), rounded once to x's dtype. A NaN
/// scale (255) gives NaN in its output column.
cudaError_t linearMxGemv(const LinearMxGemv& a, const MxCodeTable& table, cudaStream_t stream);

}  // namespace pt2q::cuda
