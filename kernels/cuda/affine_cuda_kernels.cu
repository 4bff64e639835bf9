// CUDA kernels of the affine ops: one thread per element, the same fp32 formulas as the
// CPU microkernels (compiled with --fmad=false so mul and add round separately, as on CPU).
// Generic over the block layout; issue #8 replaces these with vectorized per-pattern kernels.
#include "kernels/cuda/affine_cuda_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace pt2q::cuda {
namespace {

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

__device__ __forceinline__ Q loadQ(const float* scale, const float* zp, int64_t qi, Domain d, float mid) {
  Q q;
  q.s = scale[qi];
  q.z = zp ? zp[qi] : 0.0f;
  q.minv = (d == Domain::kFloat) ? q.z - q.s * mid : q.z;
  return q;
}

__device__ __forceinline__ float unclamped(float x, const Q& q, Domain d, bool has_zp) {
  if (d == Domain::kFloat) return rintf((x - q.minv) / q.s);
  const float v = rintf(x * (1.0f / q.s));
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

template <typename T, typename C>
__global__ void quantizeKernel(const T* x, C* out, int64_t n, Layout l, const float* scale, const float* zp,
                               Params p) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float mid = static_cast<float>(static_cast<double>(p.qmin + p.qmax + 1) / 2);
  const Q q = loadQ(scale, zp, qparamIndex(l, i), p.domain, mid);
  const float v = clampNanLow(unclamped(toFloat(x[i]), q, p.domain, zp != nullptr), static_cast<float>(p.qmin),
                              static_cast<float>(p.qmax));
  // Through int64: fp32 rounds an int32 qmax of 2^31 - 1 up to 2^31.
  long long c = static_cast<long long>(v);
  c = c < p.qmin ? p.qmin : (c > p.qmax ? p.qmax : c);
  out[i] = static_cast<C>(c);
}

template <typename C, typename T>
__global__ void dequantizeKernel(const C* q, T* out, int64_t n, Layout l, const float* scale, const float* zp,
                                 Params p) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float mid = static_cast<float>(static_cast<double>(p.qmin + p.qmax + 1) / 2);
  const Q qq = loadQ(scale, zp, qparamIndex(l, i), p.domain, mid);
  float v;
  if (p.domain == Domain::kInt && zp != nullptr) {
    v = static_cast<float>(static_cast<double>(q[i]) - static_cast<double>(qq.z)) * qq.s;
  } else {
    v = dequant(static_cast<float>(q[i]), qq, p.domain, zp != nullptr, mid);
  }
  out[i] = fromFloat<T>(v);
}

template <typename T>
__global__ void fakeQuantizeKernel(const T* x, T* out, bool* mask, int64_t n, Layout l, const float* scale,
                                   const float* zp, Params p) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float mid = static_cast<float>(static_cast<double>(p.qmin + p.qmax + 1) / 2);
  const float lo = static_cast<float>(p.qmin), hi = static_cast<float>(p.qmax);
  const Q q = loadQ(scale, zp, qparamIndex(l, i), p.domain, mid);
  const bool has_zp = zp != nullptr;
  const float v = unclamped(toFloat(x[i]), q, p.domain, has_zp);
  // + 0 turns a -0 code (rint(-0.3)) into +0, as an integer code would be (as on CPU).
  const float c = __fadd_rn(clampNanLow(v, lo, hi), 0.0f);
  out[i] = fromFloat<T>(dequant(c, q, p.domain, has_zp, mid));
  if (mask) mask[i] = v >= lo && v <= hi;
}

constexpr int kThreads = 256;

unsigned gridFor(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

template <typename T>
cudaError_t quantizeTo(const T* x, void* q, CodeType qt, int64_t n, const Layout& l, const float* s, const float* z,
                       const Params& p, cudaStream_t st) {
  switch (qt) {
    case CodeType::kI8: quantizeKernel<<<gridFor(n), kThreads, 0, st>>>(x, static_cast<int8_t*>(q), n, l, s, z, p); break;
    case CodeType::kU8: quantizeKernel<<<gridFor(n), kThreads, 0, st>>>(x, static_cast<uint8_t*>(q), n, l, s, z, p); break;
    case CodeType::kI16: quantizeKernel<<<gridFor(n), kThreads, 0, st>>>(x, static_cast<int16_t*>(q), n, l, s, z, p); break;
    case CodeType::kU16: quantizeKernel<<<gridFor(n), kThreads, 0, st>>>(x, static_cast<uint16_t*>(q), n, l, s, z, p); break;
    case CodeType::kI32: quantizeKernel<<<gridFor(n), kThreads, 0, st>>>(x, static_cast<int32_t*>(q), n, l, s, z, p); break;
  }
  return cudaGetLastError();
}

template <typename C>
cudaError_t dequantizeFrom(const C* q, void* y, FloatType yt, int64_t n, const Layout& l, const float* s,
                           const float* z, const Params& p, cudaStream_t st) {
  switch (yt) {
    case FloatType::kF32: dequantizeKernel<<<gridFor(n), kThreads, 0, st>>>(q, static_cast<float*>(y), n, l, s, z, p); break;
    case FloatType::kBF16: dequantizeKernel<<<gridFor(n), kThreads, 0, st>>>(q, static_cast<__nv_bfloat16*>(y), n, l, s, z, p); break;
    case FloatType::kF16: dequantizeKernel<<<gridFor(n), kThreads, 0, st>>>(q, static_cast<__half*>(y), n, l, s, z, p); break;
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t quantizeAffine(const void* x, FloatType xt, void* q, CodeType qt, int64_t n, const Layout& layout,
                           const float* scale, const float* zp, const Params& p, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  switch (xt) {
    case FloatType::kF32: return quantizeTo(static_cast<const float*>(x), q, qt, n, layout, scale, zp, p, stream);
    case FloatType::kBF16: return quantizeTo(static_cast<const __nv_bfloat16*>(x), q, qt, n, layout, scale, zp, p, stream);
    case FloatType::kF16: return quantizeTo(static_cast<const __half*>(x), q, qt, n, layout, scale, zp, p, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t dequantizeAffine(const void* q, CodeType qt, void* y, FloatType yt, int64_t n, const Layout& layout,
                             const float* scale, const float* zp, const Params& p, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  switch (qt) {
    case CodeType::kI8: return dequantizeFrom(static_cast<const int8_t*>(q), y, yt, n, layout, scale, zp, p, stream);
    case CodeType::kU8: return dequantizeFrom(static_cast<const uint8_t*>(q), y, yt, n, layout, scale, zp, p, stream);
    case CodeType::kI16: return dequantizeFrom(static_cast<const int16_t*>(q), y, yt, n, layout, scale, zp, p, stream);
    case CodeType::kU16: return dequantizeFrom(static_cast<const uint16_t*>(q), y, yt, n, layout, scale, zp, p, stream);
    case CodeType::kI32: return dequantizeFrom(static_cast<const int32_t*>(q), y, yt, n, layout, scale, zp, p, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t fakeQuantizeAffine(const void* x, FloatType xt, void* y, bool* mask, int64_t n, const Layout& layout,
                               const float* scale, const float* zp, const Params& p, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  switch (xt) {
    case FloatType::kF32:
      fakeQuantizeKernel<<<gridFor(n), kThreads, 0, stream>>>(static_cast<const float*>(x), static_cast<float*>(y), mask, n, layout, scale, zp, p);
      break;
    case FloatType::kBF16:
      fakeQuantizeKernel<<<gridFor(n), kThreads, 0, stream>>>(static_cast<const __nv_bfloat16*>(x), static_cast<__nv_bfloat16*>(y), mask, n, layout, scale, zp, p);
      break;
    case FloatType::kF16:
      fakeQuantizeKernel<<<gridFor(n), kThreads, 0, stream>>>(static_cast<const __half*>(x), static_cast<__half*>(y), mask, n, layout, scale, zp, p);
      break;
  }
  return cudaGetLastError();
}

}  // namespace pt2q::cuda
