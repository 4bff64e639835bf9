// linear_mx's row kernel on AVX-512 (this file is compiled with AVX512F/BW/DQ/VL and VBMI; the
// dispatcher runs the 6-bit decode only where the CPU has VBMI). Several weight rows at a time, each
// unit decoded once and multiplied into every x row (up to 4): kernels/cpu/linear_mx_microkernels.h.
#include <immintrin.h>

#include "kernels/cpu/linear_mx_microkernels.h"

namespace pt2q::cpu {
namespace {

constexpr int64_t kUnit = 32;
// The weight stream is prefetched this far ahead (as the int8/int4 linear kernels do).
constexpr int64_t kPrefetchBytes = 16384;

struct Decoder {
  MxUnitKind kind;
  __m512 t0, t1, t2, t3;  // the table (16 or 64 entries)
  __m512i fp8_mag, fp8_sign;
  __m512 fp8_mult;
  int fp8_shift;
  __m512i six_bytes, six_shift0, six_shift1;

  explicit Decoder(const MxLinearRows& a) : kind(a.kind), fp8_shift(a.fp8_shift) {
    t0 = t1 = t2 = t3 = _mm512_setzero_ps();
    if (a.table != nullptr) {
      t0 = _mm512_loadu_ps(a.table);
      if (kind == MxUnitKind::kSixBit) {
        t1 = _mm512_loadu_ps(a.table + 16);
        t2 = _mm512_loadu_ps(a.table + 32);
        t3 = _mm512_loadu_ps(a.table + 48);
      }
    }
    fp8_mag = _mm512_set1_epi32(0x7F);
    fp8_sign = _mm512_set1_epi32(0x80);
    fp8_mult = _mm512_set1_ps(a.fp8_mult);
    // kSixBit: dword i takes the 3 bytes of group i % 8; codes 0/1 (lanes < 8 / >= 8) of the first
    // vector, 2/3 of the second.
    alignas(64) uint8_t idx[64];
    alignas(64) int32_t s0[16], s1[16];
    for (int i = 0; i < 16; ++i) {
      for (int b = 0; b < 4; ++b) idx[4 * i + b] = static_cast<uint8_t>(3 * (i % 8) + (b < 3 ? b : 0));
      s0[i] = 6 * (i / 8);
      s1[i] = 12 + 6 * (i / 8);
    }
    six_bytes = _mm512_load_si512(idx);
    six_shift0 = _mm512_load_si512(s0);
    six_shift1 = _mm512_load_si512(s1);
  }

  __m512 lut64(__m512i c) const {
    const __m512 lo = _mm512_permutex2var_ps(t0, c, t1), hi = _mm512_permutex2var_ps(t2, c, t3);
    return _mm512_mask_blend_ps(_mm512_test_epi32_mask(c, _mm512_set1_epi32(32)), lo, hi);
  }

  __m512 fp8(__m128i bytes) const {
    const __m512i v = _mm512_cvtepu8_epi32(bytes);
    const __m512i bits = _mm512_or_si512(_mm512_sll_epi32(_mm512_and_si512(v, fp8_mag), _mm_cvtsi32_si128(fp8_shift)),
                                         _mm512_slli_epi32(_mm512_and_si512(v, fp8_sign), 24));
    return _mm512_mul_ps(_mm512_castsi512_ps(bits), fp8_mult);
  }

  template <MxUnitKind K>
  void unitOf(const uint8_t* p, __m512 (&w)[2]) const {
    if constexpr (K == MxUnitKind::kInt8) {
      w[0] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
      w[1] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16))));
    } else if constexpr (K == MxUnitKind::kNibble) {
      const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
      w[0] = _mm512_permutexvar_ps(_mm512_and_si512(v, _mm512_set1_epi32(15)), t0);
      w[1] = _mm512_permutexvar_ps(_mm512_srli_epi32(v, 4), t0);
    } else if constexpr (K == MxUnitKind::kSixBit) {
      const __m512i raw = _mm512_maskz_loadu_epi8(0xFFFFFFull, p);
      const __m512i words = _mm512_permutexvar_epi8(six_bytes, raw);
      const __m512i mask = _mm512_set1_epi32(63);
      w[0] = lut64(_mm512_and_si512(_mm512_srlv_epi32(words, six_shift0), mask));
      w[1] = lut64(_mm512_and_si512(_mm512_srlv_epi32(words, six_shift1), mask));
    } else {
      w[0] = fp8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
      w[1] = fp8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16)));
    }
  }
};

struct Lanes {
  using F = __m512;
  static constexpr int kVecs = 2;
  // 4 rows for 1-2 x rows, 2 for 3-4, where the x rows add chains and 4 rows would run out of
  // registers
  static constexpr int kRows1 = 4, kRows2 = 2;
  static F zero() { return _mm512_setzero_ps(); }
  static F set1(float v) { return _mm512_set1_ps(v); }
  static F load(const float* p) { return _mm512_loadu_ps(p); }
  static F fmadd(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static float sum(F v) { return _mm512_reduce_add_ps(v); }
};

#include "kernels/cpu/linear_mx_rows_impl.h"

void decode(const MxLinearRows& a, int64_t n0, int64_t n1, float* out, int64_t ld) {
  const Decoder d(a);
  const int64_t ub = mxUnitBytes(a.kind);
  // Lane j of the decoded pair holds element mxUnitElement(j): gather each element's lane back.
  alignas(64) int32_t inv[kUnit];
  for (int j = 0; j < kUnit; ++j) inv[mxUnitElement(a.kind, j)] = j;
  const __m512i lo = _mm512_load_si512(inv), hi = _mm512_load_si512(inv + 16);
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* row = a.codes + n * a.row_bytes;
    float* o = out + (n - n0) * ld;
    for (int64_t u = 0; u < a.units; ++u) {
      __m512 w[2];
      decodeUnit(d, a.kind, row + u * ub, w);
      const __m512 w0 = w[0], w1 = w[1];
      const __m512 s = _mm512_set1_ps(a.scale_values[a.scales[n * a.scale_stride + u / a.units_per_block]]);
      _mm512_storeu_ps(o + u * kUnit, _mm512_mul_ps(_mm512_permutex2var_ps(w0, lo, w1), s));
      _mm512_storeu_ps(o + u * kUnit + 16, _mm512_mul_ps(_mm512_permutex2var_ps(w0, hi, w1), s));
    }
  }
}

// 16 E8M0 bytes as fp32 2^(s - 127): the exponent field itself, with s = 0 (2^-127, a subnormal)
// and s = 255 (NaN) patched.
inline __m512 scalesOf(const uint8_t* p) {
  const __m512i s = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  __m512i bits = _mm512_slli_epi32(s, 23);
  bits = _mm512_mask_mov_epi32(bits, _mm512_cmpeq_epi32_mask(s, _mm512_setzero_si512()),
                               _mm512_set1_epi32(0x00400000));
  bits = _mm512_mask_mov_epi32(bits, _mm512_cmpeq_epi32_mask(s, _mm512_set1_epi32(255)),
                               _mm512_set1_epi32(0x7FC00000));
  return _mm512_castsi512_ps(bits);
}

void decodeInner(const MxLinearRows& a, const MxInnerRows& g, int64_t r0, int64_t r1, float* out, int64_t ld) {
  const Decoder d(a);
  const int64_t ub = mxUnitBytes(a.kind);
  alignas(64) int32_t inv[kUnit];
  for (int j = 0; j < kUnit; ++j) inv[mxUnitElement(a.kind, j)] = j;
  const __m512i lo = _mm512_load_si512(inv), hi = _mm512_load_si512(inv + 16);
  // int8 codes decode to integers: their 2^-6 step first, as mx_dequantize's table has it
  const __m512 step = _mm512_set1_ps(a.kind == MxUnitKind::kInt8 ? 1.0f / 64 : 1.0f);
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t q = r % g.qn, l = (r / g.qn) % g.len, o = r / g.qn / g.len;
    const uint8_t* srow = a.scales + ((o * g.blocks + l / g.block) * g.qn + q) * g.len_last;
    const uint8_t* row = a.codes + r * a.row_bytes;
    float* orow = out + (r - r0) * ld;
    for (int64_t u = 0; u < a.units; ++u) {
      __m512 w[2];
      decodeUnit(d, a.kind, row + u * ub, w);
      const __m512 w0 = w[0], w1 = w[1];
      const __m512 v0 = _mm512_mul_ps(_mm512_permutex2var_ps(w0, lo, w1), step);
      const __m512 v1 = _mm512_mul_ps(_mm512_permutex2var_ps(w0, hi, w1), step);
      _mm512_storeu_ps(orow + u * kUnit, _mm512_mul_ps(v0, scalesOf(srow + u * kUnit)));
      _mm512_storeu_ps(orow + u * kUnit + 16, _mm512_mul_ps(v1, scalesOf(srow + u * kUnit + 16)));
    }
  }
}

}  // namespace

const LinearMxKernels* linearMxKernelsAvx512() {
  static const LinearMxKernels k{&rows, &decode, &decodeInner};
  return &k;
}

}  // namespace pt2q::cpu
