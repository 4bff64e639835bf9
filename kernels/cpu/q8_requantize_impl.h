// linear_q8 / conv2d_q8's epilogue over a row of a GEMM panel (Q8RequantizeFn,
// linear_microkernels.h), compiled once per ISA inside linear_kernels_impl.h with the depthwise
// kernel's vector epilogues, so that every conv2d_q8 / linear_q8 path rounds alike. Before: t[c] =
// s_w[c] * sum[c] in fp32; after: out[c] = quantize_per_tensor's code of t[c] * s_x + bias[c]. With
// few input channels (an RGB stem: k = 27 or 147) the scalar loop had taken a third of the call.
#pragma once

#ifndef PT2Q_CPU_ISA_NS
#error "include q8_requantize_impl.h through linear_kernels_impl.h"
#endif

namespace pt2q::cpu::PT2Q_CPU_ISA_NS {

inline void q8RequantizeRow(const float* t, const float* bias, int64_t n, const Q8Epilogue& e, int8_t* out) {
  int64_t c = 0;
#if defined(PT2Q_VEC_AVX512)
  const Q8EpilogueAvx512 v(e);
  for (; c < n; c += 16) {
    const __mmask16 m = laneMask(n - c);
    const __m512 b = bias != nullptr ? _mm512_maskz_loadu_ps(m, bias + c) : _mm512_setzero_ps();
    v.storeScaled(_mm512_maskz_loadu_ps(m, t + c), m, b, out + c);
  }
#elif defined(PT2Q_VEC_AVX2)
  const Q8EpilogueAvx2 v(e);
  for (; c + 8 <= n; c += 8) {
    v.storeScaled(_mm256_loadu_ps(t + c), bias != nullptr ? _mm256_loadu_ps(bias + c) : _mm256_setzero_ps(), out + c);
  }
#endif
  for (; c < n; ++c) out[c] = e(t[c], bias != nullptr ? bias[c] : 0.0f);
}

}  // namespace pt2q::cpu::PT2Q_CPU_ISA_NS
