// bf16 elements of float formats worked on as 16-bit words: 32 lanes per instruction instead of
// the 16 of fp32 lanes, no widening or narrowing, and the lanes stay in element order. Included
// by mx_simd_avx512.h after BlockParams16; used by the loops for bf16 input, rounding nearest,
// even or toward zero, on blocks whose parameters are BlockParams16::fast.
//
// A bf16 word is sign | exponent (8 bits, bias 127) | 7 mantissa bits, and |x| orders as an
// unsigned integer. With e1 = emin + s + 126 (the biased exponent just below the block's normal
// range, >= 0 on a fast block) and h = 7 - m:
//   |x| >= thr = 2^(emin + s), word (e1 + 1) << 7: the code is (|x| - (e1 << 7) + half) >> h,
//     as encodeFloatFast16 does on fp32 bits: k1 = (e1 << 7) - half, half the rounding add;
//   any |x|: with E its exponent field, E1 = min(max(E, 1) - 1, e1) and the significand
//     v = |x| - (E1 << 7) (the hidden bit is the exponent field's 1 left behind; E = 0 keeps
//     the bare fraction of a bf16 subnormal), the code is v rounded at bit h + e1 - E1, which is
//     h for a normal element and round(|x| / 2^(emin + s - m)) for one below thr, zero included.
// The first form is 2 instructions and covers a vector whose lanes are all >= thr; the second
// is 10 and covers every vector (fp8 data rarely needs it; fp4 and fp6 blocks usually do).
// fakeQuantizeWords puts the rounded significand back over its exponent instead of shifting it
// down. Against the fp32-lane kernels on the 2-core Zen 4 VM (bf16, 4 Mi elements in L3, one
// thread, interleaved A/B): mx_quantize 1.1-1.4x, mx_fake_quantize 1.0-1.5x faster.

/// Per-block word parameters, each 16-bit value repeated in both halves of a 32-bit lane so that
/// a block's values are one vpbroadcastd from memory (a load, not a shuffle).
struct WordParams16 {
  alignas(64) int32_t k1[16];   // (e1 << 7) - the rounding add of the first form
  alignas(64) int32_t thr[16];  // (e1 + 1) << 7
  alignas(64) int32_t e1[16];
  alignas(64) int32_t b[16];    // bf16 word of max_norm * 2^s (exact: max_norm has <= 4 significant bits)
};

/// Word parameters of the fast blocks of bp (other lanes: unused values).
PT2Q_MX_INLINE void wordParams16(const BlockParams16& bp, const MxCall& c, WordParams16* out) {
  const __m512i e1 = _mm512_max_epi32(_mm512_add_epi32(_mm512_sub_epi32(bp.s, _mm512_set1_epi32(127)),
                                                       _mm512_set1_epi32(c.emin + 126)),
                                      _mm512_setzero_si512());
  const int32_t half = c.rounding == 0 ? (1 << (6 - c.m)) : (c.rounding == 1 ? (1 << (6 - c.m)) - 1 : 0);
  const __m512i k1 = _mm512_sub_epi32(_mm512_slli_epi32(e1, 7), _mm512_set1_epi32(half));
  const __m512i thr = _mm512_slli_epi32(_mm512_add_epi32(e1, _mm512_set1_epi32(1)), 7);
  const __m512i b = _mm512_srli_epi32(_mm512_castps_si512(_mm512_load_ps(bp.b)), 16);
  auto pair = [](__m512i v) { return _mm512_or_si512(_mm512_and_si512(v, _mm512_set1_epi32(0xFFFF)), _mm512_slli_epi32(v, 16)); };
  _mm512_store_si512(out->k1, pair(k1));
  _mm512_store_si512(out->thr, pair(thr));
  _mm512_store_si512(out->e1, pair(e1));
  _mm512_store_si512(out->b, pair(b));
}

/// The vectors the word kernels take: one block's values broadcast, or per lane (strided blocks).
struct WordVecs {
  __m512i k1, thr, e1, b;
};

PT2Q_MX_INLINE WordVecs blockWordVecs(const WordParams16& w, int64_t k) {
  return {_mm512_set1_epi32(w.k1[k]), _mm512_set1_epi32(w.thr[k]), _mm512_set1_epi32(w.e1[k]), _mm512_set1_epi32(w.b[k])};
}

/// Per-format word constants.
struct WordConsts {
  __m128i h;          // 7 - m
  __m512i h_vec;      // 7 - m in every word
  __m512i max_code;   // the code of max_norm
  __m512i sign_code;  // 1 << (ebits + m)
  __m512i keep;       // bf16 bits kept by m mantissa bits
  __m512i half;       // the rounding add of fake-quantize (as k1's)
};

PT2Q_MX_INLINE WordConsts wordConsts(const MxCall& c, const ElemConsts& k) {
  WordConsts w;
  w.h = _mm_cvtsi32_si128(7 - c.m);
  w.h_vec = _mm512_set1_epi16(static_cast<int16_t>(7 - c.m));
  w.max_code = _mm512_set1_epi16(static_cast<int16_t>(_mm_cvtsi128_si32(_mm512_castsi512_si128(k.max_code_i))));
  w.sign_code = _mm512_set1_epi16(static_cast<int16_t>(1 << (c.ebits + c.m)));
  w.keep = _mm512_set1_epi16(static_cast<int16_t>(~((1 << (7 - c.m)) - 1)));
  const int32_t half = c.rounding == 0 ? (1 << (6 - c.m)) : (c.rounding == 1 ? (1 << (6 - c.m)) - 1 : 0);
  w.half = _mm512_set1_epi16(static_cast<int16_t>(half));
  return w;
}

/// Whether a call can take the word kernels: bf16 in, a float format of at most 6 mantissa
/// bits, a deterministic rounding.
template <FloatKind K, bool Int, int R>
inline bool wordsApply(const MxCall& c) {
  return K == FloatKind::kBF16 && !Int && R != 3 && c.m <= 6;
}

/// The rounding add at bit sh - 1 of the significand v for rounding mode R (see roundToInteger):
/// half a step (ties away), half a step less one plus the kept part's lowest bit (ties to even),
/// or nothing (toward zero); 0 where sh > 15.
template <int R>
PT2Q_MX_INLINE __m512i roundingAdd(__m512i v, __m512i sh) {
  if constexpr (R == 2) return _mm512_setzero_si512();
  const __m512i half = _mm512_srli_epi16(_mm512_sllv_epi16(_mm512_set1_epi16(1), sh), 1);
  if constexpr (R == 0) return half;
  const __m512i odd = _mm512_and_si512(_mm512_srlv_epi16(v, sh), _mm512_set1_epi16(1));
  return _mm512_add_epi16(_mm512_subs_epu16(half, _mm512_set1_epi16(1)), odd);
}

/// The 32 codes (words, element order, sign included) of 32 bf16 elements x on fast blocks.
template <int R>
PT2Q_MX_INLINE __m512i encodeWords(__m512i x, const WordVecs& p, const WordConsts& w) {
  const __m512i ax = _mm512_and_si512(x, _mm512_set1_epi16(0x7FFF));
  __m512i code;
  if (_mm512_cmplt_epu16_mask(ax, p.thr) == 0) {
    __m512i v = ax;
    if constexpr (R == 1) v = _mm512_add_epi16(v, _mm512_and_si512(_mm512_srl_epi16(v, w.h), _mm512_set1_epi16(1)));
    code = _mm512_srl_epi16(_mm512_sub_epi16(v, p.k1), w.h);
  } else {
    const __m512i e = _mm512_min_epu16(_mm512_subs_epu16(_mm512_srli_epi16(ax, 7), _mm512_set1_epi16(1)), p.e1);
    const __m512i v = _mm512_sub_epi16(ax, _mm512_slli_epi16(e, 7));
    const __m512i sh = _mm512_add_epi16(w.h_vec, _mm512_sub_epi16(p.e1, e));
    code = _mm512_srlv_epi16(_mm512_add_epi16(v, roundingAdd<R>(v, sh)), sh);
  }
  code = _mm512_min_epu16(code, w.max_code);
  // -0 (and anything rounding to 0) keeps code +0; the sign bit is clear, so adding sets it
  const __mmask32 neg = _mm512_mask_test_epi16_mask(_mm512_movepi16_mask(x), code, code);
  return _mm512_mask_add_epi16(code, neg, code, w.sign_code);
}

/// Fake-quantized words of 32 bf16 elements x on fast blocks. When every nonzero |x| >= thr: half
/// a step added to |x|'s bits, which are cut to m mantissa bits (a carry is the exponent
/// increment). Otherwise the second form's significand v is rounded to a multiple of 2^sh and
/// put back over its exponent, E1 << 7 (a carry again the increment; a significand rounded to 0
/// is +0). Then min(q, b), and x's sign unless q is 0 (fakeQuantize16's q + 0).
template <int R>
PT2Q_MX_INLINE __m512i fakeQuantizeWords(__m512i x, const WordVecs& p, const WordConsts& w) {
  const __m512i ax = _mm512_and_si512(x, _mm512_set1_epi16(0x7FFF));
  __m512i q;
  if (_mm512_mask_cmplt_epu16_mask(_mm512_test_epi16_mask(ax, ax), ax, p.thr) == 0) {
    __m512i v = ax;
    if constexpr (R == 1) v = _mm512_add_epi16(v, _mm512_and_si512(_mm512_srl_epi16(v, w.h), _mm512_set1_epi16(1)));
    q = _mm512_and_si512(_mm512_add_epi16(v, w.half), w.keep);
  } else {
    const __m512i e = _mm512_min_epu16(_mm512_subs_epu16(_mm512_srli_epi16(ax, 7), _mm512_set1_epi16(1)), p.e1);
    const __m512i eb = _mm512_slli_epi16(e, 7);
    const __m512i v = _mm512_sub_epi16(ax, eb);
    const __m512i sh = _mm512_add_epi16(w.h_vec, _mm512_sub_epi16(p.e1, e));
    const __m512i r = _mm512_and_si512(_mm512_add_epi16(v, roundingAdd<R>(v, sh)),
                                       _mm512_sllv_epi16(_mm512_set1_epi16(-1), sh));
    q = _mm512_maskz_add_epi16(_mm512_test_epi16_mask(r, r), r, eb);
  }
  q = _mm512_min_epu16(q, p.b);
  // q < 0x8000 (min with b), so adding the sign bit sets it
  return _mm512_mask_add_epi16(q, _mm512_mask_test_epi16_mask(_mm512_movepi16_mask(x), q, q), q,
                               _mm512_set1_epi16(static_cast<int16_t>(0x8000)));
}
