// W4A16 with bf16 activations on AVX512_BF16; this file alone is compiled with -mavx512bf16.
// Nibbles become bf16 weights by a word-table lookup (u -> bf16(u - 8), so the +8 offset costs
// nothing) and meet the bf16 activations in `vdpbf16ps`, 32 products per instruction: half the
// decode work of widening each nibble to fp32. A 64-byte chunk of a block is 4 rows x 16 bytes;
// its low nibbles of rows 0-1 (k = 32c + 0..15) widen to one vector of 32 words, rows 2-3 to
// another, the high nibbles (k = 32c + 16..31) likewise; each meets the matching 16 x values
// broadcast to both halves, so lanes 0-7 accumulate row 0 (or 2) and lanes 8-15 row 1 (or 3).
#include <immintrin.h>

#include "kernels/cpu/linear_microkernels.h"

namespace pt2q::cpu {
namespace {

constexpr int64_t kChunkBytes = 64;

template <int MX>
void block4(const int8_t* w, const uint16_t* x, int64_t x_stride, int64_t chunks, int64_t group_chunks,
            const float* scales, int64_t s_stride, float* out) {
  // bf16 bits of u - 8 for u = 0..15 (exact: small integers).
  const __m512i table = _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  //
                                         0x40E0, 0x40C0, 0x40A0, 0x4080, 0x4040, 0x4000, 0x3F80, 0x0000,
                                         static_cast<int16_t>(0xBF80), static_cast<int16_t>(0xC000),
                                         static_cast<int16_t>(0xC040), static_cast<int16_t>(0xC080),
                                         static_cast<int16_t>(0xC0A0), static_cast<int16_t>(0xC0C0),
                                         static_cast<int16_t>(0xC0E0), static_cast<int16_t>(0xC100));
  const __m512i mask = _mm512_set1_epi8(0x0F);
  __m512 tot[MX][2];
  for (auto& t : tot) t[0] = t[1] = _mm512_setzero_ps();
  for (int64_t c0 = 0, g = 0; c0 < chunks; c0 += group_chunks, ++g) {
    __m512 acc[MX][2];
    for (auto& a : acc) a[0] = a[1] = _mm512_setzero_ps();
    const int64_t c1 = c0 + group_chunks < chunks ? c0 + group_chunks : chunks;
    for (int64_t c = c0; c < c1; ++c) {
      const __m512i b = _mm512_loadu_si512(w + c * kChunkBytes);
      const __m512i lo = _mm512_and_si512(b, mask), hi = _mm512_and_si512(_mm512_srli_epi16(b, 4), mask);
      const __m512bh w01lo = (__m512bh)_mm512_permutexvar_epi16(_mm512_cvtepu8_epi16(_mm512_castsi512_si256(lo)), table);
      const __m512bh w23lo = (__m512bh)_mm512_permutexvar_epi16(_mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(lo, 1)), table);
      const __m512bh w01hi = (__m512bh)_mm512_permutexvar_epi16(_mm512_cvtepu8_epi16(_mm512_castsi512_si256(hi)), table);
      const __m512bh w23hi = (__m512bh)_mm512_permutexvar_epi16(_mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(hi, 1)), table);
      for (int m = 0; m < MX; ++m) {
        const uint16_t* xc = x + m * x_stride + c * 32;
        const __m512bh xl = (__m512bh)_mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xc)));
        const __m512bh xh = (__m512bh)_mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xc + 16)));
        acc[m][0] = _mm512_dpbf16_ps(_mm512_dpbf16_ps(acc[m][0], w01lo, xl), w01hi, xh);
        acc[m][1] = _mm512_dpbf16_ps(_mm512_dpbf16_ps(acc[m][1], w23lo, xl), w23hi, xh);
      }
    }
    const __m512 s01 = _mm512_insertf32x8(_mm512_set1_ps(scales[g]), _mm256_set1_ps(scales[s_stride + g]), 1);
    const __m512 s23 =
        _mm512_insertf32x8(_mm512_set1_ps(scales[2 * s_stride + g]), _mm256_set1_ps(scales[3 * s_stride + g]), 1);
    for (int m = 0; m < MX; ++m) {
      tot[m][0] = _mm512_fmadd_ps(acc[m][0], s01, tot[m][0]);
      tot[m][1] = _mm512_fmadd_ps(acc[m][1], s23, tot[m][1]);
    }
  }
  for (int m = 0; m < MX; ++m) {
    for (int p = 0; p < 2; ++p) {
      alignas(64) float l[16];
      _mm512_store_ps(l, tot[m][p]);
      for (int h = 0; h < 2; ++h) {
        const float* e = l + 8 * h;
        out[m * 4 + 2 * p + h] = ((e[0] + e[1]) + (e[2] + e[3])) + ((e[4] + e[5]) + (e[6] + e[7]));
      }
    }
  }
}

void block4Rows(const int8_t* w, const uint16_t* x, int64_t x_stride, int64_t x_rows, int64_t chunks,
                int64_t group_chunks, const float* scales, int64_t s_stride, float* out) {
  if (x_rows == 2) {
    block4<2>(w, x, x_stride, chunks, group_chunks, scales, s_stride, out);
  } else {
    block4<1>(w, x, x_stride, chunks, group_chunks, scales, s_stride, out);
  }
}

}  // namespace

LinearW4Bf16Block4Fn linearW4Bf16Avx512() { return &block4Rows; }

}  // namespace pt2q::cpu
