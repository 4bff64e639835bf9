// Depthwise conv2d_q8 (DepthwiseQ8, linear_microkernels.h), compiled once per ISA inside
// linear_kernels_impl.h: plain loops over the channels that the ISA's flags vectorize (widen,
// subtract, multiply, add per tap; the fp32 epilogue per output pixel). Channels last keeps each
// tap's operands contiguous; the restrict pointers let the compiler vectorize without alias
// checks. Before (per output pixel): 9 taps of C bytes each; after: OC codes.
#pragma once

#ifndef PT2Q_CPU_ISA_NS
#error "include depthwise_q8_impl.h through linear_kernels_impl.h"
#endif

namespace pt2q::cpu::PT2Q_CPU_ISA_NS {

inline void depthwiseTap(const int8_t* __restrict px, const int32_t* __restrict w, int32_t zx, int64_t oc,
                         int64_t mult, int32_t* __restrict acc) {
  if (mult == 1) {
    for (int64_t o = 0; o < oc; ++o) acc[o] += (static_cast<int32_t>(px[o]) - zx) * w[o];
  } else {
    for (int64_t o = 0; o < oc; ++o) acc[o] += (static_cast<int32_t>(px[o / mult]) - zx) * w[o];
  }
}

inline void depthwiseEpilogue(const int32_t* __restrict acc, const float* __restrict s, const float* __restrict b,
                              const Q8Epilogue& e, int64_t oc, int8_t* __restrict out) {
  for (int64_t o = 0; o < oc; ++o) out[o] = e(static_cast<float>(acc[o]) * s[o], b[o]);
}

#if defined(PT2Q_VEC_AVX512)
// Q8Epilogue on 16 int32 sums at a time, in its order (no fused multiply-add: the file is
// compiled with -ffp-contract=off), so that the vector and scalar epilogues agree bit for bit.
struct Q8EpilogueAvx512 {
  __m512 sx, inv, zo, vlo, vhi, lo, hi, magic;
  explicit Q8EpilogueAvx512(const Q8Epilogue& e)
      : sx(_mm512_set1_ps(e.sx)), inv(_mm512_set1_ps(e.inv)), zo(_mm512_set1_ps(e.zo)),
        vlo(_mm512_set1_ps(e.lo - e.zo - 1.0f)), vhi(_mm512_set1_ps(e.hi - e.zo + 1.0f)), lo(_mm512_set1_ps(e.lo)),
        hi(_mm512_set1_ps(e.hi)), magic(_mm512_set1_ps(12582912.0f)) {}
  // Output channels [0, 16) of `acc` under mask m, their scales and bias from s and b.
  void store(__m512i acc, __mmask16 m, const float* s, const float* b, int8_t* out) const {
    storeScaled(_mm512_mul_ps(_mm512_cvtepi32_ps(acc), _mm512_maskz_loadu_ps(m, s)), m, _mm512_maskz_loadu_ps(m, b),
                out);
  }
  // The same from t = sum * scale and the bias already in registers.
  void storeScaled(__m512 t, __mmask16 m, __m512 bias, int8_t* out) const {
    const __m512 y = _mm512_add_ps(_mm512_mul_ps(t, sx), bias);
    const __m512 c = _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(y, inv), vlo), vhi);
    const __m512 r = _mm512_add_ps(_mm512_sub_ps(_mm512_add_ps(c, magic), magic), zo);
    const __m512i q = _mm512_cvttps_epi32(_mm512_min_ps(_mm512_max_ps(r, lo), hi));
    _mm_mask_storeu_epi8(out, m, _mm512_cvtepi32_epi8(q));
  }
};

inline __mmask16 laneMask(int64_t left) {
  return left >= 16 ? static_cast<__mmask16>(0xFFFF) : left > 0 ? static_cast<__mmask16>((1u << left) - 1u) : 0;
}

// P neighbouring output pixels of a row (P > 1: all taps inside, pixel q's taps the first's moved
// q step bytes), multiplier 1, 16 VN channels per pass with the sums in registers across the taps
// (the loops above keep them in memory: 2-4x slower on the Zen 5 VM). Each weight load serves the
// P pixels, and the tap pointers and masks are set up once for them: with few channels that
// setup outweighed the arithmetic (docs/perf_linear_dynamic_cpu.md).
template <int P, int VN>
inline void depthwisePixelsAvx512(const DepthwiseQ8& a, const int8_t* const* taps, const int32_t* const* wts,
                                  int ntaps, int64_t step, const Q8EpilogueAvx512& e, int8_t* out) {
  const __m512i zx = _mm512_set1_epi32(a.zx);
  for (int64_t o0 = 0; o0 < a.oc; o0 += 16 * VN) {
    const int64_t n = std::min<int64_t>(16 * VN, a.oc - o0);
    __mmask16 m[VN];
    __m512i acc[P][VN];
    for (int v = 0; v < VN; ++v) {
      m[v] = laneMask(n - 16 * v);
      for (int q = 0; q < P; ++q) acc[q][v] = _mm512_setzero_si512();
    }
    for (int t = 0; t < ntaps; ++t) {
      for (int v = 0; v < VN; ++v) {
        if (m[v] == 0) break;
        const __m512i w = _mm512_maskz_loadu_epi32(m[v], wts[t] + o0 + 16 * v);
        for (int q = 0; q < P; ++q) {
          const __m512i x = _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m[v], taps[t] + q * step + o0 + 16 * v));
          acc[q][v] = _mm512_add_epi32(acc[q][v], _mm512_mullo_epi32(_mm512_sub_epi32(x, zx), w));
        }
      }
    }
    for (int v = 0; v < VN && m[v] != 0; ++v) {
      const int64_t o = o0 + 16 * v;
      for (int q = 0; q < P; ++q) e.store(acc[q][v], m[v], a.scales + o, a.bias + o, out + q * a.oc + o);
    }
  }
}
#endif

#if defined(PT2Q_VEC_AVX2)
// Q8EpilogueAvx512's steps on 8 sums (the same order, so the same bits as the scalar epilogue).
struct Q8EpilogueAvx2 {
  __m256 sx, inv, zo, vlo, vhi, lo, hi, magic;
  explicit Q8EpilogueAvx2(const Q8Epilogue& e)
      : sx(_mm256_set1_ps(e.sx)), inv(_mm256_set1_ps(e.inv)), zo(_mm256_set1_ps(e.zo)),
        vlo(_mm256_set1_ps(e.lo - e.zo - 1.0f)), vhi(_mm256_set1_ps(e.hi - e.zo + 1.0f)), lo(_mm256_set1_ps(e.lo)),
        hi(_mm256_set1_ps(e.hi)), magic(_mm256_set1_ps(12582912.0f)) {}
  // Output channels [0, 8) of `acc`, their scales and bias from s and b.
  void store(__m256i acc, const float* s, const float* b, int8_t* out) const {
    storeScaled(_mm256_mul_ps(_mm256_cvtepi32_ps(acc), _mm256_loadu_ps(s)), _mm256_loadu_ps(b), out);
  }
  // The same from t = sum * scale and the bias already in registers.
  void storeScaled(__m256 t, __m256 bias, int8_t* out) const {
    const __m256 y = _mm256_add_ps(_mm256_mul_ps(t, sx), bias);
    const __m256 c = _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(y, inv), vlo), vhi);
    const __m256 r = _mm256_add_ps(_mm256_sub_ps(_mm256_add_ps(c, magic), magic), zo);
    storeCodes(_mm256_cvttps_epi32(_mm256_min_ps(_mm256_max_ps(r, lo), hi)), out);
  }
  // 8 codes already within [-128, 127] (the saturating packs keep them, in order) to out.
  static void storeCodes(__m256i q, int8_t* out) {
    const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out), _mm_packs_epi16(w, w));
  }
};

// depthwisePixelsAvx512 on 8 lanes (oc a multiple of 8: no masked byte loads), 8 VN channels a
// pass. Under PT2Q_CPU_ISA=avx2 on the Zen 5 VM the loops above took 1.02-1.33x the one-pixel
// kind's time on MobileNet's layers, the most on the first (32 channels at 112 x 112).
template <int P, int VN>
inline void depthwisePixelsAvx2(const DepthwiseQ8& a, const int8_t* const* taps, const int32_t* const* wts, int ntaps,
                                int64_t step, const Q8EpilogueAvx2& e, int8_t* out) {
  const __m256i zx = _mm256_set1_epi32(a.zx);
  for (int64_t o0 = 0; o0 < a.oc; o0 += 8 * VN) {
    const int nv = static_cast<int>(std::min<int64_t>(VN, (a.oc - o0) / 8));
    __m256i acc[P][VN];
    for (auto& row : acc) {
      for (auto& v : row) v = _mm256_setzero_si256();
    }
    for (int t = 0; t < ntaps; ++t) {
      for (int v = 0; v < nv; ++v) {
        const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wts[t] + o0 + 8 * v));
        for (int q = 0; q < P; ++q) {
          const __m256i x =
              _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(taps[t] + q * step + o0 + 8 * v)));
          acc[q][v] = _mm256_add_epi32(acc[q][v], _mm256_mullo_epi32(_mm256_sub_epi32(x, zx), w));
        }
      }
    }
    for (int v = 0; v < nv; ++v) {
      const int64_t o = o0 + 8 * v;
      for (int q = 0; q < P; ++q) e.store(acc[q][v], a.scales + o, a.bias + o, out + q * a.oc + o);
    }
  }
}
#endif

// f(byte offset of the tap's pixel in x, tap index i * kw + j) for each tap of output pixel
// (img, oh, ow) inside the input.
template <class F>
inline void forEachTap(const ConvPixels& a, int64_t img, int64_t oh, int64_t ow, F&& f) {
  for (int64_t i = 0; i < a.kh; ++i) {
    const int64_t ih = oh * a.sh - a.ph + i * a.dh;
    if (ih < 0 || ih >= a.h) continue;
    for (int64_t j = 0; j < a.kw; ++j) {
      const int64_t iw = ow * a.sw - a.pw + j * a.dw;
      if (iw < 0 || iw >= a.w) continue;
      f(((img * a.h + ih) * a.w + iw) * a.c, i * a.kw + j);
    }
  }
}

inline void depthwiseQ8Rows(const DepthwiseQ8& a, int64_t r0, int64_t r1, int32_t* acc) {
  const int64_t mult = a.oc / a.c;
#if defined(PT2Q_VEC_AVX512) || defined(PT2Q_VEC_AVX2)
#if defined(PT2Q_VEC_AVX512)
  const bool vec = mult == 1 && a.kh * a.kw <= 64;
#else
  const bool vec = mult == 1 && a.kh * a.kw <= 64 && a.oc % 8 == 0;  // no masked byte loads in AVX2
#endif
  if (vec) {
    const int8_t* taps[64];
    const int32_t* wts[64];
    // kRun pixels a call where all their taps are inside, 32 channels a pass: 8 vectors of sums
    // either way, as one pixel's 64 channels
#if defined(PT2Q_VEC_AVX512)
    const Q8EpilogueAvx512 e(a.epilogue);
    constexpr int kRun = 4;
#else
    const Q8EpilogueAvx2 e(a.epilogue);
    constexpr int kRun = 2;
#endif
    for (int64_t r = r0; r < r1; ++r) {
      for (int64_t ow = 0; ow < a.ow; ++ow) {
        int nt = 0;
        forEachTap(a, r / a.oh, r % a.oh, ow, [&](int64_t at, int64_t t) {
          taps[nt] = a.x + at;
          wts[nt++] = a.wt + t * a.oc;
        });
        int8_t* out = a.out + (r * a.ow + ow) * a.oc;
        // The next kRun - 1 pixels are inside too when the last one's last column of taps is.
        const int64_t last = ow + kRun - 1;
        const bool run = nt == a.kh * a.kw && last < a.ow && last * a.sw - a.pw + (a.kw - 1) * a.dw < a.w;
#if defined(PT2Q_VEC_AVX512)
        if (run) {
          depthwisePixelsAvx512<kRun, 2>(a, taps, wts, nt, a.sw * a.c, e, out);
        } else {
          depthwisePixelsAvx512<1, 4>(a, taps, wts, nt, 0, e, out);
        }
#else
        if (run) {
          depthwisePixelsAvx2<kRun, 4>(a, taps, wts, nt, a.sw * a.c, e, out);
        } else {
          depthwisePixelsAvx2<1, 8>(a, taps, wts, nt, 0, e, out);
        }
#endif
        if (run) ow += kRun - 1;
      }
    }
    return;
  }
#endif
  for (int64_t r = r0; r < r1; ++r) {
    for (int64_t ow = 0; ow < a.ow; ++ow) {
      std::fill(acc, acc + a.oc, 0);
      forEachTap(a, r / a.oh, r % a.oh, ow,
                 [&](int64_t at, int64_t t) { depthwiseTap(a.x + at, a.wt + t * a.oc, a.zx, a.oc, mult, acc); });
      depthwiseEpilogue(acc, a.scales, a.bias, a.epilogue, a.oc, a.out + (r * a.ow + ow) * a.oc);
    }
  }
}

}  // namespace pt2q::cpu::PT2Q_CPU_ISA_NS
