// bf16 elements of float formats worked on as 16-bit words: 32 lanes per instruction instead of
// the 16 of fp32 lanes, no widening or narrowing, and the lanes stay in element order. Included
// by mx_simd_avx512.h after BlockParams16; used by the loops for bf16 input, rounding nearest,
// even or toward zero, and by mx_quantize for fp32 input through its top 16 bits (topWords),
// rounding nearest or toward zero, on blocks whose parameters are BlockParams16::fast.
// fp4_e2m1 codes come from a table instead (Fp4Table).
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
//     The shift is hs - E1 with hs = h + e1 per block; for rounding to nearest hs is one less and
//     the code (v >> (hs - E1) + 1) >> 1, the rounding add folded into the two shifts.
// The first form is 2 instructions and covers a vector whose lanes are all >= thr; the second
// is 9 and covers every vector (fp8 data rarely needs it; fp4 and fp6 blocks usually do).
// fakeQuantizeWords puts the rounded significand back over its exponent instead of shifting it
// down. Against the fp32-lane kernels on the 2-core Zen 4 VM (bf16, 4 Mi elements in L3, one
// thread, interleaved A/B): mx_quantize 1.1-1.4x, mx_fake_quantize 1.0-1.5x faster.

/// The low 16 bits of each 32-bit lane repeated in its high half (for vpbroadcastd, see
/// WordParams16).
PT2Q_MX_INLINE __m512i pairWords(__m512i v) {
  return _mm512_or_si512(_mm512_and_si512(v, _mm512_set1_epi32(0xFFFF)), _mm512_slli_epi32(v, 16));
}

/// Fp4Table's base of 16 blocks (32-bit lanes) from their scale bytes sv.
PT2Q_MX_INLINE __m512i fp4Base16(__m512i sv, const MxCall& c) {
  return _mm512_sub_epi32(_mm512_slli_epi32(_mm512_add_epi32(sv, _mm512_set1_epi32(c.emin - 1)), 7), _mm512_set1_epi32(128 + 32));
}

/// Per-block word parameters, each 16-bit value repeated in both halves of a 32-bit lane so that
/// a block's values are one vpbroadcastd from memory (a load, not a shuffle).
struct WordParams16 {
  alignas(64) int32_t k1[16];   // (e1 << 7) - the rounding add of the first form
  alignas(64) int32_t thr[16];  // (e1 + 1) << 7
  alignas(64) int32_t e1[16];
  alignas(64) int32_t hs[16];   // h + e1, one less for rounding to nearest
  alignas(64) int32_t base[16]; // ((e1 - 1) << 7) - 32, Fp4Table's base
  alignas(64) int32_t b[16];    // bf16 word of max_norm * 2^s (exact: max_norm has <= 4 significant bits)
};

/// Word parameters of the fast blocks of E8M0 bytes sv (other lanes: unused values); b, the
/// fp32 max_norm * 2^s (0 for flushed blocks), only where `fake`.
PT2Q_MX_INLINE void wordParams16(__m512i sv, __m512 b32, bool fake, const MxCall& c, WordParams16* out) {
  const __m512i e1 = _mm512_max_epi32(_mm512_add_epi32(sv, _mm512_set1_epi32(c.emin - 1)), _mm512_setzero_si512());
  const int32_t half = c.rounding == 0 ? (1 << (6 - c.m)) : (c.rounding == 1 ? (1 << (6 - c.m)) - 1 : 0);
  const __m512i k1 = _mm512_sub_epi32(_mm512_slli_epi32(e1, 7), _mm512_set1_epi32(half));
  const __m512i thr = _mm512_slli_epi32(_mm512_add_epi32(e1, _mm512_set1_epi32(1)), 7);
  const __m512i hs = _mm512_add_epi32(e1, _mm512_set1_epi32(7 - c.m - (c.rounding == 0 ? 1 : 0)));
  _mm512_store_si512(out->k1, pairWords(k1));
  _mm512_store_si512(out->thr, pairWords(thr));
  _mm512_store_si512(out->e1, pairWords(e1));
  _mm512_store_si512(out->hs, pairWords(hs));
  _mm512_store_si512(out->base, pairWords(fp4Base16(sv, c)));
  if (fake) _mm512_store_si512(out->b, pairWords(_mm512_srli_epi32(_mm512_castps_si512(b32), 16)));
}

PT2Q_MX_INLINE void wordParams16(const BlockParams16& bp, const MxCall& c, WordParams16* out) {
  wordParams16(bp.s, _mm512_load_ps(bp.b), true, c, out);
}

/// The vectors the word kernels take: one block's values broadcast, or per lane (strided blocks).
struct WordVecs {
  __m512i k1, thr, e1, hs, b;
};

PT2Q_MX_INLINE WordVecs blockWordVecs(const WordParams16& w, int64_t k) {
  return {_mm512_set1_epi32(w.k1[k]), _mm512_set1_epi32(w.thr[k]), _mm512_set1_epi32(w.e1[k]), _mm512_set1_epi32(w.hs[k]),
          _mm512_set1_epi32(w.b[k])};
}

/// Per-format word constants.
struct WordConsts {
  __m128i h;          // 7 - m
  __m512i max_code;   // the code of max_norm (integers: its |n|)
  __m512i sign_code;  // 1 << (ebits + m); integers: 1 << code_bits, less |n| for a negative code
  __m512i keep;       // bf16 bits kept by m mantissa bits
  __m512i half;       // the rounding add of fake-quantize (as k1's)
};

PT2Q_MX_INLINE WordConsts wordConsts(const MxCall& c, const ElemConsts& k) {
  WordConsts w;
  w.h = _mm_cvtsi32_si128(7 - c.m);
  if (c.is_int) {
    w.max_code = _mm512_set1_epi16(static_cast<int16_t>(std::ldexp(c.max_norm, c.m)));
    w.sign_code = _mm512_set1_epi16(static_cast<int16_t>(1 << c.code_bits));
  } else {
    w.max_code = _mm512_set1_epi16(static_cast<int16_t>(_mm_cvtsi128_si32(_mm512_castsi512_si128(k.max_code_i))));
    w.sign_code = _mm512_set1_epi16(static_cast<int16_t>(1 << (c.ebits + c.m)));
  }
  w.keep = _mm512_set1_epi16(static_cast<int16_t>(~((1 << (7 - c.m)) - 1)));
  const int32_t half = c.rounding == 0 ? (1 << (6 - c.m)) : (c.rounding == 1 ? (1 << (6 - c.m)) - 1 : 0);
  w.half = _mm512_set1_epi16(static_cast<int16_t>(half));
  return w;
}

/// fp4_e2m1 codes by table, for rounding to nearest or toward zero. Relative to its block, an
/// element's code depends only on its binade and top two mantissa bits: every rounding threshold
/// (0.25, 0.75, 1.25, ... 5 times 2^s to nearest; 0.5, 1, 1.5, ... toward zero) starts such a
/// cell, and below 2^(s-2) every code is 0 (nearest and toward zero). With `base` the bf16 word
/// of 2^(s-2) less one cell (32), a cell is min((|x| - base) >> 5, 31): 0 below 2^(s-2) by the
/// saturating subtraction, then 4 per binade, 21 and up at 2^(s+3) (code 7); the sign selects
/// the second table (code | 8, but 0 for 0).
/// 6 instructions a vector instead of the second form's 9 plus sign handling. Needs 2^(s-2) to
/// be a normal bf16 number: blocks with e1 >= 2. fp32 elements take it on their top 16 bits
/// (truncation keeps the binade and the top mantissa bits).
struct Fp4Table {
  bool on = false;
  __m512i pos, neg;
};

inline Fp4Table fp4Table(const MxCall& c) {
  Fp4Table t;
  if (c.is_int || c.ebits != 2 || c.m != 1 || (c.rounding != 0 && c.rounding != 2)) return t;
  const ElemParams p{false, c.emin, c.m, c.emax, c.max_norm};
  alignas(64) int16_t pos[32], neg[32];
  for (int i = 0; i < 32; ++i) {
    // the cell's first value / 2^s (cell 0: below 2^(s-2))
    const float v = i == 0 ? 0.0f : std::ldexp(1.0f + static_cast<float>((i - 1) % 4) / 4.0f, (i - 1) / 4 - 2);
    const float qp = c.rounding == 0 ? quantizeElement<0>(v, p, 0) : quantizeElement<2>(v, p, 0);
    const float qn = c.rounding == 0 ? quantizeElement<0>(-v, p, 0) : quantizeElement<2>(-v, p, 0);
    pos[i] = static_cast<int16_t>(encodeElement(qp, p, c.ebits, 4));
    neg[i] = static_cast<int16_t>(encodeElement(qn, p, c.ebits, 4));
  }
  t.on = true;
  t.pos = _mm512_load_si512(pos);
  t.neg = _mm512_load_si512(neg);
  return t;
}

/// Whether the blocks `live` of scale bytes sv can all take the table (e1 = sv + emin - 1 >= 2).
PT2Q_MX_INLINE bool fp4TableApplies(bool on, __m512i sv, __mmask16 live, const MxCall& c) {
  return on && (_mm512_cmplt_epi32_mask(sv, _mm512_set1_epi32(3 - c.emin)) & live) == 0;
}

/// The 32 codes (words, element order) of 32 bf16 elements x of a block whose table base is
/// `base` (see Fp4Table).
PT2Q_MX_INLINE __m512i encodeFp4Table(__m512i x, __m512i base, const Fp4Table& t) {
  const __m512i ax = _mm512_and_si512(x, _mm512_set1_epi16(0x7FFF));
  const __m512i cell = _mm512_min_epu16(_mm512_srli_epi16(_mm512_subs_epu16(ax, base), 5), _mm512_set1_epi16(31));
  // cell | (x >> 10 & 0x20): bit 5, the sign, picks the second table
  const __m512i at = _mm512_ternarylogic_epi32(cell, _mm512_srli_epi16(x, 10), _mm512_set1_epi16(0x20), 0xF8);
  return _mm512_permutex2var_epi16(t.pos, at, t.neg);
}

/// Whether a call can take the word kernels: bf16 in, a float format of at most 6 mantissa
/// bits or an integer format of at most 8 bits, a deterministic rounding. An integer format is
/// the second form with no normal range: e1 = s + 126 is just below every element of the block
/// (|x| < 2^(s + 1)), so the significand of each is cut at bit h + e1 - E1, n = |x| / 2^(s - m)
/// rounded, and a negative code is 2^bits - n.
template <FloatKind K, bool Int, int R>
inline bool wordsApply(const MxCall& c) {
  return K == FloatKind::kBF16 && R != 3 && c.m <= 6 && (!Int || c.code_bits <= 8);
}

/// Whether mx_quantize of a call can take the word kernels: those of fake-quantize, and fp32 in
/// rounding to nearest or toward zero, worked on through the top 16 bits of each element (see
/// topWords).
template <FloatKind K, bool Int, int R>
inline bool quantizeWordsApply(const MxCall& c) {
  return wordsApply<K, Int, R>(c) || (K == FloatKind::kF32 && (R == 0 || R == 2) && c.m <= 6 && (!Int || c.code_bits <= 8));
}

/// The top 16 bits of 32 fp32 elements (a: 0-15, b: 16-31) as words in element order: a bf16
/// word cut toward zero, the same sign, binade and top 7 mantissa bits. Every code of a format
/// with m <= 6 is exact from it for rounding to nearest (ties away: whether the first bit cut
/// off by the code is set, bit 6 - m or higher of the word for an element in the block's normal
/// range, and for one below it a value under half the smallest step whose bits are all cut) and
/// toward zero (the bits kept); ties to even also reads the bits below, which are gone.
PT2Q_MX_INLINE __m512i topWords(__m512 a, __m512 b) {
  const __m512i odd = _mm512_setr_epi32(0x00030001, 0x00070005, 0x000B0009, 0x000F000D, 0x00130011, 0x00170015,
                                        0x001B0019, 0x001F001D, 0x00230021, 0x00270025, 0x002B0029, 0x002F002D,
                                        0x00330031, 0x00370035, 0x003B0039, 0x003F003D);
  return _mm512_permutex2var_epi16(_mm512_castps_si512(a), odd, _mm512_castps_si512(b));
}

/// The words the kernels take of the chunk at p (lanes outside k: +0): bf16 as loaded, fp32 by
/// topWords.
template <FloatKind K>
PT2Q_MX_INLINE __m512i loadWords(const char* p, __mmask32 k) {
  if constexpr (K == FloatKind::kF32) {
    __m512 a, b;
    loadChunk<K>(p, k, a, b);
    return topWords(a, b);
  } else {
    return k == 0xFFFFFFFFu ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi16(k, p);
  }
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
template <int R, bool Int = false>
PT2Q_MX_INLINE __m512i encodeWords(__m512i x, const WordVecs& p, const WordConsts& w) {
  const __m512i ax = _mm512_and_si512(x, _mm512_set1_epi16(0x7FFF));
  __m512i code;
  if (!Int && _mm512_cmplt_epu16_mask(ax, p.thr) == 0) {
    __m512i v = ax;
    if constexpr (R == 1) v = _mm512_add_epi16(v, _mm512_and_si512(_mm512_srl_epi16(v, w.h), _mm512_set1_epi16(1)));
    code = _mm512_srl_epi16(_mm512_sub_epi16(v, p.k1), w.h);
  } else {
    const __m512i e = _mm512_min_epu16(_mm512_subs_epu16(_mm512_srli_epi16(ax, 7), _mm512_set1_epi16(1)), p.e1);
    const __m512i v = _mm512_sub_epi16(ax, _mm512_slli_epi16(e, 7));
    const __m512i sh = _mm512_sub_epi16(p.hs, e);  // R == 0: one less than the rounding shift
    if constexpr (R == 0) {
      const __m512i one = _mm512_set1_epi16(1);
      code = _mm512_srli_epi16(_mm512_add_epi16(_mm512_srlv_epi16(v, sh), one), 1);
    } else {
      code = _mm512_srlv_epi16(_mm512_add_epi16(v, roundingAdd<R>(v, sh)), sh);
    }
  }
  code = _mm512_min_epu16(code, w.max_code);
  // -0 (and anything rounding to 0) keeps code +0; the sign bit is clear, so adding sets it
  const __mmask32 neg = _mm512_mask_test_epi16_mask(_mm512_movepi16_mask(x), code, code);
  if constexpr (Int) return _mm512_mask_sub_epi16(code, neg, w.sign_code, code);
  return _mm512_mask_add_epi16(code, neg, code, w.sign_code);
}

/// Fake-quantized words of 32 bf16 elements x on fast blocks. When every nonzero |x| >= thr: half
/// a step added to |x|'s bits, which are cut to m mantissa bits (a carry is the exponent
/// increment). Otherwise the second form's significand v is rounded to a multiple of 2^sh and
/// put back over its exponent, E1 << 7 (a carry again the increment; a significand rounded to 0
/// is +0). Then min(q, b), and x's sign unless q is 0 (fakeQuantize16's q + 0).
template <int R, bool Int = false>
PT2Q_MX_INLINE __m512i fakeQuantizeWords(__m512i x, const WordVecs& p, const WordConsts& w) {
  const __m512i ax = _mm512_and_si512(x, _mm512_set1_epi16(0x7FFF));
  __m512i q;
  if (!Int && _mm512_mask_cmplt_epu16_mask(_mm512_test_epi16_mask(ax, ax), ax, p.thr) == 0) {
    __m512i v = ax;
    if constexpr (R == 1) v = _mm512_add_epi16(v, _mm512_and_si512(_mm512_srl_epi16(v, w.h), _mm512_set1_epi16(1)));
    q = _mm512_and_si512(_mm512_add_epi16(v, w.half), w.keep);
  } else {
    const __m512i e = _mm512_min_epu16(_mm512_subs_epu16(_mm512_srli_epi16(ax, 7), _mm512_set1_epi16(1)), p.e1);
    const __m512i eb = _mm512_slli_epi16(e, 7);
    const __m512i v = _mm512_sub_epi16(ax, eb);
    const __m512i sh = _mm512_sub_epi16(p.hs, e);  // R == 0: one less than the rounding shift
    __m512i r;
    if constexpr (R == 0) {
      r = _mm512_and_si512(_mm512_add_epi16(v, _mm512_sllv_epi16(_mm512_set1_epi16(1), sh)),
                           _mm512_sllv_epi16(_mm512_set1_epi16(-2), sh));
    } else {
      r = _mm512_and_si512(_mm512_add_epi16(v, roundingAdd<R>(v, sh)), _mm512_sllv_epi16(_mm512_set1_epi16(-1), sh));
    }
    q = _mm512_maskz_add_epi16(_mm512_test_epi16_mask(r, r), r, eb);
  }
  q = _mm512_min_epu16(q, p.b);
  // q < 0x8000 (min with b), so adding the sign bit sets it
  return _mm512_mask_add_epi16(q, _mm512_mask_test_epi16_mask(_mm512_movepi16_mask(x), q, q), q,
                               _mm512_set1_epi16(static_cast<int16_t>(0x8000)));
}
