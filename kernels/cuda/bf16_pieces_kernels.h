// Torch-free CUDA kernel that writes fp16 or fp32 values as bf16 pieces whose sum is exact, so that
// cuBLAS's bf16 tensor-core GEMM with fp32 accumulation multiplies them by a bf16 weight without
// rounding x: x @ w = sum over pieces of piece @ w, every product exact in fp32 (8 significant
// bits times 8). Used by linear_mx past its decode GEMVs (kernels/cuda/linear_mx_cuda.cpp).
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "kernels/cuda/affine_cuda_kernels.h"

namespace pt2q::cuda {

/// Pieces per value: 2 for fp16 (11 significant bits), 3 for fp32 (24), 1 for bf16.
constexpr int bf16Pieces(FloatType t) { return t == FloatType::kF16 ? 2 : t == FloatType::kF32 ? 3 : 1; }

/// x: count values of type xt (fp16 or fp32, any alignment). out: bf16Pieces(xt) runs of count
/// bf16 values, piece p of x[i] at out[p * count + i]: piece 0 is x with its significand truncated
/// to bf16's 8 bits, each next piece the same of what is left. Their sum is x exactly for every
/// finite x whose pieces are bf16 normals or zero (every fp16; fp32 from |x| >= 2^-110); below
/// that, pieces under 2^-126 are bf16 subnormals and may lose bits (an absolute error under
/// 2^-124 per value). +-inf: piece 0 is x, the others 0. NaN: a NaN piece.
cudaError_t splitToBf16Pieces(const void* x, FloatType xt, int64_t count, void* out, cudaStream_t stream);

}  // namespace pt2q::cuda
