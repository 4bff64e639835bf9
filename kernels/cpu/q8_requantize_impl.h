// The static int8 ops' requantizing loops, compiled once per ISA inside linear_kernels_impl.h with
// the depthwise kernel's vector epilogues, so that every path rounds alike:
// - linear_q8 / conv2d_q8's epilogue over a row of a GEMM panel (Q8RequantizeFn,
//   linear_microkernels.h). Before: t[c] = s_w[c] * sum[c] in fp32; after: out[c] =
//   quantize_per_tensor's code of t[c] * s_x + bias[c] (with conv2d_q8's residual: + bias[c] +
//   (r[c] - z_r) * s_r, the bias and the residual's dequantized value summed first). With few input channels (an RGB stem:
//   k = 27 or 147) the scalar loop had taken a third of the call.
// - conv2d_q8_float's epilogue (Q8ScaleFn): the same y = t[c] * s_x + bias[c], stored as fp32.
// - add_q8 / mul_q8 (Q8AddFn): before, codes a[i], b[i]; after, the code of dq(a[i]) + dq(b[i]) (or
//   dq(a[i]) * dq(b[i])). Its vectors
//   round with vrndscaleps / vroundps (half to even at any magnitude) instead of the epilogue's
//   pre-clamp and magic-number addition: the same codes in fewer instructions (one Zen 5 thread,
//   1M elements: AVX-512 0.153-0.157 -> 0.117-0.123 ns an element, AVX2 0.286-0.290 -> 0.218-0.222).
#pragma once

#ifndef PT2Q_CPU_ISA_NS
#error "include q8_requantize_impl.h through linear_kernels_impl.h"
#endif

namespace pt2q::cpu::PT2Q_CPU_ISA_NS {

inline void q8RequantizeRow(const float* t, const float* bias, const Q8RowResidual* res, int64_t n,
                            const Q8Epilogue& e, int8_t* out) {
  int64_t c = 0;
#if defined(PT2Q_VEC_AVX512)
  const Q8EpilogueAvx512 v(e);
  const __m512 rs = _mm512_set1_ps(res != nullptr ? res->s : 0.0f), rz = _mm512_set1_ps(res != nullptr ? res->z : 0.0f);
  for (; c < n; c += 16) {
    const __mmask16 m = laneMask(n - c);
    __m512 b = bias != nullptr ? _mm512_maskz_loadu_ps(m, bias + c) : _mm512_setzero_ps();
    if (res != nullptr) {
      const __m512 r = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, res->codes + c)));
      b = _mm512_add_ps(b, _mm512_mul_ps(_mm512_sub_ps(r, rz), rs));
    }
    v.storeScaled(_mm512_maskz_loadu_ps(m, t + c), m, b, out + c);
  }
#elif defined(PT2Q_VEC_AVX2)
  const Q8EpilogueAvx2 v(e);
  const __m256 rs = _mm256_set1_ps(res != nullptr ? res->s : 0.0f), rz = _mm256_set1_ps(res != nullptr ? res->z : 0.0f);
  for (; c + 8 <= n; c += 8) {
    __m256 b = bias != nullptr ? _mm256_loadu_ps(bias + c) : _mm256_setzero_ps();
    if (res != nullptr) {
      const __m128i codes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(res->codes + c));
      b = _mm256_add_ps(b, _mm256_mul_ps(_mm256_sub_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(codes)), rz), rs));
    }
    v.storeScaled(_mm256_loadu_ps(t + c), b, out + c);
  }
#endif
  for (; c < n; ++c) {
    float b = bias != nullptr ? bias[c] : 0.0f;
    if (res != nullptr) b = b + (static_cast<float>(res->codes[c]) - res->z) * res->s;
    out[c] = e(t[c], b);
  }
}

inline void q8ScaleRow(const float* t, const float* bias, int64_t n, float sx, float* out) {
  int64_t c = 0;
#if defined(PT2Q_VEC_AVX512)
  const __m512 s = _mm512_set1_ps(sx);
  for (; c < n; c += 16) {
    const __mmask16 m = laneMask(n - c);
    const __m512 b = bias != nullptr ? _mm512_maskz_loadu_ps(m, bias + c) : _mm512_setzero_ps();
    _mm512_mask_storeu_ps(out + c, m, _mm512_add_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, t + c), s), b));
  }
#elif defined(PT2Q_VEC_AVX2)
  const __m256 s = _mm256_set1_ps(sx);
  for (; c + 8 <= n; c += 8) {
    const __m256 b = bias != nullptr ? _mm256_loadu_ps(bias + c) : _mm256_setzero_ps();
    _mm256_storeu_ps(out + c, _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(t + c), s), b));
  }
#endif
  for (; c < n; ++c) out[c] = t[c] * sx + (bias != nullptr ? bias[c] : 0.0f);
}

inline void q8AddRows(const int8_t* a, const int8_t* b, int64_t n, const Q8AddConsts& k, int8_t* out) {
  int64_t i = 0;
#if defined(PT2Q_VEC_AVX512)
  // The epilogue's steps without its pre-clamp: vrndscaleps rounds half to even at any magnitude,
  // so rint(y * inv) + zo clamped is the same code as the magic-number rounding of the clamped
  // value (infinities clamp alike; no NaN arises within add_q8's scale bounds, nor mul_q8's: finite
  // factors whose product may overflow to an infinity, which clamps).
  const __m512 sa = _mm512_set1_ps(k.sa), za = _mm512_set1_ps(k.za), sb = _mm512_set1_ps(k.sb),
               zb = _mm512_set1_ps(k.zb), inv = _mm512_set1_ps(k.out.inv), zo = _mm512_set1_ps(k.out.zo),
               lo = _mm512_set1_ps(k.out.lo), hi = _mm512_set1_ps(k.out.hi);
  auto dq = [](__m128i codes, __m512 z, __m512 s) {
    return _mm512_mul_ps(_mm512_sub_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(codes)), z), s);
  };
  for (; i < n; i += 16) {
    const __mmask16 m = laneMask(n - i);
    const __m512 da = dq(_mm_maskz_loadu_epi8(m, a + i), za, sa), db = dq(_mm_maskz_loadu_epi8(m, b + i), zb, sb);
    const __m512 y = k.multiply ? _mm512_mul_ps(da, db) : _mm512_add_ps(da, db);
    const __m512 r = _mm512_add_ps(_mm512_roundscale_ps(_mm512_mul_ps(y, inv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), zo);
    _mm_mask_storeu_epi8(out + i, m, _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(_mm512_min_ps(_mm512_max_ps(r, lo), hi))));
  }
#elif defined(PT2Q_VEC_AVX2)
  const __m256 sa = _mm256_set1_ps(k.sa), za = _mm256_set1_ps(k.za), sb = _mm256_set1_ps(k.sb),
               zb = _mm256_set1_ps(k.zb), inv = _mm256_set1_ps(k.out.inv), zo = _mm256_set1_ps(k.out.zo),
               lo = _mm256_set1_ps(k.out.lo), hi = _mm256_set1_ps(k.out.hi);
  auto dq = [](const int8_t* p, __m256 z, __m256 s) {
    const __m128i codes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    return _mm256_mul_ps(_mm256_sub_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(codes)), z), s);
  };
  for (; i + 8 <= n; i += 8) {
    const __m256 da = dq(a + i, za, sa), db = dq(b + i, zb, sb);
    const __m256 y = k.multiply ? _mm256_mul_ps(da, db) : _mm256_add_ps(da, db);
    const __m256 r = _mm256_add_ps(_mm256_round_ps(_mm256_mul_ps(y, inv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), zo);
    Q8EpilogueAvx2::storeCodes(_mm256_cvttps_epi32(_mm256_min_ps(_mm256_max_ps(r, lo), hi)), out + i);
  }
#endif
  for (; i < n; ++i) {
    const float da = (static_cast<float>(a[i]) - k.za) * k.sa, db = (static_cast<float>(b[i]) - k.zb) * k.sb;
    out[i] = k.multiply ? k.out(da * db, 0.0f) : k.out(da, db);
  }
}

}  // namespace pt2q::cpu::PT2Q_CPU_ISA_NS
