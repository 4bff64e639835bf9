// AVX-512 helpers of the W4A16 block kernels whose fp32 lane i accumulates weight row i / 4 of
// a block of 4 rows (linear_w4_bf16.cpp, linear_w4_f32.cpp). Include only from files compiled
// with the AVX-512 flags.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace pt2q::cpu::row_lanes {

/// Lanes 4r..4r+3 = v[r * stride].
inline __m512 perRow(const float* v, int64_t stride) {
  const __m512i idx = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
  const __m128 four = _mm_set_ps(v[3 * stride], v[2 * stride], v[stride], v[0]);
  return _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(four));
}

/// out[m * 4 + r] = the sum of tot[m]'s lanes 4r..4r+3, for MX x rows.
template <int MX>
inline void storeRowSums(const __m512 (&tot)[MX], float* out) {
  for (int m = 0; m < MX; ++m) {
    alignas(64) float l[16];
    _mm512_store_ps(l, tot[m]);
    for (int r = 0; r < 4; ++r) {
      const float* e = l + 4 * r;
      out[m * 4 + r] = (e[0] + e[1]) + (e[2] + e[3]);
    }
  }
}

}  // namespace pt2q::cpu::row_lanes
