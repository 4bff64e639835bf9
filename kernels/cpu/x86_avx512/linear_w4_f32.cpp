// W4A16 with fp32 activations on AVX-512: the nibbles are decoded by `vpermps`, which reads only
// the low 4 bits of each 32-bit index lane, so one shift and one permute turn 16 nibbles straight
// into the fp32 values v = u - 8 of a 16-entry table. The generic skeleton spent a zero-extend, an
// and or shift, and an int-to-float conversion per vector (28 vector ops per 64-byte chunk against
// 23 here) and sat at 37-42 GB/s on the 2-core Zen 5 VM with 80+ GB/s of memory bandwidth.
// Since the table holds v itself, no `8 * sum(x)` correction follows (the caller subtracts
// zp * s * sum(x) only when there are zero points), which also removes that cancellation.
//
// Dword i of a 64-byte chunk (4 rows x 16 bytes) is bytes 4(i%4)..4(i%4)+3 of row i/4; its nibble
// p (bits 4p..4p+3) is byte 4(i%4) + p/2's low (p even) or high nibble, i.e. k = 4(i%4) + p/2 +
// 16(p%2) of the chunk. x is permuted once per call so that the 4 values lane i%4 = q needs for
// nibble p sit together (xperm[32c + 4p + q]) and broadcast to the 4 rows; fp32 lane i then
// accumulates row i/4, as in linear_w4_bf16.cpp.
#include <immintrin.h>

#include "kernels/cpu/linear_microkernels.h"
#include "kernels/cpu/x86_avx512/row_lanes.h"

namespace pt2q::cpu {
namespace {

constexpr int64_t kChunkBytes = 64;
constexpr int64_t kPrefetchChunks = 256;  // 16 KiB ahead: see linear_w4_bf16.cpp

inline __m512 xq(const float* p) { return _mm512_broadcast_f32x4(_mm_loadu_ps(p)); }

// v = u - 8 for nibble p of every dword of b (p a constant after unrolling: an immediate shift).
inline __m512 nibbleValues(__m512i b, int p) {
  const __m512 lut = _mm512_set_ps(7, 6, 5, 4, 3, 2, 1, 0, -1, -2, -3, -4, -5, -6, -7, -8);
  return _mm512_permutexvar_ps(p == 0 ? b : _mm512_srli_epi32(b, 4 * p), lut);
}

template <int MX>
void block4(const int8_t* w, const float* x, int64_t x_stride, int64_t chunks, int64_t group_chunks,
            const float* scales, int64_t s_stride, float* out) {
  __m512 tot[MX];
  for (auto& t : tot) t = _mm512_setzero_ps();
  for (int64_t c0 = 0, g = 0; c0 < chunks; c0 += group_chunks, ++g) {
    // One accumulator per nibble position: 8 independent FMA chains per x row.
    __m512 acc[MX][8];
    for (auto& a : acc) {
      for (auto& v : a) v = _mm512_setzero_ps();
    }
    const int64_t c1 = c0 + group_chunks < chunks ? c0 + group_chunks : chunks;
    for (int64_t c = c0; c < c1; ++c) {
      _mm_prefetch(reinterpret_cast<const char*>(w + (c + kPrefetchChunks) * kChunkBytes), _MM_HINT_T0);
      const __m512i b = _mm512_loadu_si512(w + c * kChunkBytes);
      __m512 wv[8];
#pragma GCC unroll 8
      for (int p = 0; p < 8; ++p) wv[p] = nibbleValues(b, p);
      for (int m = 0; m < MX; ++m) {
        const float* xc = x + m * x_stride + c * 32;
        for (int p = 0; p < 8; ++p) acc[m][p] = _mm512_fmadd_ps(wv[p], xq(xc + 4 * p), acc[m][p]);
      }
    }
    const __m512 s = row_lanes::perRow(scales + g, s_stride);
    for (int m = 0; m < MX; ++m) {
      const __m512 a = _mm512_add_ps(
          _mm512_add_ps(_mm512_add_ps(acc[m][0], acc[m][1]), _mm512_add_ps(acc[m][2], acc[m][3])),
          _mm512_add_ps(_mm512_add_ps(acc[m][4], acc[m][5]), _mm512_add_ps(acc[m][6], acc[m][7])));
      tot[m] = _mm512_fmadd_ps(a, s, tot[m]);
    }
  }
  row_lanes::storeRowSums<MX>(tot, out);
}

// Four consecutive blocks (16 rows) against one x row, for a single long row (the op's runQuads):
// the 8 x broadcasts a chunk and the pass over x are shared by 4 blocks, as in
// linear_w4_bf16.cpp's block16. Two accumulators a block give 8 FMA chains.
void block16(const int8_t* w, const float* x, int64_t chunks, int64_t group_chunks, const float* scales,
             int64_t s_stride, float* out) {
  constexpr int kBlocks = 4;
  const int64_t block_bytes = chunks * kChunkBytes;
  __m512 tot[kBlocks];
  for (auto& t : tot) t = _mm512_setzero_ps();
  for (int64_t c0 = 0, g = 0; c0 < chunks; c0 += group_chunks, ++g) {
    __m512 acc[kBlocks][2];
    for (auto& a : acc) a[0] = a[1] = _mm512_setzero_ps();
    const int64_t c1 = c0 + group_chunks < chunks ? c0 + group_chunks : chunks;
    for (int64_t c = c0; c < c1; ++c) {
      __m512i b[kBlocks];
#pragma GCC unroll 4
      for (int j = 0; j < kBlocks; ++j) {
        const int8_t* wc = w + j * block_bytes + c * kChunkBytes;
        _mm_prefetch(reinterpret_cast<const char*>(wc + kPrefetchChunks / kBlocks * kChunkBytes), _MM_HINT_T0);
        b[j] = _mm512_loadu_si512(wc);
      }
      // Unrolled so that the shift counts are immediates and the accumulators stay in registers.
#pragma GCC unroll 8
      for (int p = 0; p < 8; ++p) {
        const __m512 xv = xq(x + c * 32 + 4 * p);
#pragma GCC unroll 4
        for (int j = 0; j < kBlocks; ++j) {
          acc[j][p % 2] = _mm512_fmadd_ps(nibbleValues(b[j], p), xv, acc[j][p % 2]);
        }
      }
    }
    for (int j = 0; j < kBlocks; ++j) {
      const __m512 s = row_lanes::perRow(scales + j * 4 * s_stride + g, s_stride);
      tot[j] = _mm512_fmadd_ps(_mm512_add_ps(acc[j][0], acc[j][1]), s, tot[j]);
    }
  }
  row_lanes::storeRowSums<kBlocks>(tot, out);  // block j's rows land where x row j's would
}

void block4Rows(const int8_t* w, const float* x, int64_t x_stride, int64_t x_rows, int64_t chunks,
                int64_t group_chunks, const float* scales, int64_t s_stride, float* out) {
  if (x_rows == 2) {
    block4<2>(w, x, x_stride, chunks, group_chunks, scales, s_stride, out);
  } else {
    block4<1>(w, x, x_stride, chunks, group_chunks, scales, s_stride, out);
  }
}

void prepareX(const float* x, int64_t rows, int64_t kp, float* xperm) {
  // Within 32 values: out[4p + q] = in[4q + p/2 + 16(p%2)].
  alignas(64) static const int32_t kIdx[32] = {0, 4, 8,  12, 16, 20, 24, 28, 1, 5, 9,  13, 17, 21, 25, 29,
                                               2, 6, 10, 14, 18, 22, 26, 30, 3, 7, 11, 15, 19, 23, 27, 31};
  const __m512i lo = _mm512_load_si512(kIdx), hi = _mm512_load_si512(kIdx + 16);
  for (int64_t m = 0; m < rows; ++m) {
    for (int64_t c = 0; c < kp; c += 32) {
      const __m512 a = _mm512_loadu_ps(x + m * kp + c), b = _mm512_loadu_ps(x + m * kp + c + 16);
      _mm512_storeu_ps(xperm + m * kp + c, _mm512_permutex2var_ps(a, lo, b));
      _mm512_storeu_ps(xperm + m * kp + c + 16, _mm512_permutex2var_ps(a, hi, b));
    }
  }
}

}  // namespace

const LinearW4F32Kernels* linearW4F32Avx512() {
  static const LinearW4F32Kernels table{&prepareX, &block4Rows, &block16};
  return &table;
}

}  // namespace pt2q::cpu
