// The int8 tensor-core pieces that the dynamic linears' GEMV (linear_dynamic_cuda_kernels.cu) and
// GEMM (linear_dynamic_gemm_kernels.cu) share: int4 codes to signed bytes, the s8 mma, byte sums,
// the output store and linear_q8's requantization.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/linear_dynamic_cuda_kernels.h"

namespace pt2q::cuda::dyn {

// Signed bytes from 4 nibbles stored as v + 8: n ^ 8 is v's 4-bit two's complement; bit 3 times
// 0x1E spreads the sign over the byte's top nibble without carrying into the next byte.
__device__ __forceinline__ uint32_t nibblesToBytes(uint32_t w) {
  const uint32_t t = (w & 0x0F0F0F0Fu) ^ 0x08080808u;
  return t | ((t & 0x08080808u) * 0x1Eu);
}

__device__ __forceinline__ void mmaS8(int (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ int byteSum(uint32_t w, int acc) { return __dp4a(static_cast<int>(w), 0x01010101, acc); }

__device__ __forceinline__ void storeOut(void* y, FloatType yt, int64_t i, float v) {
  if (yt == FloatType::kF32) {
    static_cast<float*>(y)[i] = v;
  } else if (yt == FloatType::kBF16) {
    static_cast<__nv_bfloat16*>(y)[i] = __float2bfloat16_rn(v);
  } else {
    static_cast<__half*>(y)[i] = __float2half_rn(v);
  }
}

// linear_q8's output code idx (its index in y) from the exact sum: the CPU kernel's fp32 steps
// (kernels/cpu/linear_static_cpu.cpp), clamped before rounding so that |v| stays small.
__device__ __forceinline__ int8_t requantize(const Q8Requant& q, float s_w, int sum, float bias, int64_t idx) {
  if (q.residual != nullptr) {
    bias = __fadd_rn(bias, __fmul_rn(static_cast<float>(q.residual[idx]) - q.rz, q.rs));
  }
  const float y = __fadd_rn(__fmul_rn(__fmul_rn(s_w, static_cast<float>(sum)), q.sx), bias);
  const float v = fminf(fmaxf(__fmul_rn(y, q.inv), q.lo - q.zo - 1.0f), q.hi - q.zo + 1.0f);
  return static_cast<int8_t>(fminf(fmaxf(rintf(v) + q.zo, q.lo), q.hi));
}

// The span width W (bytes per lane per row per span) for a weight layout, handed to launch(W,
// GROUPED) as integral constants: a span never crosses a group, so per group W is the widest of
// 16 / 8 / 4 whose span divides the group; per channel it is 16. The GEMV and the GEMM share it.
template <int BITS, class Launch>
cudaError_t withSpan(const DynGemv& a, Launch launch) {
  using G = std::true_type;
  using C = std::false_type;
  if (a.groups == 1) return launch(std::integral_constant<int, 16>(), C());
  const int64_t per_byte = BITS == 8 ? 1 : 2;  // k values per byte
  if (a.group_size % (64 * per_byte) == 0) return launch(std::integral_constant<int, 16>(), G());
  if (BITS == 8 || a.group_size % 64 == 0) return launch(std::integral_constant<int, 8>(), G());
  if constexpr (BITS == 4) return launch(std::integral_constant<int, 4>(), G());
  return cudaErrorInvalidValue;
}

}  // namespace pt2q::cuda::dyn
