// Torch-free CUDA kernels of linear_mx for few rows of x (decode): GEMVs that read the MX weight
// as mx_quantize stored it (codes [N, row_bytes], E8M0 scales [N, blocks]) and decode it in
// registers, instead of writing the whole weight out in fp32 for a matmul: on tensor cores for
// bf16 / fp16 x and byte or 4-bit codes (linear_mx_mma_kernels.cu), on CUDA cores otherwise
// (linear_mx_cuda_kernels.cu). The glue is kernels/cuda/linear_mx_cuda.cpp.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "kernels/cuda/affine_cuda_kernels.h"
#include "kernels/cuda/mx_cuda_kernels.h"

namespace pt2q::cuda {

/// The most rows of x the CUDA-core GEMV takes (more: the tensor-core GEMV or dequantize + cuBLAS).
/// It reloads x per weight row, so its time grows with the rows: on the H100 at 16 rows it was
/// 0.84-2.14x the dequantize path's speed (MXFP4 slower than it on the wide shapes).
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

/// The most rows of x the tensor-core GEMV takes.
constexpr int64_t kLinearMxMmaMaxRows = 16;

/// Each code's value in x's 16-bit type (bf16 or fp16; exact, else the tensor-core GEMV does not
/// run): byte codes: code i's value in the low half of v[i]; 4-bit codes: byte i's low and high
/// nibbles' values in the low and high halves of v[i].
struct MxHalfTable {
  uint32_t v[256];
};

/// Whether the tensor-core GEMV takes `a`: bf16 / fp16 x, 1..kLinearMxMmaMaxRows rows, byte codes
/// or 4-bit codes packed two to a byte, K and the block a whole number of 32-code spans, codes 8-
/// (4-) byte aligned and x 16-byte aligned.
bool linearMxMmaTakes(const LinearMxGemv& a);

/// y = x @ (value(code) * 2^(scale - 127))^T + bias: exact products of codes and x summed in fp32 by
/// mma, each 32-code span's sum scaled by its block's power of two (as linearMxGemv scales its
/// chunks), the splits of K added in a fixed order; rounded once to x's dtype.
cudaError_t linearMxMma(const LinearMxGemv& a, const MxHalfTable& table, cudaStream_t stream);

/// Whether the GEMV takes `a`: 1..kLinearMxGemvMaxRows rows, codes of at most 8 bits, k a whole
/// number of 16-byte code chunks (12-byte for 6-bit codes) each inside one block, and the code
/// and x pointers aligned for those loads.
bool linearMxGemvTakes(const LinearMxGemv& a);

/// y = x @ (table[code] * 2^(scale - 127))^T + bias in fp32, in a fixed order (deterministic): the
/// reference's result within fp32 summation in another order, where no dequantized weight leaves
/// fp32's range (each block's sum is scaled once, as on CPU), rounded once to x's dtype. A NaN
/// scale (255) gives NaN in its output column.
cudaError_t linearMxGemv(const LinearMxGemv& a, const MxCodeTable& table, cudaStream_t stream);

}  // namespace pt2q::cuda
