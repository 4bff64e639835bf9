// linear_mx's row kernel and unit decoders on AVX2 + FMA (this file is compiled with those
// flags): the AVX-512 kernels (x86_avx512/linear_mx_avx512.cpp) with 8-lane vectors. A unit of
// 32 codes decodes into four vectors in mxUnitElement's lane order (vector q holds lanes
// 8q..8q+7), so x, permuted once per call by linear_mx_cpu.cpp, lines up as it does for AVX-512.
// Each lane's value is computed by the same fp32 operations as there, so decode and decodeInner
// (mx_dequantize) give the same bits on both ISAs; rows sums in another order (8 lanes).
#include <immintrin.h>

#include "kernels/cpu/linear_mx_microkernels.h"

namespace pt2q::cpu {
namespace {

constexpr int64_t kUnit = 32;
constexpr int64_t kPrefetchBytes = 16384;

struct Decoder {
  MxUnitKind kind;
  const float* table;
  __m256 t_lo, t_hi;  // kNibble: the 16-entry table
  __m256 fp8_mult;
  __m128i fp8_shift;
  __m256i six_bytes;  // kSixBit: the byte shuffle that gives dword g the 3 bytes of group g

  explicit Decoder(const MxLinearRows& a) : kind(a.kind), table(a.table) {
    t_lo = t_hi = _mm256_setzero_ps();
    if (kind == MxUnitKind::kNibble) {
      t_lo = _mm256_loadu_ps(a.table);
      t_hi = _mm256_loadu_ps(a.table + 8);
    }
    fp8_mult = _mm256_set1_ps(a.fp8_mult);
    fp8_shift = _mm_cvtsi32_si128(a.fp8_shift);
    // The 24 bytes of a unit as [bytes 0-15 | bytes 8-23]: groups 0-3 at offsets 3g of the low
    // half, groups 4-7 at 3g - 8 of the high half.
    alignas(32) int8_t idx[32];
    for (int g = 0; g < 8; ++g) {
      const int base = g < 4 ? 3 * g : 3 * g - 8;
      for (int b = 0; b < 4; ++b) idx[4 * g + b] = static_cast<int8_t>(b < 3 ? base + b : -1);
    }
    six_bytes = _mm256_load_si256(reinterpret_cast<const __m256i*>(idx));
  }

  __m256 lut16(__m256i c) const {
    // permutevar8x32 reads the low 3 bits; bit 3, moved to the sign bit, picks the half.
    return _mm256_blendv_ps(_mm256_permutevar8x32_ps(t_lo, c), _mm256_permutevar8x32_ps(t_hi, c),
                            _mm256_castsi256_ps(_mm256_slli_epi32(c, 28)));
  }

  __m256 fp8(const uint8_t* p) const {
    const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    const __m256i bits = _mm256_or_si256(_mm256_sll_epi32(_mm256_and_si256(v, _mm256_set1_epi32(0x7F)), fp8_shift),
                                         _mm256_slli_epi32(_mm256_and_si256(v, _mm256_set1_epi32(0x80)), 24));
    return _mm256_mul_ps(_mm256_castsi256_ps(bits), fp8_mult);
  }

  template <MxUnitKind K>
  void unitOf(const uint8_t* p, __m256 (&w)[4]) const {
    if constexpr (K == MxUnitKind::kInt8) {
      for (int q = 0; q < 4; ++q) {
        w[q] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8 * q))));
      }
    } else if constexpr (K == MxUnitKind::kNibble) {
      // lanes 0-15: low nibbles of bytes 0-15; lanes 16-31: their high nibbles
      const __m256i v0 = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
      const __m256i v1 = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8)));
      w[0] = lut16(v0);
      w[1] = lut16(v1);
      w[2] = lut16(_mm256_srli_epi32(v0, 4));
      w[3] = lut16(_mm256_srli_epi32(v1, 4));
    } else if constexpr (K == MxUnitKind::kSixBit) {
      // vector c, lane g: code c of group g (the 64-entry table by a gather)
      const __m256i raw = _mm256_set_m128i(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8)),
                                           _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
      const __m256i words = _mm256_shuffle_epi8(raw, six_bytes);
      const __m256i mask = _mm256_set1_epi32(63);
      w[0] = _mm256_i32gather_ps(table, _mm256_and_si256(words, mask), 4);
      w[1] = _mm256_i32gather_ps(table, _mm256_and_si256(_mm256_srli_epi32(words, 6), mask), 4);
      w[2] = _mm256_i32gather_ps(table, _mm256_and_si256(_mm256_srli_epi32(words, 12), mask), 4);
      w[3] = _mm256_i32gather_ps(table, _mm256_srli_epi32(words, 18), 4);
    } else {
      for (int q = 0; q < 4; ++q) w[q] = fp8(p + 8 * q);
    }
  }
};

/// The four decoded vectors of a unit in element order (out[q] = elements 8q..8q+7).
inline void naturalOrder(MxUnitKind kind, const __m256 (&w)[4], __m256 (&out)[4]) {
  switch (kind) {
    case MxUnitKind::kNibble: {
      // element 2i: w[0..1] lane i; element 2i + 1: w[2..3] lane i
      for (int h = 0; h < 2; ++h) {
        const __m256 lo = _mm256_unpacklo_ps(w[h], w[h + 2]), hi = _mm256_unpackhi_ps(w[h], w[h + 2]);
        out[2 * h] = _mm256_permute2f128_ps(lo, hi, 0x20);
        out[2 * h + 1] = _mm256_permute2f128_ps(lo, hi, 0x31);
      }
      break;
    }
    case MxUnitKind::kSixBit: {
      // element 4g + c: w[c] lane g (a 4 x 8 transpose)
      const __m256 t0 = _mm256_unpacklo_ps(w[0], w[1]), t1 = _mm256_unpacklo_ps(w[2], w[3]);
      const __m256 t2 = _mm256_unpackhi_ps(w[0], w[1]), t3 = _mm256_unpackhi_ps(w[2], w[3]);
      const __m256 g04 = _mm256_shuffle_ps(t0, t1, 0x44), g15 = _mm256_shuffle_ps(t0, t1, 0xEE);
      const __m256 g26 = _mm256_shuffle_ps(t2, t3, 0x44), g37 = _mm256_shuffle_ps(t2, t3, 0xEE);
      out[0] = _mm256_permute2f128_ps(g04, g15, 0x20);
      out[1] = _mm256_permute2f128_ps(g26, g37, 0x20);
      out[2] = _mm256_permute2f128_ps(g04, g15, 0x31);
      out[3] = _mm256_permute2f128_ps(g26, g37, 0x31);
      break;
    }
    default:
      for (int q = 0; q < 4; ++q) out[q] = w[q];
      break;
  }
}

struct Lanes {
  using F = __m256;
  static constexpr int kVecs = 4;
  static constexpr int kRows1 = 2, kRows2 = 1;  // 16 ymm registers
  static F zero() { return _mm256_setzero_ps(); }
  static F set1(float v) { return _mm256_set1_ps(v); }
  static F load(const float* p) { return _mm256_loadu_ps(p); }
  static F fmadd(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static float sum(F v) {
    const __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 q = _mm_add_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_add_ss(q, _mm_shuffle_ps(q, q, 1)));
  }
};

#include "kernels/cpu/linear_mx_rows_impl.h"

void decode(const MxLinearRows& a, int64_t n0, int64_t n1, float* out, int64_t ld) {
  const Decoder d(a);
  const int64_t ub = mxUnitBytes(a.kind);
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* row = a.codes + n * a.row_bytes;
    float* o = out + (n - n0) * ld;
    for (int64_t u = 0; u < a.units; ++u) {
      __m256 w[4], v[4];
      decodeUnit(d, a.kind, row + u * ub, w);
      naturalOrder(a.kind, w, v);
      const __m256 s = _mm256_set1_ps(a.scale_values[a.scales[n * a.scale_stride + u / a.units_per_block]]);
      for (int q = 0; q < 4; ++q) _mm256_storeu_ps(o + u * kUnit + 8 * q, _mm256_mul_ps(v[q], s));
    }
  }
}

// 8 E8M0 bytes as fp32 2^(s - 127): the exponent field itself, with s = 0 (2^-127, a subnormal)
// and s = 255 (NaN) patched.
inline __m256 scalesOf(const uint8_t* p) {
  const __m256i s = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  __m256i bits = _mm256_slli_epi32(s, 23);
  bits = _mm256_blendv_epi8(bits, _mm256_set1_epi32(0x00400000), _mm256_cmpeq_epi32(s, _mm256_setzero_si256()));
  bits = _mm256_blendv_epi8(bits, _mm256_set1_epi32(0x7FC00000), _mm256_cmpeq_epi32(s, _mm256_set1_epi32(255)));
  return _mm256_castsi256_ps(bits);
}

void decodeInner(const MxLinearRows& a, const MxInnerRows& g, int64_t r0, int64_t r1, float* out, int64_t ld) {
  const Decoder d(a);
  const int64_t ub = mxUnitBytes(a.kind);
  // int8 codes decode to integers: their 2^-6 step first, as mx_dequantize's table has it
  const __m256 step = _mm256_set1_ps(a.kind == MxUnitKind::kInt8 ? 1.0f / 64 : 1.0f);
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t q = r % g.qn, l = (r / g.qn) % g.len, o = r / g.qn / g.len;
    const uint8_t* srow = a.scales + ((o * g.blocks + l / g.block) * g.qn + q) * g.len_last;
    const uint8_t* row = a.codes + r * a.row_bytes;
    float* orow = out + (r - r0) * ld;
    for (int64_t u = 0; u < a.units; ++u) {
      __m256 w[4], v[4];
      decodeUnit(d, a.kind, row + u * ub, w);
      naturalOrder(a.kind, w, v);
      for (int h = 0; h < 4; ++h) {
        const int64_t at = u * kUnit + 8 * h;
        _mm256_storeu_ps(orow + at, _mm256_mul_ps(_mm256_mul_ps(v[h], step), scalesOf(srow + at)));
      }
    }
  }
}

}  // namespace

const LinearMxKernels* linearMxKernelsAvx2() {
  static const LinearMxKernels k{&rows, &decode, &decodeInner};
  return &k;
}

}  // namespace pt2q::cpu
