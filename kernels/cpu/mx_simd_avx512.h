// AVX-512 bodies of the MX / BFP kernels, 32 elements (one chunk, mx_avx512_io.h) per step.
// bf16 input of the float formats, and fp32 input of their mx_quantize, mostly take the 16-bit
// word kernels of mx_words_avx512.h (16 blocks at a time: mx_words_group_avx512.h).
// Included by mx_kernels_impl.h inside the avx512 namespace, after mx_numerics.h, whose scalar
// sharedScaleBits / quantizeElement / encodeElement this computes another way (tested bit for
// bit against the numpy specification, the ATen reference and the portable C++ kernels).
//
// The scalar form divides by the block scale X = 2^s, splits off the element exponent with bit
// operations and multiplies back. Here every power of two is an exponent handed to scalef, and
// the block scale never becomes a separate multiply:
//   fp elements:  t = max(getexp(x), emin + s)          (= max(e(x / X), emin) + s)
//                 n = round(x * 2^(m - t))               (signed; exact, |n| <= 2^(m+1))
//                 q = clamp(n * 2^(t - m), max_norm * 2^s)
//   int elements: n = clamp(round(x * 2^(m - s)), max_norm * 2^m),   q = n * 2^(s - m)
// with q + 0 turning -0 into +0. It matches the scalar form exactly: x / X is exact unless it is
// an fp32 subnormal, and then both forms round it to 0 in every rounding mode; rounding is
// monotone, so clamping before or after the one rounding multiply by X gives the same result.
// The codes of mx_quantize come from the same t and n: for fp elements the code is
// ((t - s - emin) << m) + |n| (the carry of n = 2^(m+1) is the exponent increment, and t = emin
// with n < 2^m is the subnormal code), clamped to the code of max_norm; for integers it is n.

#include "kernels/cpu/mx_avx512_io.h"

/// Per-format vectors.
struct ElemConsts {
  __m512 m;         // stored mantissa bits
  __m512 two_m;     // 2^m
  __m512 nmax;      // integers: max_norm * 2^m, the clamp of n
  __m512 max_code;  // floats: the code of max_norm
  __m512i code_mask;
  __m512i sign_code;     // floats: the code's sign bit, 1 << (ebits + m)
  __m512i max_code_i;    // floats: max_code as an integer
  __m128i mant_shift;    // floats: 23 - m, the shift from fp32 bits to the code's mantissa
  __m512i keep_mant;     // floats: fp32 bits kept by m mantissa bits, ~((1 << (23 - m)) - 1)
  __m512i half_step;     // floats: half a step of m mantissa bits in fp32 bits, 1 << (22 - m)
  // fp8 formats (10 binades or more): nonzero elements below the normal range of their block are
  // rare, so fakeQuantizeFloatFast16 pays off (for fp6_e3m2 and randn blocks it halved the speed).
  bool fast_fake;
};

inline ElemConsts elemConsts(const MxCall& c) {
  const ElemParams p{c.is_int, c.emin, c.m, c.emax, c.max_norm};
  ElemConsts k;
  k.m = _mm512_set1_ps(static_cast<float>(c.m));
  k.two_m = _mm512_set1_ps(std::ldexp(1.0f, c.m));
  k.nmax = _mm512_set1_ps(std::ldexp(c.max_norm, c.m));
  k.max_code = _mm512_set1_ps(c.is_int ? 0.0f : static_cast<float>(encodeElement(c.max_norm, p, c.ebits, 32)));
  k.code_mask = _mm512_set1_epi32(c.code_bits >= 32 ? -1 : static_cast<int32_t>((1u << c.code_bits) - 1u));
  k.sign_code = _mm512_set1_epi32(c.is_int ? 0 : static_cast<int32_t>(1u << (c.ebits + c.m)));
  k.max_code_i = _mm512_cvttps_epi32(k.max_code);
  k.mant_shift = _mm_cvtsi32_si128(23 - c.m);
  const bool fp = !c.is_int && c.m <= 22;
  k.keep_mant = _mm512_set1_epi32(fp ? static_cast<int32_t>(~((1u << (23 - c.m)) - 1u)) : -1);
  k.half_step = _mm512_set1_epi32(fp ? static_cast<int32_t>(1u << (22 - c.m)) : 0);
  k.fast_fake = fp && c.emax - c.emin >= 10 && c.rounding == 0;
  return k;
}

// vrangeps: min(|a|, |b|) with the sign of a.
constexpr int kMinAbsSignOfA = 0x02;

/// x rounded to an integer (|x| < 2^24; Positive: x >= +0 is known). R: 0 nearest (ties away),
/// 1 even, 2 toward zero, 3 stochastic (up in magnitude when the fraction's 32 bits exceed rnd).
template <int R, bool Positive = false>
inline __m512 roundToInteger(__m512 x, __m512i rnd) {
  constexpr int kTrunc = _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC;
  if constexpr (R == 0) {
    // trunc(x + copysign(1/2, x)) with the sum rounded toward zero: rounding toward zero is
    // monotone and keeps every integer (|x| < 2^24), so the truncation sees the exact sum's
    // integer part (round to nearest would carry 0.49999997 + 0.5 up to 1).
    __m512 half = _mm512_set1_ps(0.5f);
    if constexpr (!Positive) {
      half = _mm512_castsi512_ps(_mm512_ternarylogic_epi32(
          _mm512_castps_si512(x), _mm512_set1_epi32(static_cast<int>(0x80000000u)), _mm512_castps_si512(half), 0xEA));
    }
    return _mm512_roundscale_ps(_mm512_add_round_ps(x, half, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC), kTrunc);
  } else if constexpr (R == 1) {
    return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  } else if constexpr (R == 2) {
    return _mm512_roundscale_ps(x, kTrunc);
  } else {
    const __m512 a = Positive ? x : _mm512_abs_ps(x);
    const __m512 n0 = _mm512_roundscale_ps(a, kTrunc);
    const __m512i t = _mm512_cvttps_epu32(_mm512_mul_ps(_mm512_sub_ps(a, n0), _mm512_set1_ps(4294967296.0f)));
    const __m512 n = _mm512_mask_add_ps(n0, _mm512_cmpgt_epu32_mask(t, rnd), n0, _mm512_set1_ps(1.0f));
    if constexpr (Positive) return n;
    return _mm512_or_ps(n, _mm512_and_ps(x, _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int>(0x80000000u)))));
  }
}

/// Fake-quantized x (values, not codes). a, b: the block parameters of blockParams16.
template <bool Int, int R>
inline __m512 fakeQuantize16(__m512 x, __m512 a, __m512 b, const ElemConsts& k, __m512i rnd) {
  if constexpr (Int) {
    const __m512 n = _mm512_range_ps(roundToInteger<R>(_mm512_scalef_ps(x, a), rnd), k.nmax, kMinAbsSignOfA);
    return _mm512_add_ps(_mm512_scalef_ps(n, b), _mm512_setzero_ps());
  } else {
    const __m512 t = _mm512_max_ps(_mm512_getexp_ps(x), a);
    const __m512 n = roundToInteger<R>(_mm512_scalef_ps(x, _mm512_sub_ps(k.m, t)), rnd);
    const __m512 q = _mm512_range_ps(_mm512_scalef_ps(n, _mm512_sub_ps(t, k.m)), b, kMinAbsSignOfA);
    return _mm512_add_ps(q, _mm512_setzero_ps());
  }
}

/// Element codes of x (int32 lanes masked to the code width); a as in fakeQuantize16.
template <bool Int, int R>
inline __m512i encode16(__m512 x, __m512 a, const ElemConsts& k, __m512i rnd) {
  if constexpr (Int) {
    // Clamped before rounding (nmax is an integer, rounding monotone: the same n), so the
    // conversion can round: one op fewer than roundToInteger's for nearest, two for the others.
    const __m512 v = _mm512_range_ps(_mm512_scalef_ps(x, a), k.nmax, kMinAbsSignOfA);
    __m512i n;
    if constexpr (R == 0) {
      const __m512 half = _mm512_castsi512_ps(_mm512_ternarylogic_epi32(
          _mm512_castps_si512(v), _mm512_set1_epi32(static_cast<int>(0x80000000u)),
          _mm512_castps_si512(_mm512_set1_ps(0.5f)), 0xEA));
      n = _mm512_cvttps_epi32(_mm512_add_round_ps(v, half, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC));
    } else if constexpr (R == 1) {
      n = _mm512_cvt_roundps_epi32(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    } else if constexpr (R == 2) {
      n = _mm512_cvttps_epi32(v);
    } else {
      n = _mm512_cvttps_epi32(roundToInteger<R>(v, rnd));
    }
    return _mm512_and_si512(n, k.code_mask);
  } else {
    const __m512 ax = _mm512_abs_ps(x);
    const __m512 t = _mm512_max_ps(_mm512_getexp_ps(ax), a);
    const __m512 n = roundToInteger<R, true>(_mm512_scalef_ps(ax, _mm512_sub_ps(k.m, t)), rnd);
    const __m512i code = _mm512_cvttps_epi32(_mm512_min_ps(_mm512_fmadd_ps(_mm512_sub_ps(t, a), k.two_m, n), k.max_code));
    const __mmask16 neg = _mm512_mask_test_epi32_mask(_mm512_movepi32_mask(_mm512_castps_si512(x)), code, code);
    return _mm512_mask_or_epi32(code, neg, code, k.sign_code);
  }
}

/// Float element codes straight from the fp32 bits (R: 0 nearest, 1 even, 2 toward zero), for
/// blocks whose parameters allow it (BlockParams16::fast). With v = |x| / 2^s:
///   |x| >= 2^(emin + s) (normal element): the code is v's bits shifted down to m mantissa bits
///     after adding half a code step (the carry of rounding up is the exponent increment), with
///     the exponent rebiased and 2^s removed, all in one integer subtraction of k1;
///   below (subnormal element): n = round(|x| * 2^(m - emin - s)), the product exact (a power
///     of two), for R == 0 as trunc(|x| * 2^.. + 1/2) with the fused sum rounded toward zero
///     (which keeps its integer part exact, see roundToInteger).
/// Then the clamp to max_norm's code and the sign as in encode16.
template <int R>
inline __m512i encodeFloatFast16(__m512 x, __m512i k1, __m512 thr, __m512 pmul, const ElemConsts& k) {
  const __m512 ax = _mm512_abs_ps(x);
  __m512i bx = _mm512_castps_si512(ax);
  if constexpr (R == 1) bx = _mm512_add_epi32(bx, _mm512_and_si512(_mm512_srl_epi32(bx, k.mant_shift), _mm512_set1_epi32(1)));
  const __m512i normal = _mm512_srl_epi32(_mm512_sub_epi32(bx, k1), k.mant_shift);
  constexpr int kRz = _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC;
  __m512i sub;
  if constexpr (R == 0) {
    sub = _mm512_cvttps_epi32(_mm512_fmadd_round_ps(ax, pmul, _mm512_set1_ps(0.5f), kRz));
  } else if constexpr (R == 1) {
    sub = _mm512_cvt_roundps_epi32(_mm512_mul_ps(ax, pmul), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  } else {
    sub = _mm512_cvttps_epi32(_mm512_mul_ps(ax, pmul));
  }
  __m512i code = _mm512_mask_mov_epi32(normal, _mm512_cmp_ps_mask(ax, thr, _CMP_LT_OQ), sub);
  code = _mm512_min_epu32(code, k.max_code_i);
  const __mmask16 neg = _mm512_mask_test_epi32_mask(_mm512_movepi32_mask(_mm512_castps_si512(x)), code, code);
  return _mm512_mask_or_epi32(code, neg, code, k.sign_code);
}

/// fakeQuantize16 of a float format with round-to-nearest (ties away) on a fast block
/// (BlockParams16::fast) from the fp32 bits, when every element is zero or in the block's normal
/// range (|x| >= thr = 2^(emin + s)): half a step of m mantissa bits added to |x|'s bits, which
/// are then cut to m (a carry is the exponent increment, as n = 2^(m+1) there), min(q, b) and x's
/// sign unless q is 0 (fakeQuantize16's q + 0). A vector holding a nonzero element below thr takes
/// fakeQuantize16. Used along the last axis only: round to even and the strided loops measured no
/// gain (up to 15 % loss), nearest along the last axis 11-13 % (fp8, in L3, 2-core Zen 5).
inline __m512 fakeQuantizeFloatFast16(__m512 x, __m512 a, __m512 b, __m512 thr, const ElemConsts& k) {
  const __m512 ax = _mm512_abs_ps(x);
  const __m512i bx = _mm512_castps_si512(ax);
  // Zeros (ReLU outputs) round to +0 here as well.
  if (_mm512_mask_cmp_ps_mask(_mm512_test_epi32_mask(bx, bx), ax, thr, _CMP_LT_OQ) != 0) {
    return fakeQuantize16<false, 0>(x, a, b, k, _mm512_setzero_si512());
  }
  const __m512i r = _mm512_and_si512(_mm512_add_epi32(bx, k.half_step), k.keep_mant);
  const __m512i q = _mm512_castps_si512(_mm512_min_ps(_mm512_castsi512_ps(r), b));
  const __mmask16 neg = _mm512_mask_test_epi32_mask(_mm512_movepi32_mask(_mm512_castps_si512(x)), q, q);
  return _mm512_castsi512_ps(_mm512_mask_or_epi32(q, neg, q, _mm512_set1_epi32(static_cast<int>(0x80000000u))));
}

/// Block parameters of 16 blocks (lane i: block i) in the form the element loops use.
struct BlockParams16 {
  __m512i s;                   // E8M0 byte
  alignas(64) float a[16];     // fp: emin + s;       int: m - s
  alignas(64) float b[16];     // fp: max_norm * 2^s (0 when flushed); int: s - m (-inf when flushed)
  // The four masks are written by one 8-byte store (see blockParams16).
  __mmask16 nan;               // NaN scale: every element NaN (fake-quantize) or code 0 (quantize)
  __mmask16 dead;              // NaN or flushed
  // encodeFloatFast16 (float formats): live blocks whose 2^(emin + s) and 2^(m - emin - s) are
  // normal fp32 numbers (all but blocks of maxima below about 2^-100); k1, thr and pmul below.
  __mmask16 fast;
  // Blocks whose outputs are never fp32 subnormals (every nonzero |q| >= 2^-126), or dead: their
  // bf16 outputs may be narrowed by vcvtne2ps2bf16 (see narrowToBF16).
  __mmask16 normal_out;
  alignas(64) int32_t k1[16];  // (s + 126 + emin) << 23, less half a code step for rounding
  alignas(64) float thr[16];   // 2^(emin + s)
  alignas(64) float pmul[16];  // 2^(m - emin - s)
};

/// sharedScaleBits (mx_numerics.h) of 16 blocks from their NaN-propagating max |x|: the E8M0
/// byte, 255 for NaN.
PT2Q_MX_INLINE __m512i scaleBytes16(__m512 amax, const MxCall& c) {
  const __m512i bits = _mm512_castps_si512(amax);
  const __m512i eb = _mm512_and_si512(_mm512_srli_epi32(bits, 23), _mm512_set1_epi32(0xFF));
  const __m512i mant = _mm512_and_si512(bits, _mm512_set1_epi32(0x7FFFFF));
  __m512i sv;
  if (c.scale_mode == 3) {  // rceil
    const __m512i t = _mm512_castps_si512(_mm512_div_ps(amax, _mm512_set1_ps(c.max_norm)));
    const __m512i te = _mm512_and_si512(_mm512_srli_epi32(t, 23), _mm512_set1_epi32(0xFF));
    const __m512i tm = _mm512_and_si512(t, _mm512_set1_epi32(0x7FFFFF));
    const __m512i normal = _mm512_mask_add_epi32(te, _mm512_test_epi32_mask(tm, tm), te, _mm512_set1_epi32(1));
    const __mmask16 sub_up = _mm512_cmpgt_epi32_mask(tm, _mm512_set1_epi32(0x400000));
    sv = _mm512_mask_mov_epi32(normal, _mm512_cmpeq_epi32_mask(te, _mm512_setzero_si512()),
                               _mm512_maskz_mov_epi32(sub_up, _mm512_set1_epi32(1)));
    sv = _mm512_min_epi32(sv, _mm512_set1_epi32(255));
  } else {
    __m512i e = eb;
    if (c.scale_mode == 1) {  // ceil
      e = _mm512_mask_add_epi32(eb, _mm512_test_epi32_mask(mant, mant), eb, _mm512_set1_epi32(1));
    } else if (c.scale_mode == 2) {  // even
      const int32_t shift = 23 - c.m - 1;
      e = _mm512_srli_epi32(_mm512_and_si512(_mm512_add_epi32(bits, _mm512_set1_epi32(shift >= 0 ? (1 << shift) : 0)),
                                             _mm512_set1_epi32(0x7F800000)), 23);
    }
    sv = _mm512_sub_epi32(e, _mm512_set1_epi32(c.emax));  // u + 127
    sv = _mm512_min_epi32(_mm512_max_epi32(sv, _mm512_setzero_si512()), _mm512_set1_epi32(255));
  }
  return _mm512_mask_mov_epi32(sv, _mm512_cmpeq_epi32_mask(eb, _mm512_set1_epi32(255)), _mm512_set1_epi32(255));
}

/// Blocks whose scale byte sv is NaN or flushed (flush_fp32_subnorms and an fp32-subnormal max,
/// which rounds every element to 0).
PT2Q_MX_INLINE __mmask16 deadBlocks16(__m512 amax, __m512i sv, const MxCall& c) {
  const __mmask16 nan = _mm512_cmpeq_epi32_mask(sv, _mm512_set1_epi32(255));
  if (!c.flush_fp32_subnorms) return nan;
  const __m512i eb = _mm512_srli_epi32(_mm512_castps_si512(amax), 23);  // amax >= +0
  return static_cast<__mmask16>(_mm512_cmpeq_epi32_mask(eb, _mm512_setzero_si512()) | nan);
}

/// Live blocks of a float format whose 2^(emin + s) and 2^(m - emin - s) are normal fp32 numbers
/// (BlockParams16::fast).
PT2Q_MX_INLINE __mmask16 fastBlocks16(__m512i sv, __mmask16 dead, const MxCall& c) {
  const int32_t lowest = std::max(-126 - c.emin, c.m - c.emin - 127) + 127;
  return static_cast<__mmask16>(_mm512_cmpge_epi32_mask(sv, _mm512_set1_epi32(lowest)) & ~dead);
}

/// sharedScaleBits (mx_numerics.h) of 16 blocks from their NaN-propagating max |x|, and every
/// parameter the fp32-lane loops take.
PT2Q_MX_INLINE void blockParams16(__m512 amax, const MxCall& c, BlockParams16* out) {
  const __m512i sv = scaleBytes16(amax, c);
  const __mmask16 nan = _mm512_cmpeq_epi32_mask(sv, _mm512_set1_epi32(255));
  const __mmask16 dead = deadBlocks16(amax, sv, c);
  const __mmask16 flushed = dead & ~nan;
  // E8M0 byte 0 is 2^-127 like every other byte: s = byte - 127.
  const __m512 s = _mm512_cvtepi32_ps(_mm512_sub_epi32(sv, _mm512_set1_epi32(127)));
  const __m512 m = _mm512_set1_ps(static_cast<float>(c.m));
  __m512 a, b;
  if (c.is_int) {
    a = _mm512_sub_ps(m, s);
    b = _mm512_mask_mov_ps(_mm512_sub_ps(s, m), flushed, _mm512_set1_ps(-INFINITY));
  } else {
    a = _mm512_add_ps(_mm512_set1_ps(static_cast<float>(c.emin)), s);
    b = _mm512_maskz_mov_ps(static_cast<__mmask16>(~flushed), _mm512_scalef_ps(_mm512_set1_ps(c.max_norm), s));
  }
  out->s = sv;
  _mm512_store_ps(out->a, a);
  _mm512_store_ps(out->b, b);
  const __m512i si = _mm512_sub_epi32(sv, _mm512_set1_epi32(127));
  const __mmask16 normal_out = static_cast<__mmask16>(
      _mm512_cmpge_epi32_mask(si, _mm512_set1_epi32(c.m - (c.is_int ? 0 : c.emin) - 126)) | dead);
  __mmask16 fast = 0;
  if (!c.is_int) {
    const int32_t half = c.rounding == 0 ? (1 << (22 - c.m)) : (c.rounding == 1 ? (1 << (22 - c.m)) - 1 : 0);
    _mm512_store_si512(out->k1, _mm512_sub_epi32(_mm512_slli_epi32(_mm512_add_epi32(si, _mm512_set1_epi32(126 + c.emin)), 23),
                                                 _mm512_set1_epi32(half)));
    _mm512_store_ps(out->thr, _mm512_scalef_ps(_mm512_set1_ps(1.0f), _mm512_add_ps(s, _mm512_set1_ps(static_cast<float>(c.emin)))));
    _mm512_store_ps(out->pmul, _mm512_scalef_ps(_mm512_set1_ps(1.0f), _mm512_sub_ps(_mm512_set1_ps(static_cast<float>(c.m - c.emin)), s)));
    fast = fastBlocks16(sv, dead, c);
  }
  // One store for the four masks: the loops test two of them at once, and GCC reads those with
  // one wider load, which separate 2-byte stores cannot forward to (a stall of tens of cycles
  // per 16 blocks, 10-14 % of bf16 mx_quantize).
  static_assert(offsetof(BlockParams16, normal_out) == offsetof(BlockParams16, nan) + 3 * sizeof(__mmask16));
  const uint64_t masks = uint64_t{nan} | uint64_t{dead} << 16 | uint64_t{fast} << 32 | uint64_t{normal_out} << 48;
  std::memcpy(&out->nan, &masks, sizeof(masks));
}

/// Random bits of a chunk's lanes whose element 0 has flat index `first` (stochastic only).
template <FloatKind K>
inline void chunkRandom(uint32_t key, uint64_t first, __m512i& ra, __m512i& rb) {
  alignas(64) uint32_t r[32];
  for (int l = 0; l < 32; ++l) r[l] = elementRandom(key, first + static_cast<uint64_t>(chunkElement<K>(l)));
  ra = _mm512_load_si512(r);
  rb = _mm512_load_si512(r + 16);
}

#include "kernels/cpu/mx_words_avx512.h"
#include "kernels/cpu/mx_words_group_avx512.h"
#include "kernels/cpu/mx_avx512_loops.h"
