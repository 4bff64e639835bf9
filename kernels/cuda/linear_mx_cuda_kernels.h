// Torch-free CUDA kernels of linear_mx that read the MX weight as mx_quantize stored it (codes
// [N, row_bytes], E8M0 scales [N, blocks]) and decode it in registers, instead of writing the
// whole weight out in fp32 for a matmul. Few rows of x (decode): GEMVs, on tensor cores for bf16 /
// fp16 x and byte or 4-bit codes (linear_mx_mma_kernels.cu), on CUDA cores otherwise
// (linear_mx_cuda_kernels.cu). More rows of bf16 x: a GEMM on Hopper's wgmma
// (linear_mx_wgmma_kernels.cu). The glue is kernels/cuda/linear_mx_cuda.cpp.
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

/// The most rows of x the wgmma GEMM takes by default for a weight of n rows (more: the weight
/// dequantized to bf16 for cuBLAS). On the H100 (bench_linear_mx_cuda.py, MXINT8 / MXFP8 / MXFP4)
/// the GEMM ran 1.14-2.21x that path's speed at 128 rows; at 256 rows 1.18-1.27x on N = 11008 /
/// 14336, 1.00-1.08x on 4096 x 11008, 0.84-0.89x on 4096 x 4096; at 512 rows 0.76-0.98x.
inline int64_t linearMxWgmmaMaxRows(int64_t n) { return n >= 8192 ? 256 : 128; }

/// Whether the wgmma GEMM takes `a` on this device: compute capability 9.0, bf16 x, byte or 4-bit
/// codes (two to a byte), blocks a whole number of 16 codes, code rows of a whole number of 16
/// bytes, codes and x 16-byte aligned.
bool linearMxWgmmaTakes(const LinearMxGemv& a);

/// Blocks of K per thread-block cluster (1 to 8) for `a` on `sm_count` multiprocessors.
int linearMxWgmmaSplits(const LinearMxGemv& a, int sm_count);

/// How the wgmma GEMM turns byte codes into bf16: by `table`, or by arithmetic for the formats
/// whose every code it gives exactly (the caller checks that against the table: mxByteDecode).
enum class MxDecode : int { kTable, kInt8, kE4M3, kE5M2 };

/// The arithmetic decode that gives every byte code's value in `values` (the format's 256 code
/// values, before the scale) exactly, else kTable.
MxDecode mxByteDecode(const float* values);

/// y = x @ W^T + bias for bf16 x, each weight value table[code] * 2^(scale - 127) as one bf16
/// (the reference's fp32 weight exactly, but below 2^-126, where bf16 is subnormal), products
/// summed in fp32 by wgmma, K split over `splits` blocks added in split order; rounded once to bf16.
/// 4-bit codes take kTable only.
cudaError_t linearMxWgmma(const LinearMxGemv& a, const MxHalfTable& table, MxDecode decode, int splits,
                          cudaStream_t stream);

}  // namespace pt2q::cuda
