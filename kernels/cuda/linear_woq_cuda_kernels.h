// Torch-free CUDA kernel of the weight-only linears (linear_w8a16, linear_w4a16) for few input
// rows (decode): a GEMV that streams the CPU's packed layouts ("n4k16" int8, "n4k32" int4;
// kernels/README.md, "Packed int8 weights") at 16 bytes per lane. The glue is
// kernels/cuda/linear_woq_cuda.cpp.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "kernels/cuda/affine_cuda_kernels.h"

namespace pt2q::cuda {

/// The most x rows the GEMV takes: fp32 x (CUDA cores) and bf16 / fp16 x (tensor cores, 16 rows
/// per slice of the grid); more go to the glue's other path.
constexpr int64_t kWoqGemvMaxRows = 16;
constexpr int64_t kWoqMmaMaxRows = 256;
/// The most rows the GEMM that dequantizes in registers takes (more: dequantize + cuBLAS). On the
/// H100 the wgmma GEMM ran 1.1-2.1x the dequantize + cuBLAS path at 256 rows, 0.6-0.7x at 2048.
constexpr int64_t kWoqGemmMaxRows = 256;

struct WoqGemv {
  const int8_t* packed = nullptr;  // pack_weight_int8 / pack_weight_int4's layout
  int bits = 8;
  int64_t n = 0, k = 0;  // k: a multiple of the chunk (16 or 32 values)
  int64_t groups = 1, group_size = 0;
  const float* scales = nullptr;  // [n, groups]
  const float* zero_points = nullptr;  // [n, groups] or null
  const void* x = nullptr;  // [m, k], 16-byte aligned rows
  FloatType xt = FloatType::kF32;
  int64_t m = 1;  // 1..kWoqGemvMaxRows (fp32 x) or kWoqMmaMaxRows
  const float* bias = nullptr;  // [n] or null
  void* y = nullptr;  // [m, n] in xt
  int sm_count = 132;  // multiprocessors, to size the split of K
};

/// y = x @ ((w - zp) * s)^T + bias, accumulated in fp32 in a fixed order (deterministic). bf16
/// and fp16 x go to linearWeightOnlyMma, fp32 x to a CUDA-core kernel.
cudaError_t linearWeightOnlyGemv(const WoqGemv& a, cudaStream_t stream);

/// The same on tensor cores (linear_woq_mma_kernels.cu): bf16 / fp16 x only. Exact products of
/// codes and x summed in fp32; the scale and zero point applied per span of a group.
cudaError_t linearWeightOnlyMma(const WoqGemv& a, cudaStream_t stream);

/// Whether the tensor-core GEMM (linear_woq_gemm_kernels.cu) takes `a` on a device of compute
/// capability `compute_major`.x: bf16 / fp16 x with 16-byte aligned rows, K a whole number of
/// chunks and groups of whole chunks, thread-block clusters (9.0 and up).
bool linearWeightOnlyGemmTakes(const WoqGemv& a, int compute_major);

/// The number of blocks (1 to 8, one cluster) that split K for `a` in the GEMM.
int linearWeightOnlyGemmSplits(const WoqGemv& a);

/// y = x @ dequantized(w)^T + bias with dequantize + F.linear's numerics: each weight value
/// rounded to x's dtype as dequantWeight writes it, products summed in fp32 (a fixed order per
/// `splits`), bias (x's dtype, widened) added before the final rounding. Any number of rows.
cudaError_t linearWeightOnlyGemm(const WoqGemv& a, int splits, cudaStream_t stream);

/// The same GEMM on Hopper's warpgroup mma (linear_woq_wgmma_kernels.cu, sm_90a code): whether
/// it takes `a` on the current device (compute capability 9.0, 16-byte aligned x and weight,
/// groups of whole k16 steps), its split of K, and the call (cudaErrorNotSupported when the
/// driver cannot describe the operands to the copy engine: use linearWeightOnlyGemm).
bool linearWeightOnlyWgmmaTakes(const WoqGemv& a);
int linearWeightOnlyWgmmaSplits(const WoqGemv& a);
cudaError_t linearWeightOnlyWgmma(const WoqGemv& a, int splits, cudaStream_t stream);

}  // namespace pt2q::cuda
