// The qparam index of the vectorized affine kernels (affine_cuda_vec_kernels.cu) in 32-bit
// arithmetic without division instructions. Plain C++ (host and device), so that the host
// side is tested without a GPU (tests/kernels/vec_index_test.cpp).
//
// An element's qparam index is sum_d (i_d / block_d) * qstride_d over the dimensions of the
// contiguous tensor. Before a kernel sees the layout, VecIndex::of merges dimensions where that
// keeps the sum: a dimension of size 1 goes (its index is always 0); a dimension held by one
// block merges into the one outside it (size s_o * s_i, block b_o * s_i, the outer qstride), and
// an outermost one-block dimension goes (only the quotient of the flat index lands there). So
// per tensor and per channel along axis 0 become one dimension, and a thread's row part of the
// index costs nothing; every division left is FastDiv's multiply-high and shift (each 64-bit
// division was about 20 instructions and two quarter-rate conversions).
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define PT2Q_HD __host__ __device__ __forceinline__
#else
#define PT2Q_HD inline
#endif

namespace pt2q::cuda {

/// n / d for 0 <= n < 2^31 and 1 <= d < 2^31: q = (mulhi(n, m) + n) >> s with s = ceil(log2 d)
/// and m = floor(2^32 (2^s - d) / d) + 1 (Granlund & Montgomery's round-up method); mulhi(n, m)
/// <= n, so the sum stays below 2^32.
struct FastDiv {
  uint32_t d = 1, m = 1, s = 0;

  static FastDiv of(uint32_t divisor) {
    FastDiv f;
    f.d = divisor;
    while ((uint64_t{1} << f.s) < divisor) ++f.s;
    f.m = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << f.s) - divisor)) / divisor + 1);
    return f;
  }

  PT2Q_HD uint32_t div(uint32_t n) const {
#ifdef __CUDA_ARCH__
    const uint32_t hi = __umulhi(n, m);
#else
    const uint32_t hi = static_cast<uint32_t>((uint64_t{n} * m) >> 32);
#endif
    return (hi + n) >> s;
  }
};

constexpr int kVecIndexDims = 8;

struct VecIndex {
  int ndim = 0;  // 0: the layout does not fit 32 bits (or has no dimensions)
  FastDiv size[kVecIndexDims], block[kVecIndexDims];
  uint32_t qstride[kVecIndexDims] = {};

  /// The merged layout of a contiguous tensor of `ndim` dimensions, or ndim = 0 where the
  /// element count or a qparam index reaches 2^31.
  static VecIndex of(int ndim, const int64_t* sizes, const int64_t* blocks, const int64_t* qstrides) {
    VecIndex v;
    int64_t s[kVecIndexDims], b[kVecIndexDims], q[kVecIndexDims];
    int n = 0;
    int64_t numel = 1, qmax = 0;
    constexpr int64_t kLimit = int64_t{1} << 31;
    for (int d = 0; d < ndim; ++d) {
      if (sizes[d] <= 0 || blocks[d] <= 0 || d >= kVecIndexDims) return VecIndex{};
      numel *= sizes[d];
      if (numel >= kLimit) return VecIndex{};
      const int64_t bl = blocks[d] < sizes[d] ? blocks[d] : sizes[d];
      qmax += ((sizes[d] - 1) / bl) * qstrides[d];
      if (qstrides[d] < 0 || qmax >= kLimit) return VecIndex{};
      if (sizes[d] == 1) continue;
      s[n] = sizes[d], b[n] = bl, q[n] = qstrides[d], ++n;
      while (n >= 2 && b[n - 1] == s[n - 1]) {  // one block: merge into the dimension outside
        s[n - 2] *= s[n - 1];
        b[n - 2] *= s[n - 1];
        --n;
      }
    }
    int first = 0;
    if (n >= 2 && b[0] == s[0]) first = 1;  // outermost one-block dimension
    if (n == 0) s[0] = b[0] = 1, q[0] = 0, n = 1;
    v.ndim = n - first;
    for (int d = first; d < n; ++d) {
      v.size[d - first] = FastDiv::of(static_cast<uint32_t>(s[d]));
      v.block[d - first] = FastDiv::of(static_cast<uint32_t>(b[d]));
      v.qstride[d - first] = static_cast<uint32_t>(q[d]);
    }
    return v;
  }

  /// Flat element i's column along the last merged dimension, and the qparam index of the
  /// dimensions outside it.
  PT2Q_HD void split(uint32_t i, uint32_t& col, uint32_t& base) const {
    const int last = ndim - 1;
    uint32_t rest = size[last].div(i);
    col = i - rest * size[last].d;
    base = 0;
    for (int d = last - 1; d >= 0; --d) {
      const uint32_t outer = size[d].div(rest);
      base += block[d].div(rest - outer * size[d].d) * qstride[d];
      rest = outer;
    }
  }

  /// The qparam index of flat element i (tests; the kernels split once per vector).
  PT2Q_HD uint32_t at(uint32_t i) const {
    uint32_t col, base;
    split(i, col, base);
    return base + block[ndim - 1].div(col) * qstride[ndim - 1];
  }
};

}  // namespace pt2q::cuda
