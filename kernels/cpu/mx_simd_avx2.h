// AVX2 element arithmetic of the MX / BFP kernels, 8 lanes per step. Included by
// mx_kernels_impl.h inside the avx2 namespace, after mx_numerics.h and simd/vec_avx2.h.
//
// Unlike the AVX-512 bodies (mx_simd_avx512.h, which recast the arithmetic around getexp and
// scalef), quantize8 and encode8 are quantizeElement and encodeElement of mx_numerics.h lane for
// lane: the same fp32 operations in the same order, so they give the scalar kernel's bits by
// construction; blocks8 computes sharedScaleBits for 8 blocks at a time. The one rewrite is the division by the block scale X = 2^s,
// done as a multiply by 2^-s: that reciprocal is exact for every E8M0 byte (2^-127 .. 2^127,
// the smallest an fp32 subnormal), so the product is the same real number as the quotient,
// rounded the same way (the scalar mx_quantize loop already does this).

#include "kernels/cpu/mx_avx2_io.h"

/// Per-format vectors of quantize8 / encode8.
struct Elem8 {
  __m256i emin_field;  // floats: (emin + 127) << 23, the exponent field of the smallest normal
  __m256i m_field;     // floats: m << 23
  __m256i inv_base;    // floats: (254 + m) << 23
  __m256 int_step;     // integers: 2^-m
  __m256 int_inv;      // integers: 2^m
  __m256 max_norm, neg_max_norm;
  __m256 code_mul;     // encode: 2^m (integers), 2^(m - emin) (float subnormals)
  __m128i mant_shift;  // floats: 23 - m
  __m256i rebias;      // floats: (127 - bias) << m
  __m128i sign_shift;  // floats: 31 - (ebits + m), bit 31 to the code's sign bit
  __m256i code_mask;
};

inline Elem8 elem8(const MxCall& c) {
  Elem8 k;
  k.emin_field = _mm256_set1_epi32(static_cast<int32_t>(static_cast<uint32_t>(c.emin + 127) << 23));
  k.m_field = _mm256_set1_epi32(static_cast<int32_t>(static_cast<uint32_t>(c.m) << 23));
  k.inv_base = _mm256_set1_epi32(static_cast<int32_t>(static_cast<uint32_t>(254 + c.m) << 23));
  k.int_step = _mm256_set1_ps(bitsToFloat(static_cast<uint32_t>(127 - c.m) << 23));
  k.int_inv = _mm256_set1_ps(bitsToFloat(static_cast<uint32_t>(127 + c.m) << 23));
  k.max_norm = _mm256_set1_ps(c.max_norm);
  k.neg_max_norm = _mm256_set1_ps(-c.max_norm);
  k.code_mul = _mm256_set1_ps(bitsToFloat(static_cast<uint32_t>(127 + c.m - (c.is_int ? 0 : c.emin)) << 23));
  const bool fp = !c.is_int;
  k.mant_shift = _mm_cvtsi32_si128(fp ? 23 - c.m : 0);
  const int32_t bias = fp ? (1 << (c.ebits - 1)) - 1 : 0;
  k.rebias = _mm256_set1_epi32(fp ? (127 - bias) << c.m : 0);
  k.sign_shift = _mm_cvtsi32_si128(fp ? 31 - (c.ebits + c.m) : 0);
  k.code_mask = _mm256_set1_epi32(c.code_bits >= 32 ? -1 : static_cast<int32_t>((1u << c.code_bits) - 1u));
  return k;
}

/// quantizeElement<R> of 8 finite values (rnd: the stochastic bits, R == 3).
template <bool Int, int R>
inline __m256 quantize8(__m256 v, const Elem8& k, __m256i rnd) {
  const __m256i b = _mm256_castps_si256(v);
  __m256 step, inv;
  if constexpr (Int) {
    step = k.int_step;
    inv = k.int_inv;
  } else {
    const __m256i eb = _mm256_max_epu32(_mm256_and_si256(b, _mm256_set1_epi32(0x7F800000)), k.emin_field);
    step = _mm256_castsi256_ps(_mm256_sub_epi32(eb, k.m_field));
    inv = _mm256_castsi256_ps(_mm256_sub_epi32(k.inv_base, eb));
  }
  const __m256 scaled = _mm256_mul_ps(v, inv);
  const __m256 n0 = _mm256_round_ps(scaled, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 frac = _mm256_andnot_ps(signBit8(), _mm256_sub_ps(scaled, n0));
  const __m256 half = _mm256_set1_ps(0.5f);
  __m256 up;
  if constexpr (R == 0) {
    up = _mm256_cmp_ps(frac, half, _CMP_GE_OQ);
  } else if constexpr (R == 1) {
    const __m256i odd = _mm256_slli_epi32(_mm256_cvttps_epi32(n0), 31);
    up = _mm256_or_ps(_mm256_cmp_ps(frac, half, _CMP_GT_OQ),
                      _mm256_and_ps(_mm256_cmp_ps(frac, half, _CMP_EQ_OQ),
                                    _mm256_castsi256_ps(_mm256_srai_epi32(odd, 31))));
  } else if constexpr (R == 2) {
    up = _mm256_setzero_ps();
  } else {
    // uint32(frac * 2^32) > rnd without unsigned conversions or compares: products at or above
    // 2^31 lose 2^31 (exactly) before the signed conversion and get it back as the top bit.
    const __m256 p = _mm256_mul_ps(frac, _mm256_set1_ps(4294967296.0f));
    const __m256 big = _mm256_cmp_ps(p, _mm256_set1_ps(2147483648.0f), _CMP_GE_OQ);
    const __m256i top = _mm256_castps_si256(_mm256_and_ps(big, signBit8()));
    const __m256i t = _mm256_xor_si256(_mm256_cvttps_epi32(_mm256_sub_ps(p, _mm256_and_ps(big, _mm256_set1_ps(2147483648.0f)))), top);
    const __m256i flip = _mm256_set1_epi32(static_cast<int32_t>(0x80000000u));
    up = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_xor_si256(t, flip), _mm256_xor_si256(rnd, flip)));
  }
  const __m256 one = _mm256_or_ps(_mm256_and_ps(v, signBit8()), _mm256_set1_ps(1.0f));
  const __m256 q = _mm256_mul_ps(_mm256_add_ps(n0, _mm256_and_ps(up, one)), step);
  // min / max return their second operand unless the first compares below / above it: the
  // scalar q < max ? q : max and q > -max ? q : -max.
  return _mm256_max_ps(_mm256_min_ps(q, k.max_norm), k.neg_max_norm);
}

/// encodeElement of 8 grid values q, masked to the code width.
template <bool Int>
inline __m256i encode8(__m256 q, const Elem8& k) {
  const __m256i b = _mm256_castps_si256(q);
  const __m256i a = _mm256_and_si256(b, _mm256_set1_epi32(0x7FFFFFFF));
  if constexpr (Int) {
    const __m256i n = _mm256_cvttps_epi32(_mm256_mul_ps(_mm256_castsi256_ps(a), k.code_mul));
    return _mm256_and_si256(_mm256_sign_epi32(n, b), k.code_mask);  // sign_epi32: -n where q < 0
  } else {
    // Normal: (a >> (23 - m)) is ((e + 127) << m) | mantissa; rebiasing the exponent is one
    // subtraction. Below emin: the mantissa of the subnormal code, a * 2^(m - emin).
    const __m256i normal = _mm256_sub_epi32(_mm256_srl_epi32(a, k.mant_shift), k.rebias);
    const __m256i sub = _mm256_cvttps_epi32(_mm256_mul_ps(_mm256_castsi256_ps(a), k.code_mul));
    const __m256i is_normal = _mm256_cmpgt_epi32(a, _mm256_sub_epi32(k.emin_field, _mm256_set1_epi32(1)));
    const __m256i mag = _mm256_blendv_epi8(sub, normal, is_normal);
    const __m256i sign = _mm256_srl_epi32(_mm256_and_si256(b, _mm256_set1_epi32(static_cast<int32_t>(0x80000000u))), k.sign_shift);
    const __m256i code = _mm256_andnot_si256(_mm256_cmpeq_epi32(a, _mm256_setzero_si256()), _mm256_or_si256(mag, sign));
    return _mm256_and_si256(code, k.code_mask);
  }
}

/// hash32 (mx_numerics.h) of 8 lanes.
inline __m256i hash8(__m256i x) {
  x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 16));
  x = _mm256_mullo_epi32(x, _mm256_set1_epi32(0x7feb352d));
  x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 15));
  x = _mm256_mullo_epi32(x, _mm256_set1_epi32(static_cast<int32_t>(0x846ca68bu)));
  return _mm256_xor_si256(x, _mm256_srli_epi32(x, 16));
}

/// elementRandom(key, first + lane) of lanes 0..7.
inline __m256i random8(uint32_t key, uint64_t first) {
  if ((first >> 32) == ((first + 7) >> 32)) {
    const uint32_t hi = hash32(static_cast<uint32_t>(first >> 32) ^ key);
    const __m256i lo = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int32_t>(static_cast<uint32_t>(first))),
                                        _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    return hash8(_mm256_xor_si256(lo, _mm256_set1_epi32(static_cast<int32_t>(hi))));
  }
  alignas(32) uint32_t r[8];
  for (int l = 0; l < 8; ++l) r[l] = elementRandom(key, first + static_cast<uint64_t>(l));
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(r));
}

/// What the lanes of 8 blocks need: 1 / X and X; for a dead block (NaN scale, or flushed)
/// live = 0 and the value every element takes (NaN or +0); s, the E8M0 bytes.
struct Blocks8 {
  __m256 inv, scale, live, fill;
  __m256i s;
};

/// sharedScaleBits (mx_numerics.h) and the scalar kernels' dead-block rules (mx_kernels_impl.h)
/// of 8 blocks from their max |x| (NaN lanes ignored) and NaN lanes.
inline Blocks8 blocks8(__m256 amax, __m256 nan, const MxCall& c) {
  const __m256i bits = _mm256_castps_si256(amax);
  const __m256i eb = _mm256_and_si256(_mm256_srli_epi32(bits, 23), _mm256_set1_epi32(0xFF));
  const __m256i mant = _mm256_and_si256(bits, _mm256_set1_epi32(0x7FFFFF));
  const __m256i zero = _mm256_setzero_si256(), one = _mm256_set1_epi32(1);
  const __m256i nonzero_mant = _mm256_andnot_si256(_mm256_cmpeq_epi32(mant, zero), one);
  __m256i s;
  if (c.scale_mode == 3) {  // rceil: 2^ceil(log2(amax / max_norm)) from the fp32 quotient
    const __m256i t = _mm256_castps_si256(_mm256_div_ps(amax, _mm256_set1_ps(c.max_norm)));
    const __m256i te = _mm256_and_si256(_mm256_srli_epi32(t, 23), _mm256_set1_epi32(0xFF));
    const __m256i tm = _mm256_and_si256(t, _mm256_set1_epi32(0x7FFFFF));
    const __m256i normal = _mm256_add_epi32(te, _mm256_andnot_si256(_mm256_cmpeq_epi32(tm, zero), one));
    const __m256i sub = _mm256_and_si256(_mm256_cmpgt_epi32(tm, _mm256_set1_epi32(0x400000)), one);
    s = _mm256_blendv_epi8(normal, sub, _mm256_cmpeq_epi32(te, zero));
  } else {
    __m256i e = eb;
    if (c.scale_mode == 1) {  // ceil
      e = _mm256_add_epi32(eb, nonzero_mant);
    } else if (c.scale_mode == 2) {  // even
      const int32_t shift = 23 - c.m - 1;
      e = _mm256_srli_epi32(_mm256_and_si256(_mm256_add_epi32(bits, _mm256_set1_epi32(shift >= 0 ? (1 << shift) : 0)),
                                             _mm256_set1_epi32(0x7F800000)), 23);
    }
    s = _mm256_max_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(c.emax)), zero);  // u + 127, at least 0
  }
  // Beyond 2^127, Inf (eb 255) and NaN lanes: the NaN scale 255.
  s = _mm256_min_epi32(s, _mm256_set1_epi32(255));
  const __m256i nan_s = _mm256_or_si256(_mm256_castps_si256(nan), _mm256_cmpeq_epi32(eb, _mm256_set1_epi32(255)));
  s = _mm256_blendv_epi8(s, _mm256_set1_epi32(255), nan_s);
  const __m256i is_nan = _mm256_cmpeq_epi32(s, _mm256_set1_epi32(255));
  const __m256i dead = c.flush_fp32_subnorms ? _mm256_or_si256(is_nan, _mm256_cmpeq_epi32(eb, zero)) : is_nan;
  // X = 2^(s - 127) and 1 / X as bits: byte 0 and the reciprocal of byte 254 are 2^-127, the
  // fp32 subnormal 0x00400000.
  const __m256i tiny = _mm256_set1_epi32(0x00400000);
  const __m256i x_bits = _mm256_blendv_epi8(_mm256_slli_epi32(s, 23), tiny, _mm256_cmpeq_epi32(s, zero));
  const __m256i inv_bits = _mm256_blendv_epi8(_mm256_slli_epi32(_mm256_sub_epi32(_mm256_set1_epi32(254), s), 23), tiny,
                                              _mm256_cmpeq_epi32(s, _mm256_set1_epi32(254)));
  Blocks8 b;
  b.s = s;
  b.live = _mm256_castsi256_ps(_mm256_xor_si256(dead, _mm256_set1_epi32(-1)));
  b.scale = _mm256_and_ps(_mm256_castsi256_ps(x_bits), b.live);
  b.inv = _mm256_and_ps(_mm256_castsi256_ps(inv_bits), b.live);
  b.fill = _mm256_and_ps(_mm256_castsi256_ps(is_nan), _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC00000)));
  return b;
}

/// Lane k of v in every lane.
inline __m256 broadcastLane(__m256 v, int k) { return _mm256_permutevar8x32_ps(v, _mm256_set1_epi32(k)); }

/// mx_fake_quantize of 8 lanes of one or several blocks.
template <bool Int, int R>
inline __m256 fakeQuantize8(__m256 x, __m256 inv, __m256 scale, __m256 live, __m256 fill, const Elem8& k, __m256i rnd) {
  const __m256 q = _mm256_mul_ps(quantize8<Int, R>(_mm256_and_ps(_mm256_mul_ps(x, inv), live), k, rnd), scale);
  return _mm256_blendv_ps(fill, q, live);
}

/// mx_quantize codes of 8 lanes (dead lanes: code 0, the code of +0).
template <bool Int, int R>
inline __m256i encodeLanes8(__m256 x, __m256 inv, __m256 live, const Elem8& k, __m256i rnd) {
  return encode8<Int>(quantize8<Int, R>(_mm256_and_ps(_mm256_mul_ps(x, inv), live), k, rnd), k);
}

#include "kernels/cpu/mx_avx2_loops.h"
