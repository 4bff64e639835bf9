// Bodies of the linear microkernels, compiled once per ISA (each ISA file defines
// PT2Q_CPU_ISA_NS and one of PT2Q_VEC_AVX512 / PT2Q_VEC_AVX2 before including this header, as
// for affine_kernels_impl.h). One skeleton serves every weight width and ISA: a weight block
// streams once, each chunk row decodes into fp32 vectors (the width's Decode), and those
// multiply-add into one accumulator per (x row, weight row), scaled once per group.
#pragma once

#ifndef PT2Q_CPU_ISA_NS
#error "define PT2Q_CPU_ISA_NS before including linear_kernels_impl.h"
#endif

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#if defined(PT2Q_VEC_AVX512) || defined(PT2Q_VEC_AVX2)
#include <immintrin.h>
#endif

#include "kernels/cpu/linear_microkernels.h"

namespace pt2q::cpu::PT2Q_CPU_ISA_NS {

constexpr int64_t kRows = 4;
constexpr int64_t kRowBytes = 16;  // bytes of one row in one chunk

// bf16 bits of a finite float, rounded to nearest even.
inline uint16_t bf16Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return static_cast<uint16_t>((b + 0x7FFF + ((b >> 16) & 1)) >> 16);
}

// ---- fp32 vectors of the ISA -------------------------------------------------------------------
#if defined(PT2Q_VEC_AVX512)
struct V {
  static constexpr int kLanes = 16;
  __m512 v;
  static V zero() { return {_mm512_setzero_ps()}; }
  static V load(const float* p) { return {_mm512_loadu_ps(p)}; }
  static V set1(float s) { return {_mm512_set1_ps(s)}; }
  static V fma(V a, V b, V c) { return {_mm512_fmadd_ps(a.v, b.v, c.v)}; }
  static float sum(V a) { return _mm512_reduce_add_ps(a.v); }
  static V sub(V a, V b) { return {_mm512_sub_ps(a.v, b.v)}; }
  static V mul(V a, V b) { return {_mm512_mul_ps(a.v, b.v)}; }
  void store(float* p) const { _mm512_storeu_ps(p, v); }
  // bf16 rounded to nearest even (finite values), as c10::BFloat16's conversion.
  void storeBf16(uint16_t* p) const {
    const __m512i b = _mm512_castps_si512(v);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(1));
    const __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(b, _mm512_set1_epi32(0x7FFF)), lsb), 16);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(r));
  }
};
// `lanes` bytes from p widened to fp32: signed codes, or the low / high nibbles.
inline V widenI8(const int8_t* p) {
  return {_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))))};
}
inline void widenNibbles(const int8_t* p, V& lo, V& hi) {
  const __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  lo = {_mm512_cvtepi32_ps(_mm512_and_si512(b, _mm512_set1_epi32(0xF)))};
  hi = {_mm512_cvtepi32_ps(_mm512_srli_epi32(b, 4))};
}
inline void prefetch(const int8_t* p) { _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0); }
#elif defined(PT2Q_VEC_AVX2)
struct V {
  static constexpr int kLanes = 8;
  __m256 v;
  static V zero() { return {_mm256_setzero_ps()}; }
  static V load(const float* p) { return {_mm256_loadu_ps(p)}; }
  static V set1(float s) { return {_mm256_set1_ps(s)}; }
  static V fma(V a, V b, V c) { return {_mm256_fmadd_ps(a.v, b.v, c.v)}; }
  static float sum(V a) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a.v), _mm256_extractf128_ps(a.v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static V sub(V a, V b) { return {_mm256_sub_ps(a.v, b.v)}; }
  static V mul(V a, V b) { return {_mm256_mul_ps(a.v, b.v)}; }
  void store(float* p) const { _mm256_storeu_ps(p, v); }
  void storeBf16(uint16_t* p) const {
    alignas(32) float f[kLanes];
    _mm256_store_ps(f, v);
    for (int l = 0; l < kLanes; ++l) p[l] = bf16Bits(f[l]);
  }
};
inline V widenI8(const int8_t* p) {
  return {_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))))};
}
inline void widenNibbles(const int8_t* p, V& lo, V& hi) {
  const __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  lo = {_mm256_cvtepi32_ps(_mm256_and_si256(b, _mm256_set1_epi32(0xF)))};
  hi = {_mm256_cvtepi32_ps(_mm256_srli_epi32(b, 4))};
}
// The hardware prefetchers alone left the weight stream short of the memory: on a 2-core Zen 3,
// 256 MiB of weights streamed by 2 threads, int8 15-16 -> 18-20 GB/s and int4 9.6-10.1 ->
// 10.6-10.9 (compute-bound); 4-32 KiB ahead all within noise of each other.
inline void prefetch(const int8_t* p) { _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0); }
#else
// Portable: 16 scalar lanes, as many partial sums as the AVX-512 kernel keeps.
struct V {
  static constexpr int kLanes = 16;
  float v[16];
  static V zero() { return {}; }
  static V load(const float* p) {
    V r;
    for (int l = 0; l < kLanes; ++l) r.v[l] = p[l];
    return r;
  }
  static V set1(float s) {
    V r;
    for (float& e : r.v) e = s;
    return r;
  }
  static V fma(V a, V b, V c) {
    for (int l = 0; l < kLanes; ++l) c.v[l] += a.v[l] * b.v[l];
    return c;
  }
  static float sum(V a) {
    float s = 0.0f;
    for (float e : a.v) s += e;
    return s;
  }
  static V sub(V a, V b) {
    for (int l = 0; l < kLanes; ++l) a.v[l] -= b.v[l];
    return a;
  }
  static V mul(V a, V b) {
    for (int l = 0; l < kLanes; ++l) a.v[l] *= b.v[l];
    return a;
  }
  void store(float* p) const {
    for (int l = 0; l < kLanes; ++l) p[l] = v[l];
  }
  void storeBf16(uint16_t* p) const {
    for (int l = 0; l < kLanes; ++l) p[l] = bf16Bits(v[l]);
  }
};
inline V widenI8(const int8_t* p) {
  V r;
  for (int l = 0; l < V::kLanes; ++l) r.v[l] = static_cast<float>(p[l]);
  return r;
}
inline void widenNibbles(const int8_t* p, V& lo, V& hi) {
  for (int l = 0; l < V::kLanes; ++l) {
    const auto b = static_cast<uint8_t>(p[l]);
    lo.v[l] = static_cast<float>(b & 0xF);
    hi.v[l] = static_cast<float>(b >> 4);
  }
}
inline void prefetch(const int8_t*) {}
#endif

// ---- decoding one row's chunk into fp32 vectors, each with the x offset it multiplies ----------
constexpr int kBytesPerVec = V::kLanes;  // one byte per lane for both widths

// int8: 16 k-values per chunk row, one code a byte.
struct DecodeI8 {
  static constexpr int64_t kChunkK = 16;
  static constexpr int kVecs = kRowBytes / kBytesPerVec;
  static void decode(const int8_t* row, V* out, int64_t* x_off) {
    for (int h = 0; h < kVecs; ++h) {
      out[h] = widenI8(row + h * kBytesPerVec);
      x_off[h] = h * kBytesPerVec;
    }
  }
};

// int4: 32 k-values per chunk row; byte l holds k = l (low nibble) and k = 16 + l (high).
struct DecodeI4 {
  static constexpr int64_t kChunkK = 32;
  static constexpr int kVecs = 2 * kRowBytes / kBytesPerVec;
  static void decode(const int8_t* row, V* out, int64_t* x_off) {
    for (int h = 0; h < kVecs / 2; ++h) {
      widenNibbles(row + h * kBytesPerVec, out[2 * h], out[2 * h + 1]);
      x_off[2 * h] = h * kBytesPerVec;
      x_off[2 * h + 1] = kRowBytes + h * kBytesPerVec;
    }
  }
};

template <int MX, class Decode>
void block4(const int8_t* w, const float* x, int64_t x_stride, int64_t chunks, int64_t group_chunks,
            const float* scales, int64_t s_stride, float* out) {
  V total[MX][kRows];
  for (auto& row : total) for (auto& t : row) t = V::zero();
  for (int64_t c0 = 0, g = 0; c0 < chunks; c0 += group_chunks, ++g) {
    V acc[MX][kRows];
    for (auto& row : acc) for (auto& a : row) a = V::zero();
    const int64_t c1 = std::min(c0 + group_chunks, chunks);
    for (int64_t c = c0; c < c1; ++c) {
      const int8_t* wc = w + c * kRows * kRowBytes;
      prefetch(wc + 256 * kRows * kRowBytes);  // 16 KiB ahead: see linear_w4_bf16.cpp
      if constexpr (V::kLanes == 8 && (Decode::kVecs > 2 || MX > 1)) {
        // AVX2 has 16 vector registers: the 4 rows' decoded chunk (16 vectors for int4) or two x
        // rows' accumulators beside them spilled. x's vectors load once, then each row decodes
        // and multiplies in turn (the same FMAs in the same order per accumulator, so the same
        // sums). Same-process A/B on a 2-core Zen 3, weights in the L2, new / old time: int4
        // 0.86-0.87 (one x row) and 0.85-0.87 (two), int8 two rows 0.76-0.81; int8 with one x
        // row fits the registers either way and ran 1.11-1.14 this way, so it keeps the other.
        V xv[MX][Decode::kVecs];
        int64_t off[Decode::kVecs];
        V wv[Decode::kVecs];
        for (int r = 0; r < kRows; ++r) {
          Decode::decode(wc + r * kRowBytes, wv, off);
          if (r == 0) {
            for (int m = 0; m < MX; ++m) {
              for (int h = 0; h < Decode::kVecs; ++h) xv[m][h] = V::load(x + m * x_stride + c * Decode::kChunkK + off[h]);
            }
          }
          for (int m = 0; m < MX; ++m) {
            for (int h = 0; h < Decode::kVecs; ++h) acc[m][r] = V::fma(wv[h], xv[m][h], acc[m][r]);
          }
        }
      } else {
        V wv[kRows][Decode::kVecs];
        int64_t off[Decode::kVecs];
        for (int r = 0; r < kRows; ++r) Decode::decode(wc + r * kRowBytes, wv[r], off);
        for (int m = 0; m < MX; ++m) {
          const float* xc = x + m * x_stride + c * Decode::kChunkK;
          for (int h = 0; h < Decode::kVecs; ++h) {
            const V xv = V::load(xc + off[h]);
            for (int r = 0; r < kRows; ++r) acc[m][r] = V::fma(wv[r][h], xv, acc[m][r]);
          }
        }
      }
    }
    for (int r = 0; r < kRows; ++r) {
      const V s = V::set1(scales[r * s_stride + g]);
      for (int m = 0; m < MX; ++m) total[m][r] = V::fma(acc[m][r], s, total[m][r]);
    }
  }
  for (int m = 0; m < MX; ++m) {
    for (int r = 0; r < kRows; ++r) out[m * kRows + r] = V::sum(total[m][r]);
  }
}

// Rows [n0, n1) of a packed weight dequantized, (v - zp) * s in fp32 (the int4 nibbles hold
// v + 8, so u - (8 + zp): the same exact small-integer difference), row-major [n1 - n0, kp] as
// fp32 or bf16 (rounded to nearest even). The padding columns come out zero.
template <class Decode>
void dequantRows(const int8_t* packed, int64_t kp, int64_t n0, int64_t n1, const float* s, const float* zp,
                 int64_t groups, int64_t group_chunks, void* out, bool bf16) {
  const int64_t chunks = kp / Decode::kChunkK, row_bytes = chunks * kRowBytes;
  const float offset = Decode::kChunkK == 32 ? 8.0f : 0.0f;
  for (int64_t r = n0; r < n1; ++r) {
    const int8_t* block = packed + (r / kRows) * kRows * row_bytes + (r % kRows) * kRowBytes;
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t g = r * groups + c / group_chunks;
      const V scale = V::set1(s[g]), zero = V::set1(offset + (zp != nullptr ? zp[g] : 0.0f));
      V v[Decode::kVecs];
      int64_t off[Decode::kVecs];
      Decode::decode(block + c * kRows * kRowBytes, v, off);
      const int64_t base = (r - n0) * kp + c * Decode::kChunkK;
      for (int h = 0; h < Decode::kVecs; ++h) {
        const V y = V::mul(V::sub(v[h], zero), scale);
        if (bf16) {
          y.storeBf16(static_cast<uint16_t*>(out) + base + off[h]);
        } else {
          y.store(static_cast<float*>(out) + base + off[h]);
        }
      }
    }
  }
}

template <class Decode>
void block4Rows(const int8_t* w, const float* x, int64_t x_stride, int64_t x_rows, int64_t chunks,
                int64_t group_chunks, const float* scales, int64_t s_stride, float* out) {
  if (x_rows == 2) {
    block4<2, Decode>(w, x, x_stride, chunks, group_chunks, scales, s_stride, out);
  } else {
    block4<1, Decode>(w, x, x_stride, chunks, group_chunks, scales, s_stride, out);
  }
}

}  // namespace pt2q::cpu::PT2Q_CPU_ISA_NS

#include "kernels/cpu/linear_int8_impl.h"
#include "kernels/cpu/depthwise_q8_impl.h"
#include "kernels/cpu/grouped_q8_impl.h"
#include "kernels/cpu/q8_requantize_impl.h"
#include "kernels/cpu/q8_lookup_impl.h"

namespace pt2q::cpu::PT2Q_CPU_ISA_NS {

inline LinearKernels makeLinearTable(Isa isa, const char* name) {
  return LinearKernels{isa,
                       name,
                       &block4Rows<DecodeI8>,
                       &block4Rows<DecodeI4>,
                       &dequantRows<DecodeI8>,
                       &dequantRows<DecodeI4>,
                       &quantizeRowsI8,
                       &weightSums<WI8>,
                       &weightSums<WI4>,
                       &dotPanel<WI8>,
                       &dotPanel<WI4>,
                       &expandInt4,
                       &depthwiseQ8Rows,
                       kGroupedQ8,
                       kGroupedQ8Takes,
                       &q8RequantizeRow,
                       &q8ScaleRow,
                       &q8AddRows,
                       &q8LookupRun};
}

}  // namespace pt2q::cpu::PT2Q_CPU_ISA_NS
