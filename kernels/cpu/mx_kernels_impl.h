// Bodies of the MX / BFP CPU kernels, compiled once per ISA like affine_kernels_impl.h: each
// ISA file defines PT2Q_CPU_ISA_NS and includes this header. AVX-512 (mx_simd_avx512.h) and
// AVX2 (mx_simd_avx2.h) run intrinsics; the generic table runs the scalar loops below, which
// are also the structure the AVX2 loops follow.
//
// A block row is (outer index o, block j along the quantized axis). When the axis is the
// innermost one (inner == 1) its blocks are contiguous runs; otherwise each of the `inner`
// columns is its own block of up to `block` elements with stride `inner`, and the loops run
// across columns so that they stay contiguous.
#pragma once

#ifndef PT2Q_CPU_ISA_NS
#error "define PT2Q_CPU_ISA_NS before including mx_kernels_impl.h"
#endif

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(PT2Q_VEC_AVX512) || defined(PT2Q_VEC_AVX2)
#include <immintrin.h>
#endif

#include "kernels/cpu/mx_code_pack.h"
#include "kernels/cpu/mx_microkernels.h"

namespace pt2q::cpu::PT2Q_CPU_ISA_NS {
namespace mxk {

#include "kernels/cpu/simd/float_bits.h"
#include "kernels/mx/mx_numerics.h"
#if defined(PT2Q_VEC_AVX512)
#include "kernels/cpu/mx_simd_avx512.h"
#endif

template <FloatKind K>
struct IO;
template <>
struct IO<FloatKind::kF32> {
  using T = float;
  static float load(T v) { return v; }
  static T store(float v) { return v; }
};
template <>
struct IO<FloatKind::kBF16> {
  using T = uint16_t;
  static float load(T v) { return bf16ToFloat(v); }
  static T store(float v) { return floatToBF16(v); }
};
template <>
struct IO<FloatKind::kF16> {
  using T = uint16_t;
  static float load(T v) { return f16ToFloat(v); }
  static T store(float v) { return floatToF16(v); }
};

constexpr int64_t kColumns = 256;  // columns processed together when blocks are strided

#if defined(PT2Q_VEC_AVX2)
#include "kernels/cpu/simd/vec_avx2.h"
#include "kernels/cpu/mx_simd_avx2.h"
#endif

// NaN-propagating |x| maxima of columns [w0, w0 + nw) over rows [l0, l1) of outer index o
// (NaN wins, as microxcaling's (x > m) || isnan(x)).
template <FloatKind K>
void columnMaxima(const typename IO<K>::T* x, const MxCall& c, int64_t o, int64_t l0, int64_t l1, int64_t w0,
                  int64_t nw, float* amax) {
  uint8_t nan_seen[kColumns] = {};
  for (int64_t w = 0; w < nw; ++w) amax[w] = 0.0f;
  for (int64_t l = l0; l < l1; ++l) {
    const typename IO<K>::T* row = x + (o * c.len + l) * c.inner + w0;
    for (int64_t w = 0; w < nw; ++w) {
      const float a = std::fabs(IO<K>::load(row[w]));
      nan_seen[w] |= (a != a);
      amax[w] = a > amax[w] ? a : amax[w];
    }
  }
  for (int64_t w = 0; w < nw; ++w) {
    if (nan_seen[w]) amax[w] = bitsToFloat(0x7FC00000u);
  }
}

template <FloatKind K, int R>
void fakeQuantizeBlockRows(const void* xv, void* yv, int64_t rb, int64_t re, const MxCall& c) {
  using T = typename IO<K>::T;
  const T* x = static_cast<const T*>(xv);
  T* y = static_cast<T*>(yv);
  const ElemParams p{c.is_int, c.emin, c.m, c.emax, c.max_norm};
  const int64_t nblocks = (c.len + c.block - 1) / c.block;
  const float nan = bitsToFloat(0x7FC00000u);
  float amax[kColumns], scale[kColumns];
  uint8_t kill[kColumns];  // 1: NaN block, 2: flushed block
  for (int64_t r = rb; r < re; ++r) {
    const int64_t o = r / nblocks, j = r % nblocks;
    const int64_t l0 = j * c.block, l1 = std::min(c.len, l0 + c.block);
    for (int64_t w0 = 0; w0 < c.inner; w0 += kColumns) {
      const int64_t nw = std::min(kColumns, c.inner - w0);
      columnMaxima<K>(x, c, o, l0, l1, w0, nw, amax);
      for (int64_t w = 0; w < nw; ++w) {
        const float m = amax[w];
        const uint32_t s = sharedScaleBits(m, p, c.scale_mode);
        scale[w] = scaleValue(s);
        kill[w] = s == 255u ? 1 : ((c.flush_fp32_subnorms && ((floatToBits(m) >> 23) & 0xFFu) == 0u) ? 2 : 0);
      }
      for (int64_t l = l0; l < l1; ++l) {
        const int64_t base = (o * c.len + l) * c.inner + w0;
        const T* row = x + base;
        T* out = y + base;
        for (int64_t w = 0; w < nw; ++w) {
          const float v = IO<K>::load(row[w]) / scale[w];
          const uint32_t rnd = (R == 3) ? elementRandom(c.random_key, static_cast<uint64_t>(base + w)) : 0u;
          float q = quantizeElement<R>(v, p, rnd) * scale[w];
          q = kill[w] == 1 ? nan : (kill[w] == 2 ? 0.0f : q);
          out[w] = IO<K>::store(q);
        }
      }
    }
  }
}

// Innermost-axis blocks: contiguous runs, one scale each.
template <FloatKind K, int R>
void fakeQuantizeContiguous(const void* xv, void* yv, int64_t rb, int64_t re, const MxCall& c) {
  using T = typename IO<K>::T;
  const T* x = static_cast<const T*>(xv);
  T* y = static_cast<T*>(yv);
  const ElemParams p{c.is_int, c.emin, c.m, c.emax, c.max_norm};
  const int64_t nblocks = (c.len + c.block - 1) / c.block;
  const float nan = bitsToFloat(0x7FC00000u);
  for (int64_t r = rb; r < re; ++r) {
    const int64_t o = r / nblocks, j = r % nblocks;
    const int64_t begin = o * c.len + j * c.block;
    const int64_t n = std::min(c.block, c.len - j * c.block);
    const T* xb = x + begin;
    T* yb = y + begin;
    float amax = 0.0f;
    bool nan_seen = false;
    for (int64_t i = 0; i < n; ++i) {
      const float a = std::fabs(IO<K>::load(xb[i]));
      nan_seen |= (a != a);
      amax = a > amax ? a : amax;
    }
    if (nan_seen) amax = nan;
    const uint32_t s = sharedScaleBits(amax, p, c.scale_mode);
    if (s == 255u || (c.flush_fp32_subnorms && ((floatToBits(amax) >> 23) & 0xFFu) == 0u)) {
      const T fill = IO<K>::store(s == 255u ? nan : 0.0f);
      for (int64_t i = 0; i < n; ++i) yb[i] = fill;
      continue;
    }
    const float scale = scaleValue(s);
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t rnd = (R == 3) ? elementRandom(c.random_key, static_cast<uint64_t>(begin + i)) : 0u;
      yb[i] = IO<K>::store(quantizeElement<R>(IO<K>::load(xb[i]) / scale, p, rnd) * scale);
    }
  }
}

template <FloatKind K, int R>
void fakeQuantizeRows(const void* x, void* y, int64_t rb, int64_t re, const MxCall& c) {
#if defined(PT2Q_VEC_AVX512)
  if (c.stream_stores) {
    if (c.inner == 1) return fakeQuantizeContiguousSimd<K, R, true>(x, y, rb, re, c);
    return fakeQuantizeColumnsSimd<K, R, true>(x, y, rb, re, c);
  }
  if (c.inner == 1) return fakeQuantizeContiguousSimd<K, R, false>(x, y, rb, re, c);
  return fakeQuantizeColumnsSimd<K, R, false>(x, y, rb, re, c);
#elif defined(PT2Q_VEC_AVX2)
  fakeQuantizeSimd8<K, R>(x, y, rb, re, c);
#else
  if (c.inner == 1) return fakeQuantizeContiguous<K, R>(x, y, rb, re, c);
  fakeQuantizeBlockRows<K, R>(x, y, rb, re, c);
#endif
}

template <FloatKind K>
void fakeQuantize(const void* x, void* y, int64_t rb, int64_t re, const MxCall& c) {
  switch (c.rounding) {
    case 1: return fakeQuantizeRows<K, 1>(x, y, rb, re, c);
    case 2: return fakeQuantizeRows<K, 2>(x, y, rb, re, c);
    case 3: return fakeQuantizeRows<K, 3>(x, y, rb, re, c);
    default: return fakeQuantizeRows<K, 0>(x, y, rb, re, c);
  }
}

// mx_quantize: the same blocks, writing codes and scale bytes instead of values. One loop for
// both layouts (inner == 1 is the contiguous case with a single column).
template <FloatKind K, int R, typename CodeT>
void quantizeRowsTo(const void* xv, void* cv, uint8_t* scales, int64_t rb, int64_t re, const MxCall& c) {
  using T = typename IO<K>::T;
  const T* x = static_cast<const T*>(xv);
  CodeT* codes = static_cast<CodeT*>(cv);
  const ElemParams p{c.is_int, c.emin, c.m, c.emax, c.max_norm};
  const int64_t nblocks = (c.len + c.block - 1) / c.block;
  float amax[kColumns], inv[kColumns];
  uint8_t s_byte[kColumns];
  for (int64_t r = rb; r < re; ++r) {
    const int64_t o = r / nblocks, j = r % nblocks;
    const int64_t l0 = j * c.block, l1 = std::min(c.len, l0 + c.block);
    for (int64_t w0 = 0; w0 < c.inner; w0 += kColumns) {
      const int64_t nw = std::min(kColumns, c.inner - w0);
      columnMaxima<K>(x, c, o, l0, l1, w0, nw, amax);
      for (int64_t w = 0; w < nw; ++w) {
        const float m = amax[w];
        uint32_t s = sharedScaleBits(m, p, c.scale_mode);
        const bool flush = c.flush_fp32_subnorms && ((floatToBits(m) >> 23) & 0xFFu) == 0u;
        s_byte[w] = static_cast<uint8_t>(s);
        // NaN and flushed blocks store code 0 (the scale byte says NaN; 0 is +0).
        inv[w] = (s == 255u || flush) ? 0.0f : 1.0f / scaleValue(s);
        scales[(o * nblocks + j) * c.inner + w0 + w] = s_byte[w];
      }
      // Codes go out in runs of up to kColumns through `run`: along the columns of a row, or
      // with one column (inner == 1) along the block. Sub-byte codes are packed from there: each
      // run starts and ends on a packing group (MxCall::pack_bits: rows, tiles and blocks are
      // whole groups). One call site of the element functions, which GCC inlines (with one per
      // layout it called encodeElement per element: 0.75x).
      const bool along_block = c.inner == 1;
      CodeT run[kColumns];
      for (int64_t l = l0; l < l1; l += along_block ? kColumns : 1) {
        const int64_t e = (o * c.len + l) * c.inner + w0;
        const int64_t n = along_block ? std::min(kColumns, l1 - l) : nw;
        for (int64_t i = 0; i < n; ++i) {
          const int64_t w = along_block ? 0 : i;
          const uint32_t rnd = (R == 3) ? elementRandom(c.random_key, static_cast<uint64_t>(e + i)) : 0u;
          const float v = inv[w] == 0.0f ? 0.0f : IO<K>::load(x[e + i]) * inv[w];
          run[i] = static_cast<CodeT>(encodeElement(quantizeElement<R>(v, p, rnd), p, c.ebits, c.code_bits));
        }
        if constexpr (sizeof(CodeT) == 1) {
          if (c.pack_bits != 0) {
            packCodeRun(run, n, c.pack_bits, static_cast<uint8_t*>(codeAt<CodeT>(cv, e, c.pack_bits)));
            continue;
          }
        }
        std::memcpy(codes + e, run, static_cast<size_t>(n) * sizeof(CodeT));
      }
    }
  }
}

#if defined(PT2Q_VEC_AVX512)
template <FloatKind K, int R, typename CodeT>
void quantizeRowsDispatch(const void* x, void* codes, uint8_t* scales, int64_t rb, int64_t re, const MxCall& c) {
  quantizeSimd<K, R, CodeT>(x, codes, scales, rb, re, c);
}
#elif defined(PT2Q_VEC_AVX2)
template <FloatKind K, int R, typename CodeT>
void quantizeRowsDispatch(const void* x, void* codes, uint8_t* scales, int64_t rb, int64_t re, const MxCall& c) {
  quantizeSimd8<K, R, CodeT>(x, codes, scales, rb, re, c);
}
#else
template <FloatKind K, int R, typename CodeT>
void quantizeRowsDispatch(const void* x, void* codes, uint8_t* scales, int64_t rb, int64_t re, const MxCall& c) {
  quantizeRowsTo<K, R, CodeT>(x, codes, scales, rb, re, c);
}
#endif

template <FloatKind K>
void quantizeRows(const void* x, void* codes, uint8_t* scales, int64_t rb, int64_t re, const MxCall& c) {
  const bool wide = c.code_bits > 8;
  switch (c.rounding) {
    case 1: return wide ? quantizeRowsDispatch<K, 1, uint16_t>(x, codes, scales, rb, re, c)
                        : quantizeRowsDispatch<K, 1, uint8_t>(x, codes, scales, rb, re, c);
    case 2: return wide ? quantizeRowsDispatch<K, 2, uint16_t>(x, codes, scales, rb, re, c)
                        : quantizeRowsDispatch<K, 2, uint8_t>(x, codes, scales, rb, re, c);
    case 3: return wide ? quantizeRowsDispatch<K, 3, uint16_t>(x, codes, scales, rb, re, c)
                        : quantizeRowsDispatch<K, 3, uint8_t>(x, codes, scales, rb, re, c);
    default: return wide ? quantizeRowsDispatch<K, 0, uint16_t>(x, codes, scales, rb, re, c)
                         : quantizeRowsDispatch<K, 0, uint8_t>(x, codes, scales, rb, re, c);
  }
}

inline MxKernels makeMxTable(const char* name) {
  MxKernels t{};
  t.name = name;
  t.fake_quantize[0] = &fakeQuantize<FloatKind::kF32>;
  t.fake_quantize[1] = &fakeQuantize<FloatKind::kBF16>;
  t.fake_quantize[2] = &fakeQuantize<FloatKind::kF16>;
  t.quantize[0] = &quantizeRows<FloatKind::kF32>;
  t.quantize[1] = &quantizeRows<FloatKind::kBF16>;
  t.quantize[2] = &quantizeRows<FloatKind::kF16>;
  return t;
}

}  // namespace mxk
}  // namespace pt2q::cpu::PT2Q_CPU_ISA_NS
