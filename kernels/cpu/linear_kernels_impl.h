// Bodies of the linear microkernels, compiled once per ISA (each ISA file defines
// PT2Q_CPU_ISA_NS and one of PT2Q_VEC_AVX512 / PT2Q_VEC_AVX2 before including this header, as
// for affine_kernels_impl.h). The weight block streams once; its int8 codes widen to fp32 and
// multiply-add into one accumulator per (x row, weight row), scaled once per group.
#pragma once

#ifndef PT2Q_CPU_ISA_NS
#error "define PT2Q_CPU_ISA_NS before including linear_kernels_impl.h"
#endif

#include <algorithm>
#include <cstdint>

#if defined(PT2Q_VEC_AVX512) || defined(PT2Q_VEC_AVX2)
#include <immintrin.h>
#endif

#include "kernels/cpu/linear_microkernels.h"

namespace pt2q::cpu::PT2Q_CPU_ISA_NS {

constexpr int64_t kRows = 4;
constexpr int64_t kChunk = 16;

#if defined(PT2Q_VEC_AVX512)
// 16 lanes: one chunk of a weight row is one vector.
template <int MX>
void w8Block4(const int8_t* w, const float* x, int64_t x_stride, int64_t chunks, int64_t group_chunks,
              const float* scales, int64_t s_stride, float* out) {
  __m512 total[MX][kRows];
  for (auto& row : total) for (auto& t : row) t = _mm512_setzero_ps();
  for (int64_t c0 = 0, g = 0; c0 < chunks; c0 += group_chunks, ++g) {
    __m512 acc[MX][kRows];
    for (auto& row : acc) for (auto& a : row) a = _mm512_setzero_ps();
    const int64_t c1 = std::min(c0 + group_chunks, chunks);
    for (int64_t c = c0; c < c1; ++c) {
      const int8_t* wc = w + c * kRows * kChunk;
      _mm_prefetch(reinterpret_cast<const char*>(wc + 48 * kRows * kChunk), _MM_HINT_T0);
      __m512 wv[kRows];
      for (int r = 0; r < kRows; ++r) {
        wv[r] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wc + r * kChunk))));
      }
      for (int m = 0; m < MX; ++m) {
        const __m512 xv = _mm512_loadu_ps(x + m * x_stride + c * kChunk);
        for (int r = 0; r < kRows; ++r) acc[m][r] = _mm512_fmadd_ps(wv[r], xv, acc[m][r]);
      }
    }
    for (int r = 0; r < kRows; ++r) {
      const __m512 s = _mm512_set1_ps(scales[r * s_stride + g]);
      for (int m = 0; m < MX; ++m) total[m][r] = _mm512_fmadd_ps(acc[m][r], s, total[m][r]);
    }
  }
  for (int m = 0; m < MX; ++m) {
    for (int r = 0; r < kRows; ++r) out[m * kRows + r] = _mm512_reduce_add_ps(total[m][r]);
  }
}
#elif defined(PT2Q_VEC_AVX2)
inline float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// 8 lanes: a chunk of a weight row is two vectors.
template <int MX>
void w8Block4(const int8_t* w, const float* x, int64_t x_stride, int64_t chunks, int64_t group_chunks,
              const float* scales, int64_t s_stride, float* out) {
  __m256 total[MX][kRows];
  for (auto& row : total) for (auto& t : row) t = _mm256_setzero_ps();
  for (int64_t c0 = 0, g = 0; c0 < chunks; c0 += group_chunks, ++g) {
    __m256 acc[MX][kRows];
    for (auto& row : acc) for (auto& a : row) a = _mm256_setzero_ps();
    const int64_t c1 = std::min(c0 + group_chunks, chunks);
    for (int64_t c = c0; c < c1; ++c) {
      const int8_t* wc = w + c * kRows * kChunk;
      for (int h = 0; h < 2; ++h) {
        __m256 wv[kRows];
        for (int r = 0; r < kRows; ++r) {
          const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(wc + r * kChunk + 8 * h));
          wv[r] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
        }
        for (int m = 0; m < MX; ++m) {
          const __m256 xv = _mm256_loadu_ps(x + m * x_stride + c * kChunk + 8 * h);
          for (int r = 0; r < kRows; ++r) acc[m][r] = _mm256_fmadd_ps(wv[r], xv, acc[m][r]);
        }
      }
    }
    for (int r = 0; r < kRows; ++r) {
      const __m256 s = _mm256_set1_ps(scales[r * s_stride + g]);
      for (int m = 0; m < MX; ++m) total[m][r] = _mm256_fmadd_ps(acc[m][r], s, total[m][r]);
    }
  }
  for (int m = 0; m < MX; ++m) {
    for (int r = 0; r < kRows; ++r) out[m * kRows + r] = hsum256(total[m][r]);
  }
}
#else
// Scalar, with 16 partial sums per row like the 16-lane kernel.
template <int MX>
void w8Block4(const int8_t* w, const float* x, int64_t x_stride, int64_t chunks, int64_t group_chunks,
              const float* scales, int64_t s_stride, float* out) {
  for (int m = 0; m < MX; ++m) {
    for (int r = 0; r < kRows; ++r) {
      float total[kChunk] = {};
      for (int64_t c0 = 0, g = 0; c0 < chunks; c0 += group_chunks, ++g) {
        float acc[kChunk] = {};
        const int64_t c1 = std::min(c0 + group_chunks, chunks);
        for (int64_t c = c0; c < c1; ++c) {
          const int8_t* wc = w + c * kRows * kChunk + r * kChunk;
          const float* xc = x + m * x_stride + c * kChunk;
          for (int64_t l = 0; l < kChunk; ++l) acc[l] += static_cast<float>(wc[l]) * xc[l];
        }
        for (int64_t l = 0; l < kChunk; ++l) total[l] += acc[l] * scales[r * s_stride + g];
      }
      float sum = 0.0f;
      for (float t : total) sum += t;
      out[m * kRows + r] = sum;
    }
  }
}
#endif

#if defined(PT2Q_VEC_AVX512)
// 4-bit: a 16-byte chunk row widens to 16 int32 lanes; the low nibbles are k-values 0..15 of
// the chunk and the high nibbles 16..31.
template <int MX>
void w4Block4(const int8_t* w, const float* x, int64_t x_stride, int64_t chunks, int64_t group_chunks,
              const float* scales, int64_t s_stride, float* out) {
  constexpr int64_t kC = 2 * kChunk;
  const __m512i low = _mm512_set1_epi32(0xF);
  __m512 total[MX][kRows];
  for (auto& row : total) for (auto& t : row) t = _mm512_setzero_ps();
  for (int64_t c0 = 0, g = 0; c0 < chunks; c0 += group_chunks, ++g) {
    __m512 acc[MX][kRows];
    for (auto& row : acc) for (auto& a : row) a = _mm512_setzero_ps();
    const int64_t c1 = std::min(c0 + group_chunks, chunks);
    for (int64_t c = c0; c < c1; ++c) {
      const int8_t* wc = w + c * kRows * kChunk;
      _mm_prefetch(reinterpret_cast<const char*>(wc + 48 * kRows * kChunk), _MM_HINT_T0);
      __m512 lo[kRows], hi[kRows];
      for (int r = 0; r < kRows; ++r) {
        const __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wc + r * kChunk)));
        lo[r] = _mm512_cvtepi32_ps(_mm512_and_si512(b, low));
        hi[r] = _mm512_cvtepi32_ps(_mm512_srli_epi32(b, 4));
      }
      for (int m = 0; m < MX; ++m) {
        const __m512 xl = _mm512_loadu_ps(x + m * x_stride + c * kC);
        const __m512 xh = _mm512_loadu_ps(x + m * x_stride + c * kC + kChunk);
        for (int r = 0; r < kRows; ++r) acc[m][r] = _mm512_fmadd_ps(hi[r], xh, _mm512_fmadd_ps(lo[r], xl, acc[m][r]));
      }
    }
    for (int r = 0; r < kRows; ++r) {
      const __m512 s = _mm512_set1_ps(scales[r * s_stride + g]);
      for (int m = 0; m < MX; ++m) total[m][r] = _mm512_fmadd_ps(acc[m][r], s, total[m][r]);
    }
  }
  for (int m = 0; m < MX; ++m) {
    for (int r = 0; r < kRows; ++r) out[m * kRows + r] = _mm512_reduce_add_ps(total[m][r]);
  }
}
#elif defined(PT2Q_VEC_AVX2)
template <int MX>
void w4Block4(const int8_t* w, const float* x, int64_t x_stride, int64_t chunks, int64_t group_chunks,
              const float* scales, int64_t s_stride, float* out) {
  constexpr int64_t kC = 2 * kChunk;
  const __m256i low = _mm256_set1_epi32(0xF);
  __m256 total[MX][kRows];
  for (auto& row : total) for (auto& t : row) t = _mm256_setzero_ps();
  for (int64_t c0 = 0, g = 0; c0 < chunks; c0 += group_chunks, ++g) {
    __m256 acc[MX][kRows];
    for (auto& row : acc) for (auto& a : row) a = _mm256_setzero_ps();
    const int64_t c1 = std::min(c0 + group_chunks, chunks);
    for (int64_t c = c0; c < c1; ++c) {
      const int8_t* wc = w + c * kRows * kChunk;
      for (int h = 0; h < 2; ++h) {  // bytes 0-7, then 8-15 of each chunk row
        __m256 lo[kRows], hi[kRows];
        for (int r = 0; r < kRows; ++r) {
          const __m256i b =
              _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(wc + r * kChunk + 8 * h)));
          lo[r] = _mm256_cvtepi32_ps(_mm256_and_si256(b, low));
          hi[r] = _mm256_cvtepi32_ps(_mm256_srli_epi32(b, 4));
        }
        for (int m = 0; m < MX; ++m) {
          const __m256 xl = _mm256_loadu_ps(x + m * x_stride + c * kC + 8 * h);
          const __m256 xh = _mm256_loadu_ps(x + m * x_stride + c * kC + kChunk + 8 * h);
          for (int r = 0; r < kRows; ++r) {
            acc[m][r] = _mm256_fmadd_ps(hi[r], xh, _mm256_fmadd_ps(lo[r], xl, acc[m][r]));
          }
        }
      }
    }
    for (int r = 0; r < kRows; ++r) {
      const __m256 s = _mm256_set1_ps(scales[r * s_stride + g]);
      for (int m = 0; m < MX; ++m) total[m][r] = _mm256_fmadd_ps(acc[m][r], s, total[m][r]);
    }
  }
  for (int m = 0; m < MX; ++m) {
    for (int r = 0; r < kRows; ++r) out[m * kRows + r] = hsum256(total[m][r]);
  }
}
#else
template <int MX>
void w4Block4(const int8_t* w, const float* x, int64_t x_stride, int64_t chunks, int64_t group_chunks,
              const float* scales, int64_t s_stride, float* out) {
  constexpr int64_t kC = 2 * kChunk;
  for (int m = 0; m < MX; ++m) {
    for (int r = 0; r < kRows; ++r) {
      float total[kChunk] = {};
      for (int64_t c0 = 0, g = 0; c0 < chunks; c0 += group_chunks, ++g) {
        float acc[kChunk] = {};
        const int64_t c1 = std::min(c0 + group_chunks, chunks);
        for (int64_t c = c0; c < c1; ++c) {
          const auto* wc = reinterpret_cast<const uint8_t*>(w + c * kRows * kChunk + r * kChunk);
          const float* xc = x + m * x_stride + c * kC;
          for (int64_t l = 0; l < kChunk; ++l) {
            acc[l] += static_cast<float>(wc[l] & 0xF) * xc[l];
            acc[l] += static_cast<float>(wc[l] >> 4) * xc[kChunk + l];
          }
        }
        for (int64_t l = 0; l < kChunk; ++l) total[l] += acc[l] * scales[r * s_stride + g];
      }
      float sum = 0.0f;
      for (float t : total) sum += t;
      out[m * kRows + r] = sum;
    }
  }
}
#endif

void w4Block4Any(const int8_t* w, const float* x, int64_t x_stride, int64_t x_rows, int64_t chunks,
                 int64_t group_chunks, const float* scales, int64_t s_stride, float* out) {
  if (x_rows == 2) {
    w4Block4<2>(w, x, x_stride, chunks, group_chunks, scales, s_stride, out);
  } else {
    w4Block4<1>(w, x, x_stride, chunks, group_chunks, scales, s_stride, out);
  }
}

void w8Block4Any(const int8_t* w, const float* x, int64_t x_stride, int64_t x_rows, int64_t chunks,
                 int64_t group_chunks, const float* scales, int64_t s_stride, float* out) {
  if (x_rows == 2) {
    w8Block4<2>(w, x, x_stride, chunks, group_chunks, scales, s_stride, out);
  } else {
    w8Block4<1>(w, x, x_stride, chunks, group_chunks, scales, s_stride, out);
  }
}

inline LinearKernels makeLinearTable(Isa isa, const char* name) {
  return LinearKernels{isa, name, &w8Block4Any, &w4Block4Any};
}

}  // namespace pt2q::cpu::PT2Q_CPU_ISA_NS
