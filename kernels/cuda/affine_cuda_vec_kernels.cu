// Vectorized affine CUDA kernels (affine_cuda_vec.h). A thread takes V = 8 consecutive elements
// of one row of the last dimension (one 16-byte load of bf16 / fp16, two of fp32), the other
// dimensions' part of the qparam index computed once, and per element only the last dimension's
// part, by its block mode:
//   kShared: the block along the last dimension is a multiple of V (per tensor, per channel
//            along another axis, groups of 32 / 64 / 128 ...): one qparam for all V;
//   kEach:   block 1 (per channel along the last axis): consecutive qparams;
//   kAny:    any other block: one 32-bit division per element.
// The per-element arithmetic is affine_cuda_math.cuh's, so the bits are the scalar kernels'.
#include <type_traits>

#include "kernels/cuda/affine_cuda_math.cuh"
#include "kernels/cuda/affine_cuda_vec.h"

namespace pt2q::cuda::affine {
namespace {

enum class Mode { kShared, kEach, kAny };

template <typename T, int V>
struct alignas(sizeof(T) * V) Vec {
  T v[V];
};

constexpr int kThreads = 256;

// The qparam index of element (row part, column col) is base + (col / bl) * qs.
struct RowQ {
  int64_t base, col, bl, qs;

  __device__ __forceinline__ RowQ(const Layout& l, int64_t i) {
    const int last = l.ndim - 1;
    col = i % l.sizes[last];
    int64_t rest = i / l.sizes[last];
    base = 0;
    for (int d = last - 1; d >= 0; --d) {
      const int64_t idx = rest % l.sizes[d];
      rest /= l.sizes[d];
      base += (idx / l.block[d]) * l.qstride[d];
    }
    bl = l.block[last];
    qs = l.qstride[last];
  }

  template <Mode M>
  __device__ __forceinline__ int64_t at(int j) const {
    if constexpr (M == Mode::kShared) return base + (col / bl) * qs;
    if constexpr (M == Mode::kEach) return base + (col + j) * qs;
    return base + static_cast<int64_t>(static_cast<uint32_t>(col + j) / static_cast<uint32_t>(bl)) * qs;
  }
};

template <Mode M>
struct QCache {
  Q q;
  __device__ __forceinline__ const Q& get(const RowQ& r, int j, const float* scale, const float* zp, Domain d,
                                          float mid) {
    if (M != Mode::kShared || j == 0) q = loadQ(scale, zp, r.at<M>(j), d, mid);
    return q;
  }
};

template <typename T, typename C, Mode M, int V>
__global__ void __launch_bounds__(kThreads) quantizeVecKernel(const T* x, C* out, int64_t nv, Layout l,
                                                              const float* scale, const float* zp, Params p) {
  const int64_t v = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (v >= nv) return;
  const RowQ r(l, v * V);
  const Vec<T, V> in = reinterpret_cast<const Vec<T, V>*>(x)[v];
  Vec<C, V> o;
  QCache<M> qc;
  const float mid = codeMid(p);
#pragma unroll
  for (int j = 0; j < V; ++j) {
    o.v[j] = quantizeOne<C>(toFloat(in.v[j]), qc.get(r, j, scale, zp, p.domain, mid), p, zp != nullptr);
  }
  reinterpret_cast<Vec<C, V>*>(out)[v] = o;
}

template <typename C, typename T, Mode M, int V>
__global__ void __launch_bounds__(kThreads) dequantizeVecKernel(const C* q, T* out, int64_t nv, Layout l,
                                                                const float* scale, const float* zp, Params p) {
  const int64_t v = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (v >= nv) return;
  const RowQ r(l, v * V);
  const Vec<C, V> in = reinterpret_cast<const Vec<C, V>*>(q)[v];
  Vec<T, V> o;
  QCache<M> qc;
  const float mid = codeMid(p);
#pragma unroll
  for (int j = 0; j < V; ++j) {
    o.v[j] = fromFloat<T>(dequantizeOne(in.v[j], qc.get(r, j, scale, zp, p.domain, mid), p, zp != nullptr, mid));
  }
  reinterpret_cast<Vec<T, V>*>(out)[v] = o;
}

template <typename T, Mode M, int V>
__global__ void __launch_bounds__(kThreads) fakeQuantizeVecKernel(const T* x, T* out, bool* mask, int64_t nv,
                                                                  Layout l, const float* scale, const float* zp,
                                                                  Params p) {
  const int64_t v = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (v >= nv) return;
  const RowQ r(l, v * V);
  const Vec<T, V> in = reinterpret_cast<const Vec<T, V>*>(x)[v];
  Vec<T, V> o;
  Vec<bool, V> mk;
  QCache<M> qc;
  const float mid = codeMid(p);
#pragma unroll
  for (int j = 0; j < V; ++j) {
    bool in_range;
    o.v[j] = fromFloat<T>(
        fakeQuantizeOne(toFloat(in.v[j]), qc.get(r, j, scale, zp, p.domain, mid), p, zp != nullptr, mid, in_range));
    mk.v[j] = in_range;
  }
  reinterpret_cast<Vec<T, V>*>(out)[v] = o;
  if (mask != nullptr) reinterpret_cast<Vec<bool, V>*>(mask)[v] = mk;
}

Mode modeOf(const Layout& l, int vec) {
  const int64_t bl = l.block[l.ndim - 1];
  if (bl % vec == 0) return Mode::kShared;
  return bl == 1 ? Mode::kEach : Mode::kAny;
}

unsigned gridOf(int64_t nv) { return static_cast<unsigned>((nv + kThreads - 1) / kThreads); }

// Calls go(mode constant) with the layout's mode.
template <class F>
cudaError_t byMode(const Layout& l, int vec, F&& go) {
  switch (modeOf(l, vec)) {
    case Mode::kShared: go(std::integral_constant<Mode, Mode::kShared>()); break;
    case Mode::kEach: go(std::integral_constant<Mode, Mode::kEach>()); break;
    default: go(std::integral_constant<Mode, Mode::kAny>()); break;
  }
  return cudaGetLastError();
}

// Calls go(T*) with the float type's pointer.
template <class F>
void byFloat(FloatType t, void* p, F&& go) {
  switch (t) {
    case FloatType::kF32: go(static_cast<float*>(p)); break;
    case FloatType::kBF16: go(static_cast<__nv_bfloat16*>(p)); break;
    default: go(static_cast<__half*>(p)); break;
  }
}

template <class F>
void byCode(CodeType t, void* p, F&& go) {
  switch (t) {
    case CodeType::kI8: go(static_cast<int8_t*>(p)); break;
    case CodeType::kU8: go(static_cast<uint8_t*>(p)); break;
    case CodeType::kI16: go(static_cast<int16_t*>(p)); break;
    case CodeType::kU16: go(static_cast<uint16_t*>(p)); break;
    default: go(static_cast<int32_t*>(p)); break;
  }
}

}  // namespace

int floatBytes(FloatType t) { return t == FloatType::kF32 ? 4 : 2; }

int codeBytes(CodeType t) {
  switch (t) {
    case CodeType::kI8:
    case CodeType::kU8: return 1;
    case CodeType::kI16:
    case CodeType::kU16: return 2;
    default: return 4;
  }
}

bool vecTakes(const Layout& l, int vec, const void* const* ptrs, const int* elem_bytes, int n_ptrs) {
  if (l.ndim < 1 || l.sizes[l.ndim - 1] % vec != 0 || l.block[l.ndim - 1] <= 0) return false;
  if (modeOf(l, vec) == Mode::kAny && l.sizes[l.ndim - 1] > 0xFFFFFFFFLL) return false;
  for (int i = 0; i < n_ptrs; ++i) {
    if (ptrs[i] != nullptr && reinterpret_cast<uintptr_t>(ptrs[i]) % (elem_bytes[i] * vec) != 0) return false;
  }
  return true;
}

// Calls go(V constant) with the float type's vector length (vecOf: 8 for every type; the kernels
// take any V, which is how 16 per thread was tried).
template <class F>
void byVec(FloatType, F&& go) {
  go(std::integral_constant<int, kVec>());
}

cudaError_t quantizeVec(const void* x, FloatType xt, void* q, CodeType qt, int64_t n, const Layout& l,
                        const float* scale, const float* zp, const Params& p, cudaStream_t stream) {
  return byMode(l, vecOf(xt), [&](auto mode) {
    byVec(xt, [&](auto vec) {
      byFloat(xt, const_cast<void*>(x), [&](auto* xp) {
        byCode(qt, q, [&](auto* qp) {
          using T = std::remove_pointer_t<decltype(xp)>;
          using C = std::remove_pointer_t<decltype(qp)>;
          constexpr int V = decltype(vec)::value;
          const int64_t nv = n / V;
          quantizeVecKernel<T, C, decltype(mode)::value, V>
              <<<gridOf(nv), kThreads, 0, stream>>>(xp, qp, nv, l, scale, zp, p);
        });
      });
    });
  });
}

cudaError_t dequantizeVec(const void* q, CodeType qt, void* y, FloatType yt, int64_t n, const Layout& l,
                          const float* scale, const float* zp, const Params& p, cudaStream_t stream) {
  return byMode(l, vecOf(yt), [&](auto mode) {
    byVec(yt, [&](auto vec) {
      byCode(qt, const_cast<void*>(q), [&](auto* qp) {
        byFloat(yt, y, [&](auto* yp) {
          using C = std::remove_pointer_t<decltype(qp)>;
          using T = std::remove_pointer_t<decltype(yp)>;
          constexpr int V = decltype(vec)::value;
          const int64_t nv = n / V;
          dequantizeVecKernel<C, T, decltype(mode)::value, V>
              <<<gridOf(nv), kThreads, 0, stream>>>(qp, yp, nv, l, scale, zp, p);
        });
      });
    });
  });
}

cudaError_t fakeQuantizeVec(const void* x, FloatType xt, void* y, bool* mask, int64_t n, const Layout& l,
                            const float* scale, const float* zp, const Params& p, cudaStream_t stream) {
  return byMode(l, vecOf(xt), [&](auto mode) {
    byVec(xt, [&](auto vec) {
      byFloat(xt, const_cast<void*>(x), [&](auto* xp) {
        using T = std::remove_pointer_t<decltype(xp)>;
        constexpr int V = decltype(vec)::value;
        const int64_t nv = n / V;
        fakeQuantizeVecKernel<T, decltype(mode)::value, V>
            <<<gridOf(nv), kThreads, 0, stream>>>(xp, static_cast<T*>(y), mask, nv, l, scale, zp, p);
      });
    });
  });
}

}  // namespace pt2q::cuda::affine
