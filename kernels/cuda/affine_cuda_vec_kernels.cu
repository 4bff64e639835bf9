// Vectorized affine CUDA kernels (affine_cuda_vec.h). A thread takes U vectors of V = 8
// consecutive elements of the last dimension of the merged layout (vec_index.h; one 16-byte load
// of bf16 / fp16, two of fp32), the other dimensions' part of the qparam index computed once per
// vector, and per element only the last dimension's part, by its block mode:
//   kShared: the block along the last dimension is a multiple of V (per tensor, per channel
//            along another axis, groups of 32 / 64 / 128 ...): one qparam for all V;
//   kEach:   block 1 (per channel along the last axis): consecutive qparams (where the last
//            dimension merged with nothing, the column kernels below instead: a thread keeps
//            one vector of columns over many rows);
//   kAny:    any other block: one multiply-high division per element.
// Index arithmetic is 32-bit: layouts of 2^31 elements or more take the one-per-element kernels.
// The per-element arithmetic is affine_cuda_math.cuh's, so the bits are the scalar kernels'.
#include <type_traits>

#include "kernels/cuda/affine_cuda_math.cuh"
#include "kernels/cuda/affine_cuda_vec.h"
#include "kernels/cuda/vec_index.h"

namespace pt2q::cuda::affine {
namespace {

enum class Mode { kShared, kEach, kAny };

template <typename T, int V>
struct alignas(sizeof(T) * V) Vec {
  T v[V];
};

constexpr int kThreads = 256;

// Thread v0's U vectors (kThreads apart; those past nv are left unset), all loads issued first.
template <typename E, int V, int U>
__device__ __forceinline__ void loadVectors(const E* src, uint32_t v0, uint32_t nv, Vec<E, V> (&in)[U]) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
    if (v0 + u * kThreads < nv) in[u] = reinterpret_cast<const Vec<E, V>*>(src)[v0 + u * kThreads];
  }
}

// A thread's vector: its column along the last merged dimension and the row part of its qparam
// index, found once; the qparam index of its element j by the last dimension's block mode.
struct RowQ {
  uint32_t col, base;

  __device__ __forceinline__ RowQ(const VecIndex& l, uint32_t i) { l.split(i, col, base); }

  template <Mode M>
  __device__ __forceinline__ uint32_t at(const VecIndex& l, int j) const {
    const int last = l.ndim - 1;
    if constexpr (M == Mode::kShared) return base + l.block[last].div(col) * l.qstride[last];
    if constexpr (M == Mode::kEach) return base + (col + j) * l.qstride[last];
    return base + l.block[last].div(col + j) * l.qstride[last];
  }
};

template <Mode M>
struct QCache {
  Q q;
  __device__ __forceinline__ const Q& get(const VecIndex& l, const RowQ& r, int j, const float* scale,
                                          const float* zp, Domain d, float mid) {
    if (M != Mode::kShared || j == 0) q = loadQ(scale, zp, r.at<M>(l, j), d, mid);
    return q;
  }
};

// quantize (float -> code) and dequantize (code -> float) of one element, for mapVecKernel.
struct QuantizeOp {
  template <typename Out, typename In, class QT>
  static __device__ __forceinline__ Out one(In x, const QT& q, const Params& p, bool has_zp, float) {
    return quantizeOne<Out>(toFloat(x), q, p, has_zp);
  }
};
struct DequantizeOp {
  template <typename Out, typename In, class QT>
  static __device__ __forceinline__ Out one(In c, const QT& q, const Params& p, bool has_zp, float mid) {
    return fromFloat<Out>(dequantizeOne(c, q, p, has_zp, mid));
  }
};

// Each thread takes U vectors kThreads apart (a block covers U * kThreads whole vectors), all
// loaded before any is used: 16 bytes in flight per thread were too few for 2-byte floats.
template <typename In, typename Out, class Op, Mode M, int V, int U>
__global__ void __launch_bounds__(kThreads) mapVecKernel(const In* x, Out* out, uint32_t nv, VecIndex l,
                                                         const float* scale, const float* zp, Params p) {
  const uint32_t v0 = blockIdx.x * (kThreads * U) + threadIdx.x;
  Vec<In, V> in[U];
  loadVectors(x, v0, nv, in);
  const float mid = codeMid(p);
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const uint32_t v = v0 + u * kThreads;
    if (v >= nv) break;
    const RowQ r(l, v * V);
    Vec<Out, V> o;
    QCache<M> qc;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      o.v[j] = Op::template one<Out>(in[u].v[j], qc.get(l, r, j, scale, zp, p.domain, mid), p, zp != nullptr, mid);
    }
    reinterpret_cast<Vec<Out, V>*>(out)[v] = o;
  }
}

// Fake-quantize flavours: the common (domain, zero point) pairs with a code range exact in fp32
// are template constants, so that the per-element branches on them fold away; kAnyFlavour keeps
// them at run time.
enum Flavour { kIntZp, kIntNoZp, kFloatZp, kAnyFlavour };

Flavour flavourOf(const Params& p, const float* zp) {
  if (p.qmax - p.qmin > (int64_t(1) << 24)) return kAnyFlavour;
  if (p.domain == Domain::kFloat) return zp != nullptr ? kFloatZp : kAnyFlavour;
  return zp != nullptr ? kIntZp : kIntNoZp;
}

template <typename T, Mode M, int V, int U, Flavour F>
__global__ void __launch_bounds__(kThreads) fakeQuantizeVecKernel(const T* x, T* out, bool* mask, uint32_t nv,
                                                                  VecIndex l, const float* scale, const float* zp,
                                                                  Params p) {
  const uint32_t v0 = blockIdx.x * (kThreads * U) + threadIdx.x;
  Vec<T, V> in[U];
  loadVectors(x, v0, nv, in);
  if constexpr (F != kAnyFlavour) p.domain = F == kFloatZp ? Domain::kFloat : Domain::kInt;
  const bool has_zp = F == kAnyFlavour ? zp != nullptr : F != kIntNoZp;
  const float mid = codeMid(p);
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const uint32_t v = v0 + u * kThreads;
    if (v >= nv) break;
    const RowQ r(l, v * V);
    Vec<T, V> o;
    Vec<bool, V> mk;
    QCache<M> qc;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      bool in_range;
      o.v[j] = fromFloat<T>(fakeQuantizeOne<F == kAnyFlavour>(
          toFloat(in[u].v[j]), qc.get(l, r, j, scale, has_zp ? zp : nullptr, p.domain, mid), p, has_zp, mid,
          in_range));
      mk.v[j] = in_range;
    }
    reinterpret_cast<Vec<T, V>*>(out)[v] = o;
    if (mask != nullptr) reinterpret_cast<Vec<bool, V>*>(mask)[v] = mk;
  }
}

// Per channel along the last axis (kEach with one merged dimension of C columns), a vector's 8
// qparams depend on its column alone. There the flat kernels above loaded two qparams and
// divided once per element (bf16 fake-quantize at 53 % of the bandwidth on the H100), so
// instead a thread keeps one column vector for a strided set of rows (rg, rg + groups, ...) and
// loads its qparams and reciprocals (QInv) once. Thread t takes vector t % vectors of row t / vectors
// first: a warp's loads stay contiguous for any C, narrow tensors included.
struct Columns {
  uint32_t vectors;  // per row: C / V
  FastDiv per_row;   // divides by vectors
  uint32_t rows, groups, qstride;
};

// Rows per thread: enough to amortize 8 qparam loads and divisions, few enough that a tall
// tensor still has a thread per vector of its first rows.
constexpr uint32_t kColumnRows = 16;

// Vectors in flight per thread: 64 bytes of input whatever its type (8 elements each).
template <typename In>
constexpr int columnUnrollOf() {
  return static_cast<int>(8 / sizeof(In));
}

Columns columnsOf(const VecIndex& l, int vec, int64_t n) {
  Columns c;
  const uint32_t cols = l.size[0].d;
  c.vectors = cols / static_cast<uint32_t>(vec);
  c.per_row = FastDiv::of(c.vectors);
  c.rows = static_cast<uint32_t>(n / cols);
  c.groups = (c.rows + kColumnRows - 1) / kColumnRows;
  c.qstride = l.qstride[0];
  return c;
}

unsigned columnsGrid(const Columns& c) {
  const uint64_t threads = uint64_t{c.vectors} * c.groups;
  return static_cast<unsigned>((threads + kThreads - 1) / kThreads);
}

// This thread's column vector and first row, and the qparams of the vector's V columns.
struct ColumnRun {
  uint32_t cv, rg;

  __device__ __forceinline__ explicit ColumnRun(const Columns& c) {
    const uint32_t t = blockIdx.x * kThreads + threadIdx.x;
    rg = c.per_row.div(t);
    cv = t - rg * c.vectors;
  }

  template <int V>
  __device__ __forceinline__ void loadQs(const Columns& c, const float* scale, const float* zp, Domain d, float mid,
                                         QInv (&q)[V]) const {
#pragma unroll
    for (int j = 0; j < V; ++j) {
      static_cast<Q&>(q[j]) = loadQ(scale, zp, (cv * V + j) * c.qstride, d, mid);
      q[j].inv = 1.0f / q[j].s;
    }
  }

  // The vectors of rows r, r + groups, ... (U of them, those past the last row left unset).
  template <typename E, int V, int U>
  __device__ __forceinline__ void load(const Columns& c, const E* src, uint32_t r, Vec<E, V> (&in)[U]) const {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const uint32_t row = r + u * c.groups;
      if (row < c.rows) in[u] = reinterpret_cast<const Vec<E, V>*>(src)[row * c.vectors + cv];
    }
  }
};

template <typename In, typename Out, class Op, int V, int U>
__global__ void __launch_bounds__(kThreads) mapColumnsKernel(const In* x, Out* out, Columns c, const float* scale,
                                                             const float* zp, Params p) {
  const ColumnRun run(c);
  if (run.rg >= c.groups) return;
  const float mid = codeMid(p);
  QInv q[V];
  run.loadQs(c, scale, zp, p.domain, mid, q);
  for (uint32_t r = run.rg; r < c.rows; r += U * c.groups) {
    Vec<In, V> in[U];
    run.load(c, x, r, in);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const uint32_t row = r + u * c.groups;
      if (row >= c.rows) break;
      Vec<Out, V> o;
#pragma unroll
      for (int j = 0; j < V; ++j) o.v[j] = Op::template one<Out>(in[u].v[j], q[j], p, zp != nullptr, mid);
      reinterpret_cast<Vec<Out, V>*>(out)[row * c.vectors + run.cv] = o;
    }
  }
}

template <typename T, int V, int U, Flavour F>
__global__ void __launch_bounds__(kThreads) fakeQuantizeColumnsKernel(const T* x, T* out, bool* mask, Columns c,
                                                                      const float* scale, const float* zp, Params p) {
  const ColumnRun run(c);
  if (run.rg >= c.groups) return;
  if constexpr (F != kAnyFlavour) p.domain = F == kFloatZp ? Domain::kFloat : Domain::kInt;
  const bool has_zp = F == kAnyFlavour ? zp != nullptr : F != kIntNoZp;
  const float mid = codeMid(p);
  QInv q[V];
  run.loadQs(c, scale, has_zp ? zp : nullptr, p.domain, mid, q);
  for (uint32_t r = run.rg; r < c.rows; r += U * c.groups) {
    Vec<T, V> in[U];
    run.load(c, x, r, in);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const uint32_t row = r + u * c.groups;
      if (row >= c.rows) break;
      Vec<T, V> o;
      Vec<bool, V> mk;
#pragma unroll
      for (int j = 0; j < V; ++j) {
        bool in_range;
        o.v[j] = fromFloat<T>(fakeQuantizeOne<F == kAnyFlavour>(toFloat(in[u].v[j]), q[j], p, has_zp, mid, in_range));
        mk.v[j] = in_range;
      }
      const uint32_t v = row * c.vectors + run.cv;
      reinterpret_cast<Vec<T, V>*>(out)[v] = o;
      if (mask != nullptr) reinterpret_cast<Vec<bool, V>*>(mask)[v] = mk;
    }
  }
}

// The layouts the column kernels take: block 1 along a last dimension that merged with nothing.
bool columnsTake(const VecIndex& l) { return l.ndim == 1 && l.block[0].d == 1; }

// fp32 fake-quantize stays on the flat kernel: on the H100 the column kernel ran it at 80 % of
// the bandwidth against the flat kernel's 85 %, while it took bf16 from 53 to 88 %, and quantize
// and dequantize of every type gained (bench_affine_cuda.py, docs/perf_affine_cuda.md).
bool fakeColumnsTake(const VecIndex& l, FloatType t) { return t != FloatType::kF32 && columnsTake(l); }

VecIndex indexOf(const Layout& l) { return VecIndex::of(l.ndim, l.sizes, l.block, l.qstride); }

Mode modeOf(const VecIndex& l, int vec) {
  const uint32_t bl = l.block[l.ndim - 1].d;
  if (bl % vec == 0) return Mode::kShared;
  return bl == 1 ? Mode::kEach : Mode::kAny;
}

// Vectors per thread: two for 2-byte floats, one for fp32 (8 of them are 32 bytes already).
constexpr int unrollOf(int float_bytes) { return float_bytes == 4 ? 1 : 2; }

unsigned gridOf(uint32_t nv, int unroll) {
  const uint32_t per_block = kThreads * static_cast<uint32_t>(unroll);
  return (nv + per_block - 1) / per_block;
}

// Calls go(mode constant) with the layout's mode.
template <class F>
cudaError_t byMode(const VecIndex& l, int vec, F&& go) {
  switch (modeOf(l, vec)) {
    case Mode::kShared: go(std::integral_constant<Mode, Mode::kShared>()); break;
    case Mode::kEach: go(std::integral_constant<Mode, Mode::kEach>()); break;
    default: go(std::integral_constant<Mode, Mode::kAny>()); break;
  }
  return cudaGetLastError();
}

// Calls go(flavour constant) with the fake-quantize flavour f.
template <class F>
void byFlavour(Flavour f, F&& go) {
  switch (f) {
    case kIntZp: go(std::integral_constant<Flavour, kIntZp>()); break;
    case kIntNoZp: go(std::integral_constant<Flavour, kIntNoZp>()); break;
    case kFloatZp: go(std::integral_constant<Flavour, kFloatZp>()); break;
    default: go(std::integral_constant<Flavour, kAnyFlavour>()); break;
  }
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
  const VecIndex v = indexOf(l);
  if (v.ndim == 0 || v.size[v.ndim - 1].d % vec != 0) return false;
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

// Launches the map Op (quantize or dequantize) of In to Out: the column kernels where they take
// the layout, else the flat kernels by the layout's mode. F: the float type of the two, whose size
// sets the flat kernels' vectors per thread.
template <class Op, typename F, typename In, typename Out>
cudaError_t launchMap(const In* in, Out* out, int64_t n, const VecIndex& vi, const float* scale, const float* zp,
                      const Params& p, cudaStream_t stream) {
  if (columnsTake(vi)) {
    const Columns c = columnsOf(vi, kVec, n);
    mapColumnsKernel<In, Out, Op, kVec, columnUnrollOf<In>()>
        <<<columnsGrid(c), kThreads, 0, stream>>>(in, out, c, scale, zp, p);
    return cudaGetLastError();
  }
  return byMode(vi, kVec, [&](auto mode) {
    constexpr int U = unrollOf(sizeof(F));
    const auto nv = static_cast<uint32_t>(n / kVec);
    mapVecKernel<In, Out, Op, decltype(mode)::value, kVec, U>
        <<<gridOf(nv, U), kThreads, 0, stream>>>(in, out, nv, vi, scale, zp, p);
  });
}

cudaError_t quantizeVec(const void* x, FloatType xt, void* q, CodeType qt, int64_t n, const Layout& l,
                        const float* scale, const float* zp, const Params& p, cudaStream_t stream) {
  cudaError_t err = cudaSuccess;
  byFloat(xt, const_cast<void*>(x), [&](auto* xp) {
    byCode(qt, q, [&](auto* qp) {
      using T = std::remove_pointer_t<decltype(xp)>;
      err = launchMap<QuantizeOp, T>(const_cast<const T*>(xp), qp, n, indexOf(l), scale, zp, p, stream);
    });
  });
  return err;
}

cudaError_t dequantizeVec(const void* q, CodeType qt, void* y, FloatType yt, int64_t n, const Layout& l,
                          const float* scale, const float* zp, const Params& p, cudaStream_t stream) {
  cudaError_t err = cudaSuccess;
  byCode(qt, const_cast<void*>(q), [&](auto* qp) {
    byFloat(yt, y, [&](auto* yp) {
      using C = std::remove_pointer_t<decltype(qp)>;
      using T = std::remove_pointer_t<decltype(yp)>;
      err = launchMap<DequantizeOp, T>(const_cast<const C*>(qp), yp, n, indexOf(l), scale, zp, p, stream);
    });
  });
  return err;
}

cudaError_t fakeQuantizeVec(const void* x, FloatType xt, void* y, bool* mask, int64_t n, const Layout& l,
                            const float* scale, const float* zp, const Params& p, cudaStream_t stream) {
  const VecIndex vi = indexOf(l);
  if (fakeColumnsTake(vi, xt)) {
    const Columns c = columnsOf(vi, kVec, n);
    byFloat(xt, const_cast<void*>(x), [&](auto* xp) {
      using T = std::remove_pointer_t<decltype(xp)>;
      if constexpr (sizeof(T) == 2) {
        byFlavour(flavourOf(p, zp), [&](auto flavour) {
          fakeQuantizeColumnsKernel<T, kVec, columnUnrollOf<T>(), decltype(flavour)::value>
              <<<columnsGrid(c), kThreads, 0, stream>>>(xp, static_cast<T*>(y), mask, c, scale, zp, p);
        });
      }
    });
    return cudaGetLastError();
  }
  return byMode(vi, vecOf(xt), [&](auto mode) {
    byVec(xt, [&](auto vec) {
      byFloat(xt, const_cast<void*>(x), [&](auto* xp) {
        using T = std::remove_pointer_t<decltype(xp)>;
        constexpr int V = decltype(vec)::value, U = unrollOf(sizeof(T));
        constexpr Mode M = decltype(mode)::value;
        const auto nv = static_cast<uint32_t>(n / V);
        const unsigned grid = gridOf(nv, U);
        auto* yp = static_cast<T*>(y);
        byFlavour(flavourOf(p, zp), [&](auto flavour) {
          fakeQuantizeVecKernel<T, M, V, U, decltype(flavour)::value>
              <<<grid, kThreads, 0, stream>>>(xp, yp, mask, nv, vi, scale, zp, p);
        });
      });
    });
  });
}

}  // namespace pt2q::cuda::affine
