// W4A16 with bf16 activations on AVX512_BF16; this file alone is compiled with -mavx512bf16.
// A stored nibble u becomes the bf16 word 0x4300 | u, which is exactly 128 + u: one shift and one
// `vpternlogd` per 32 weights and no shuffle, so the decode no longer saturates the shuffle port
// (the word-table lookup it replaces spent 10 shuffles per 64 bytes and capped the kernel near
// 53 GB/s even with its weights in the L3). The products meet bf16 x in `vdpbf16ps`, and each
// group subtracts (136 + zp) * sum(x over the group) once: u = v + 8, so 128 + u = v + 136.
//
// Word j of a 64-byte chunk (4 rows x 16 bytes) is bytes 2(j%8), 2(j%8)+1 of row j/8; its low
// nibble, high byte's low nibble, high nibble and high byte's high nibble are k = 2(j%8), +1, +16,
// +17 of the chunk. x is therefore permuted once per call, per 32-value chunk, into [even k < 16,
// odd k < 16, even k >= 16, odd k >= 16], each 8 words broadcast to the 4 rows from memory; fp32
// lane i then accumulates row i/4.
//
// fp32 x runs here too when torch's fp32 matmul precision allows ("high": x = hi + lo, two bf16
// parts; "medium": hi alone). The two parts of a chunk sit side by side in x and share the
// chunk's decode, so the split costs 4 more vdpbf16ps and broadcasts a chunk, not a second pass:
// one thread, weights in L2/L3, group 128: ~2.1 ns a chunk against the vpermps fp32 kernel's
// ~2.4 and one part's ~1.6 (without groups two parts take ~1.45 ns; each group's epilogue costs
// them more than it costs one part, and no reordering of it that I tried helped).
#include <immintrin.h>

#include "kernels/cpu/linear_microkernels.h"
#include "kernels/cpu/x86_avx512/row_lanes.h"

namespace pt2q::cpu {
namespace {

constexpr int64_t kChunkBytes = 64;
constexpr int kOrWithMask = 0xEA;  // vpternlog: (a & b) | c
// Software prefetch this far ahead of the weight stream (16 KiB, into L1 like the other block
// kernels): the hardware prefetcher alone left a 4096 x 11008 weight streaming at 50 GB/s from
// L3/DRAM on the 2-core AMD VM where 70+ GB/s were reachable (0.5-16 KiB measured; each doubling
// helped). A non-temporal hint was as good there but 1.6x slower on the 16-thread Intel host.
constexpr int64_t kPrefetchChunks = 256;

inline __m512bh decode(__m512i words, __m512i nib, __m512i base) {
  return (__m512bh)_mm512_ternarylogic_epi32(words, nib, base, kOrWithMask);
}

// Word vector h of a 64-byte chunk b (x slice h of its permutation, see the top): nibble bits
// 0-3, 8-11, 4-7, 12-15 of every word for h = 0..3 (h a constant after inlining).
inline __m512bh decodeNibbles(__m512i b, int h, __m512i nib, __m512i base) {
  constexpr int kShift[4] = {0, 8, 4, 12};
  return decode(h == 0 ? b : _mm512_srli_epi16(b, kShift[h]), nib, base);
}

inline __m512bh xq(const uint16_t* p) {
  return (__m512bh)_mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

inline __m512 sum4(const __m512 (&a)[4]) { return _mm512_add_ps(_mm512_add_ps(a[0], a[1]), _mm512_add_ps(a[2], a[3])); }

// MX rows of x, each of PARTS bf16 parts interleaved by chunk (x row m's part j of chunk c at
// x + m * x_stride + (c * PARTS + j) * 32): a decoded chunk serves every part, and each group's
// offset correction runs once a row.
template <int MX, int PARTS>
void block4(const int8_t* w, const uint16_t* x, int64_t x_stride, int64_t chunks, int64_t group_chunks,
            const float* scales, const float* offsets, int64_t s_stride, const float* xsum,
            float* out) {
  // One chunk unrolled per accumulator set: 4 a part and row (8 for one row of one part)
  // independent vdpbf16ps chains cover its latency.
  constexpr int kRows = MX * PARTS;
  constexpr int kUnroll = kRows == 1 ? 2 : 1;
  const __m512i nib = _mm512_set1_epi16(0x000F), base = _mm512_set1_epi16(0x4300);
  const __m512 quarter_offset = _mm512_set1_ps(136.0f / 4);
  __m512 tot[MX];
  for (auto& t : tot) t = _mm512_setzero_ps();
  auto step = [&](int64_t c, __m512(&acc)[kRows][4]) {
    _mm_prefetch(reinterpret_cast<const char*>(w + (c + kPrefetchChunks) * kChunkBytes), _MM_HINT_T0);
    const __m512i b = _mm512_loadu_si512(w + c * kChunkBytes);
    const __m512bh wv[4] = {decodeNibbles(b, 0, nib, base), decodeNibbles(b, 1, nib, base),
                            decodeNibbles(b, 2, nib, base), decodeNibbles(b, 3, nib, base)};
    for (int m = 0; m < MX; ++m) {
      for (int j = 0; j < PARTS; ++j) {
        const uint16_t* xc = x + m * x_stride + (c * PARTS + j) * 32;
        __m512(&a)[4] = acc[m * PARTS + j];
        for (int h = 0; h < 4; ++h) a[h] = _mm512_dpbf16_ps(a[h], wv[h], xq(xc + 8 * h));
      }
    }
  };
  for (int64_t c0 = 0, g = 0; c0 < chunks; c0 += group_chunks, ++g) {
    __m512 acc[kUnroll][kRows][4];
    for (auto& u : acc) {
      for (auto& a : u) a[0] = a[1] = a[2] = a[3] = _mm512_setzero_ps();
    }
    const int64_t c1 = c0 + group_chunks < chunks ? c0 + group_chunks : chunks;
    int64_t c = c0;
    for (; c + kUnroll <= c1; c += kUnroll) {
      for (int u = 0; u < kUnroll; ++u) step(c + u, acc[u]);
    }
    for (; c < c1; ++c) step(c, acc[0]);
    const __m512 s = row_lanes::perRow(scales + g, s_stride);
    // Each of a row's 4 lanes takes a quarter of its (136 + zp) * sum(x) correction.
    const __m512 q = offsets == nullptr ? quarter_offset : row_lanes::perRow(offsets + g, s_stride);
    for (int m = 0; m < MX; ++m) {
      __m512 a = sum4(acc[0][m * PARTS]);
      for (int i = 1; i < kUnroll * PARTS; ++i) a = _mm512_add_ps(a, sum4(acc[i / PARTS][m * PARTS + i % PARTS]));
      a = _mm512_fnmadd_ps(_mm512_set1_ps(xsum[m * s_stride + g]), q, a);
      tot[m] = _mm512_fmadd_ps(a, s, tot[m]);
    }
  }
  row_lanes::storeRowSums<MX>(tot, out);
}

// Four consecutive blocks (16 rows) against one x row, for a single long row (the op's runQuads):
// block4<1> issues 4 x broadcasts per 64-byte chunk (1 a cycle on Zen 4, against ~12 cycles a
// chunk in all) and rereads the whole row of x for every block; shared by 4 blocks that is one
// broadcast a chunk and one pass over x per 16 rows. 16 accumulator chains (4 a block) still
// cover vdpbf16ps's latency. Each of the 4 weight streams is prefetched a quarter as far ahead,
// so 16 KiB stay in flight in all.
void block16(const int8_t* w, const uint16_t* x, int64_t chunks, int64_t group_chunks, const float* scales,
             const float* offsets, int64_t s_stride, const float* xsum, float* out) {
  constexpr int kBlocks = 4;
  const __m512i nib = _mm512_set1_epi16(0x000F), base = _mm512_set1_epi16(0x4300);
  const __m512 quarter_offset = _mm512_set1_ps(136.0f / 4);
  const int64_t block_bytes = chunks * kChunkBytes;
  __m512 tot[kBlocks];
  for (auto& t : tot) t = _mm512_setzero_ps();
  for (int64_t c0 = 0, g = 0; c0 < chunks; c0 += group_chunks, ++g) {
    __m512 acc[kBlocks][4];
    for (auto& a : acc) a[0] = a[1] = a[2] = a[3] = _mm512_setzero_ps();
    const int64_t c1 = c0 + group_chunks < chunks ? c0 + group_chunks : chunks;
    for (int64_t c = c0; c < c1; ++c) {
      const uint16_t* xc = x + c * 32;
      const __m512bh x0 = xq(xc), x1 = xq(xc + 8), x2 = xq(xc + 16), x3 = xq(xc + 24);
      for (int j = 0; j < kBlocks; ++j) {
        const int8_t* wc = w + j * block_bytes + c * kChunkBytes;
        _mm_prefetch(reinterpret_cast<const char*>(wc + kPrefetchChunks / kBlocks * kChunkBytes), _MM_HINT_T0);
        const __m512i b = _mm512_loadu_si512(wc);
        acc[j][0] = _mm512_dpbf16_ps(acc[j][0], decodeNibbles(b, 0, nib, base), x0);
        acc[j][1] = _mm512_dpbf16_ps(acc[j][1], decodeNibbles(b, 1, nib, base), x1);
        acc[j][2] = _mm512_dpbf16_ps(acc[j][2], decodeNibbles(b, 2, nib, base), x2);
        acc[j][3] = _mm512_dpbf16_ps(acc[j][3], decodeNibbles(b, 3, nib, base), x3);
      }
    }
    const __m512 sx = _mm512_set1_ps(xsum[g]);
    for (int j = 0; j < kBlocks; ++j) {
      const int64_t at = j * 4 * s_stride + g;
      const __m512 s = row_lanes::perRow(scales + at, s_stride);
      const __m512 q = offsets == nullptr ? quarter_offset : row_lanes::perRow(offsets + at, s_stride);
      __m512 a = _mm512_add_ps(_mm512_add_ps(acc[j][0], acc[j][1]), _mm512_add_ps(acc[j][2], acc[j][3]));
      a = _mm512_fnmadd_ps(sx, q, a);
      tot[j] = _mm512_fmadd_ps(a, s, tot[j]);
    }
  }
  row_lanes::storeRowSums<kBlocks>(tot, out);  // block j's rows land where x row j's would
}

void block4Rows(const int8_t* w, const uint16_t* x, int64_t x_stride, int64_t x_rows, int parts, int64_t chunks,
                int64_t group_chunks, const float* scales, const float* offsets, int64_t s_stride, const float* xsum,
                float* out) {
  if (x_rows == 2) {
    (parts == 2 ? block4<2, 2> : block4<2, 1>)(w, x, x_stride, chunks, group_chunks, scales, offsets, s_stride, xsum,
                                               out);
  } else {
    (parts == 2 ? block4<1, 2> : block4<1, 1>)(w, x, x_stride, chunks, group_chunks, scales, offsets, s_stride, xsum,
                                               out);
  }
}

void prepareX(const uint16_t* x, int64_t rows, int64_t kp, int64_t group_chunks, uint16_t* xperm, float* xsum) {
  const __m512i perm = _mm512_set_epi16(31, 29, 27, 25, 23, 21, 19, 17, 30, 28, 26, 24, 22, 20, 18, 16,  //
                                        15, 13, 11, 9, 7, 5, 3, 1, 14, 12, 10, 8, 6, 4, 2, 0);
  const int64_t chunks = kp / 32, groups = (chunks + group_chunks - 1) / group_chunks;
  for (int64_t m = 0; m < rows; ++m) {
    for (int64_t g = 0; g < groups; ++g) {
      __m512 sum = _mm512_setzero_ps();
      const int64_t c1 = (g + 1) * group_chunks < chunks ? (g + 1) * group_chunks : chunks;
      for (int64_t c = g * group_chunks; c < c1; ++c) {
        const __m512i v = _mm512_loadu_si512(x + m * kp + c * 32);
        _mm512_storeu_si512(xperm + m * kp + c * 32, _mm512_permutexvar_epi16(perm, v));
        const __m512i lo = _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(v)), 16);
        const __m512i hi = _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(v, 1)), 16);
        sum = _mm512_add_ps(sum, _mm512_add_ps(_mm512_castsi512_ps(lo), _mm512_castsi512_ps(hi)));
      }
      xsum[m * groups + g] = _mm512_reduce_add_ps(sum);
    }
  }
}

// Row m of fp32 x as `parts` bf16 parts interleaved by 32-value chunk (part j of chunk c at
// out[m * kp * parts + (c * parts + j) * 32]): part 0 is x rounded to nearest even and part 1 the
// rest of x (exact in fp32) rounded likewise, so hi + lo holds x to 2^-17 of |x|.
// `vcvtneps2bf16` reads denormals as zero, as `vdpbf16ps` does.
void splitX(const float* x, int64_t rows, int64_t kp, int parts, uint16_t* out) {
  for (int64_t m = 0; m < rows; ++m) {
    for (int64_t c = 0; c < kp; c += 16) {
      __m512 v = _mm512_loadu_ps(x + m * kp + c);
      uint16_t* o = out + m * kp * parts + (c / 32 * parts) * 32 + c % 32;
      for (int j = 0; j < parts; ++j) {
        const __m256i h = (__m256i)_mm512_cvtneps_pbh(v);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + j * 32), h);
        v = _mm512_sub_ps(v, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)));
      }
    }
  }
}

}  // namespace

const LinearW4Bf16Kernels* linearW4Bf16Avx512() {
  static const LinearW4Bf16Kernels table{&prepareX, &block4Rows, &block16, &splitX};
  return &table;
}

}  // namespace pt2q::cpu
