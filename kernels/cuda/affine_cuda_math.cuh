// Device math of the affine CUDA kernels (affine_cuda_kernels.cu: one thread per element, any
// layout; affine_cuda_vec_kernels.cu: 8 elements per thread along the last dimension): the CPU
// microkernels' fp32 formulas, compiled with --fmad=false so mul and add round separately.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/affine_cuda_kernels.h"

namespace pt2q::cuda::affine {

template <typename T>
__device__ __forceinline__ float toFloat(T v);
template <>
__device__ __forceinline__ float toFloat<float>(float v) { return v; }
template <>
__device__ __forceinline__ float toFloat<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }
template <>
__device__ __forceinline__ float toFloat<__half>(__half v) { return __half2float(v); }

template <typename T>
__device__ __forceinline__ T fromFloat(float v);
template <>
__device__ __forceinline__ float fromFloat<float>(float v) { return v; }
template <>
__device__ __forceinline__ __nv_bfloat16 fromFloat<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <>
__device__ __forceinline__ __half fromFloat<__half>(float v) { return __float2half_rn(v); }

__device__ __forceinline__ int64_t qparamIndex(const Layout& l, int64_t i) {
  int64_t q = 0;
  for (int d = l.ndim - 1; d >= 0; --d) {
    const int64_t idx = i % l.sizes[d];
    i /= l.sizes[d];
    q += (idx / l.block[d]) * l.qstride[d];
  }
  return q;
}

struct Q {
  float s, z, minv;
};

// A Q with 1 / s (IEEE, the CPU's x * (1 / s)) held beside it, for kernels that reuse one Q over
// many elements. The flat kernels keep Q and divide where they multiply: moving their division
// into loadQ cost them 5-9 % on the H100 (same bits).
struct QInv : Q {
  float inv;
};

__device__ __forceinline__ float recipOf(const Q& q) { return 1.0f / q.s; }
__device__ __forceinline__ float recipOf(const QInv& q) { return q.inv; }

__device__ __forceinline__ Q loadQ(const float* scale, const float* zp, int64_t qi, Domain d, float mid) {
  Q q;
  q.s = scale[qi];
  q.z = zp ? zp[qi] : 0.0f;
  q.minv = (d == Domain::kFloat) ? q.z - q.s * mid : q.z;
  return q;
}

template <class QT>
__device__ __forceinline__ float unclamped(float x, const QT& q, Domain d, bool has_zp) {
  if (d == Domain::kFloat) return rintf((x - q.minv) / q.s);
  const float v = rintf(x * recipOf(q));
  return has_zp ? v + q.z : v;
}

// NaN -> lo, as the CPU kernels.
__device__ __forceinline__ float clampNanLow(float v, float lo, float hi) {
  v = (v > lo) ? v : lo;
  return (v < hi) ? v : hi;
}

__device__ __forceinline__ float dequant(float c, const Q& q, Domain d, bool has_zp, float mid) {
  if (d == Domain::kFloat) return (c - mid) * q.s + q.z;
  return has_zp ? (c - q.z) * q.s : c * q.s;
}

// The quantize arithmetic of one element: the unclamped code, as fp32.
__device__ __forceinline__ float codeMid(const Params& p) {
  return static_cast<float>(static_cast<double>(p.qmin + p.qmax + 1) / 2);
}

template <typename C, class QT>
__device__ __forceinline__ C quantizeOne(float x, const QT& q, const Params& p, bool has_zp) {
  const float v = clampNanLow(unclamped(x, q, p.domain, has_zp), static_cast<float>(p.qmin), static_cast<float>(p.qmax));
  // Through int64: fp32 rounds an int32 qmax of 2^31 - 1 up to 2^31.
  long long c = static_cast<long long>(v);
  c = c < p.qmin ? p.qmin : (c > p.qmax ? p.qmax : c);
  return static_cast<C>(c);
}

template <typename C>
__device__ __forceinline__ float dequantizeOne(C code, const Q& q, const Params& p, bool has_zp, float mid) {
  if (p.domain == Domain::kInt && has_zp) {
    return static_cast<float>(static_cast<double>(code) - static_cast<double>(q.z)) * q.s;
  }
  return dequant(static_cast<float>(code), q, p.domain, has_zp, mid);
}

// Fake-quantize of one element: the value (fp32, before the cast to T) and whether it was in range.
// kMaybeWide = false: the caller knows qmax - qmin <= 2^24 (the code range is exact in fp32).
template <bool kMaybeWide = true, class QT>
__device__ __forceinline__ float fakeQuantizeOne(float x, const QT& q, const Params& p, bool has_zp, float mid,
                                                 bool& in_range) {
  const float lo = static_cast<float>(p.qmin), hi = static_cast<float>(p.qmax);
  const float v = unclamped(x, q, p.domain, has_zp);
  in_range = v >= lo && v <= hi;
  if (kMaybeWide && p.domain == Domain::kInt && has_zp && p.qmax - p.qmin > (int64_t(1) << 24)) {
    // int32 codes: code - zp is not exact in fp32, so it is taken in double, as dequantize and
    // the CPU kernels do; the code goes through int64 because fp32 holds 2^31 for 2^31 - 1.
    long long c = static_cast<long long>(clampNanLow(v, lo, hi));
    c = c < p.qmin ? p.qmin : (c > p.qmax ? p.qmax : c);
    return static_cast<float>(static_cast<double>(c) - static_cast<double>(q.z)) * q.s;
  }
  // + 0 turns a -0 code (rint(-0.3)) into +0, as an integer code would be (as on CPU).
  const float c = __fadd_rn(clampNanLow(v, lo, hi), 0.0f);
  return dequant(c, q, p.domain, has_zp, mid);
}

}  // namespace pt2q::cuda::affine
