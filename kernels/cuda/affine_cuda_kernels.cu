// CUDA kernels of the affine ops, one thread per element for any block layout (the fallback),
// and the entry points, which take the vectorized kernels (affine_cuda_vec_kernels.cu) wherever
// the last dimension and the pointers allow. The math is affine_cuda_math.cuh's, shared by both.
#include "kernels/cuda/affine_cuda_kernels.h"

#include "kernels/cuda/affine_cuda_math.cuh"
#include "kernels/cuda/affine_cuda_vec.h"

namespace pt2q::cuda {
namespace {

using namespace affine;  // NOLINT(build/namespaces): the shared device math and vecTakes

template <typename T, typename C>
__global__ void quantizeKernel(const T* x, C* out, int64_t n, Layout l, const float* scale, const float* zp,
                               Params p) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const Q q = loadQ(scale, zp, qparamIndex(l, i), p.domain, codeMid(p));
  out[i] = quantizeOne<C>(toFloat(x[i]), q, p, zp != nullptr);
}

template <typename C, typename T>
__global__ void dequantizeKernel(const C* q, T* out, int64_t n, Layout l, const float* scale, const float* zp,
                                 Params p) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float mid = codeMid(p);
  const Q qq = loadQ(scale, zp, qparamIndex(l, i), p.domain, mid);
  out[i] = fromFloat<T>(dequantizeOne(q[i], qq, p, zp != nullptr, mid));
}

template <typename T>
__global__ void fakeQuantizeKernel(const T* x, T* out, bool* mask, int64_t n, Layout l, const float* scale,
                                   const float* zp, Params p) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float mid = codeMid(p);
  const Q q = loadQ(scale, zp, qparamIndex(l, i), p.domain, mid);
  bool in_range;
  out[i] = fromFloat<T>(fakeQuantizeOne(toFloat(x[i]), q, p, zp != nullptr, mid, in_range));
  if (mask) mask[i] = in_range;
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
  const void* ptrs[] = {x, q};
  const int bytes[] = {floatBytes(xt), codeBytes(qt)};
  if (vecTakes(layout, vecOf(xt), ptrs, bytes, 2)) return quantizeVec(x, xt, q, qt, n, layout, scale, zp, p, stream);
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
  const void* ptrs[] = {q, y};
  const int bytes[] = {codeBytes(qt), floatBytes(yt)};
  if (vecTakes(layout, vecOf(yt), ptrs, bytes, 2)) return dequantizeVec(q, qt, y, yt, n, layout, scale, zp, p, stream);
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
  const void* ptrs[] = {x, y, mask};
  const int bytes[] = {floatBytes(xt), floatBytes(xt), 1};
  if (vecTakes(layout, vecOf(xt), ptrs, bytes, 3)) return fakeQuantizeVec(x, xt, y, mask, n, layout, scale, zp, p, stream);
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
