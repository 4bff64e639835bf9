// lookup_q8's loop (Q8LookupFn, linear_microkernels.h), compiled once per ISA inside
// linear_kernels_impl.h: out[i] = table[in[i]] over bytes.
// - AVX2 (and the AVX-512 table, which runs the same 256-bit loop): the table as 16 rows of 16
//   entries, each in both 128-bit lanes; per 32 codes, vpshufb looks every code's low nibble up in
//   each row, with an index that vpshufb zeroes for every row but the code's high nibble's
//   (xor, saturating add), and the rows are or'ed: 16 rows x 4 operations per 32 codes.
// - Elsewhere, and for the tail: eight codes per 64-bit load and store. A byte store per code, which
//   may alias the table and the input (char types alias anything), made the compiler reload around
//   every store (6 cycles a code).
#pragma once

#ifndef PT2Q_CPU_ISA_NS
#error "include q8_lookup_impl.h through linear_kernels_impl.h"
#endif

#include <array>
#include <cstring>

namespace pt2q::cpu::PT2Q_CPU_ISA_NS {

inline void q8LookupRun(const uint8_t* in, int64_t n, const uint8_t* table, uint8_t* out) {
  int64_t i = 0;
#if defined(PT2Q_VEC_AVX512) || defined(PT2Q_VEC_AVX2)
  __m256i rows[16];
  for (int k = 0; k < 16; ++k) {
    rows[k] = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(table + 16 * k)));
  }
  const __m256i bias = _mm256_set1_epi8(0x70);
  for (; i + 32 <= n; i += 32) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i));
    __m256i r = _mm256_setzero_si256();
    for (int row = 0; row < 16; ++row) {
      // High nibble == row: v ^ (row << 4) < 16, + 0x70 keeps bit 7 clear and vpshufb reads the low
      // nibble's entry; any other row saturates to >= 0x80, which vpshufb turns into 0.
      const __m256i idx = _mm256_adds_epu8(_mm256_xor_si256(v, _mm256_set1_epi8(static_cast<char>(row << 4))), bias);
      r = _mm256_or_si256(r, _mm256_shuffle_epi8(rows[row], idx));
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), r);
  }
#endif
  std::array<uint8_t, 256> t;  // a copy of its own: no store below may alias it
  std::memcpy(t.data(), table, t.size());
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, in + i, 8);
    uint64_t r = 0;
    for (int k = 0; k < 8; ++k) r |= static_cast<uint64_t>(t[(w >> (8 * k)) & 0xFF]) << (8 * k);
    std::memcpy(out + i, &r, 8);
  }
  for (; i < n; ++i) out[i] = t[in[i]];
}

}  // namespace pt2q::cpu::PT2Q_CPU_ISA_NS
