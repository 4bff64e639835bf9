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

}  // namespace pt2q::cuda
