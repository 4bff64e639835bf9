// linear_mx's MXINT8 x MXINT8 kernel (compiled with AVX512F/BW/DQ/VL and VNNI; dispatched only
// where the CPU has AVX512_VNNI). The contract is MxInt8Gemm in kernels/cpu/linear_mx_microkernels.h.
//
// Why this shape: `vpdpbusd` multiplies unsigned bytes (a register) by signed bytes (which may be
// a 4-byte broadcast from memory). Putting 16 x rows in the lanes and broadcasting 4 codes of one
// weight row reads the weight in mx_quantize's own [N, K] layout, so nothing is repacked per call;
// x, small, is packed once as code + 128. The +128 is taken back per block with the weight row's
// code sum: sum (x + 128) w - 128 sum w = sum x w, exact in int32. A 32-element block is 8
// `vpdpbusd` per accumulator, then one conversion and two multiplies bring it into fp32.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/linear_mx_microkernels.h"

namespace pt2q::cpu {
namespace {

constexpr int64_t kUnit = 32;  // bytes per unit sum of the weight rows

// acc += xu . w in place (GCC otherwise copies every loop-carried accumulator around each
// vpdpbusd, as kernels/cpu/linear_int8_impl.h notes).
#define PT2Q_DPBUSD(acc, xu, w) asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(xu), "v"(w))

inline __m512i pairSums(__m512i a, __m512i b) {
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  return _mm512_add_epi32(_mm512_permutex2var_epi32(a, even, b), _mm512_permutex2var_epi32(a, odd, b));
}

// out[u] = -128 * (the sum of the codes of unit u (32 bytes) of a row), for units [0, units).
void unitCorrections(const int8_t* row, int64_t units, int32_t* out) {
  const __m512i ones = _mm512_set1_epi8(1);
  int64_t u = 0;
  for (; u + 16 <= units; u += 16) {
    // r[i]: lanes 0-7 hold unit 2i in 4-byte sums, lanes 8-15 unit 2i + 1; three rounds of
    // adjacent-pair sums leave unit j in lane j.
    __m512i r[8];
    for (int i = 0; i < 8; ++i) {
      r[i] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, _mm512_loadu_si512(row + (u + 2 * i) * kUnit));
    }
    const __m512i a0 = pairSums(r[0], r[1]), a1 = pairSums(r[2], r[3]);
    const __m512i a2 = pairSums(r[4], r[5]), a3 = pairSums(r[6], r[7]);
    const __m512i sums = pairSums(pairSums(a0, a1), pairSums(a2, a3));
    _mm512_storeu_si512(out + u, _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(sums, 7)));
  }
  for (; u < units; ++u) {
    int32_t t = 0;
    for (int64_t i = 0; i < kUnit; ++i) t += row[u * kUnit + i];
    out[u] = -128 * t;
  }
}

// 2^(e - 133) for E8M0 bytes e (NaN for 255), as the table a.scale_values holds.
void scaleValues(const MxInt8Gemm& a, const uint8_t* s, float* out) {
  int64_t b = 0;
  for (; b + 16 <= a.blocks; b += 16) {
    const __m512i e = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + b)));
    __m512 v = _mm512_i32gather_ps(e, a.scale_values, 4);
    _mm512_storeu_ps(out + b, v);
  }
  for (; b < a.blocks; ++b) out[b] = a.scale_values[s[b]];
}

// For row n: corr[b] = -128 * (sum of the codes of block b), swf[b] = the block's scale value.
void columnPrep(const MxInt8Gemm& a, int64_t n, int32_t* corr, float* swf, std::vector<int32_t>& units) {
  const int8_t* row = a.w + n * a.k;
  scaleValues(a, a.w_scales + n * a.scale_stride, swf);
  if (a.block % kUnit == 0) {
    const int64_t nu = a.k / kUnit, per = a.block / kUnit;
    if (per == 1) {
      unitCorrections(row, nu, corr);
    } else {
      units.resize(static_cast<size_t>(nu));
      unitCorrections(row, nu, units.data());
      for (int64_t b = 0; b < a.blocks; ++b) {
        int32_t t = 0;
        for (int64_t u = b * per; u < std::min(nu, (b + 1) * per); ++u) t += units[u];
        corr[b] = t;
      }
    }
    if (nu < a.blocks * per) {  // the ragged last block: its whole units (if per > 1) and its tail
      int32_t t = 0;
      for (int64_t i = nu * kUnit; i < a.k; ++i) t += row[i];
      if (nu == a.blocks - 1 && per == 1) corr[a.blocks - 1] = 0;
      corr[a.blocks - 1] -= 128 * t;
    }
  } else {
    for (int64_t b = 0; b < a.blocks; ++b) {
      int32_t t = 0;
      for (int64_t i = b * a.block; i < std::min(a.k, (b + 1) * a.block); ++i) t += row[i];
      corr[b] = -128 * t;
    }
  }
}

inline __m512i broadcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// x groups [g, g + MV) against columns [n, n + NR); corr / swf: the columns' prep, [NR][blocks].
// The int32 accumulators are named locals updated by PT2Q_DPBUSD (an array of them ends up on
// the stack); those a tile does not use are dropped by the compiler.
// `next`, when not null, is the next column chunk (NR rows): its rows are prefetched a line per
// 16 steps, so the next columnPrep finds them in cache instead of waiting on memory.
template <int MV, int NR>
void tile(const MxInt8Gemm& a, int64_t g, int64_t n, const int32_t* corr, const float* swf, const int8_t* next) {
  static_assert(MV >= 1 && MV <= 2 && NR >= 1 && NR <= 12 && MV * NR <= 12);
  const int64_t k4 = a.k / 4;
  const uint8_t* x0 = a.xu + g * k4 * 64;
  const uint8_t* x1 = x0 + k4 * 64;
  const int8_t* wr[NR];
#pragma GCC unroll 16
  for (int j = 0; j < NR; ++j) wr[j] = a.w + (n + j) * a.k;
  __m512 acc[MV][NR];
#pragma GCC unroll 16
  for (int v = 0; v < MV; ++v) {
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) acc[v][j] = _mm512_setzero_ps();
  }
  __m512i p0, p1, p2, p3, p4, p5, p6, p7, p8, p9, p10, p11;  // x group 0, columns 0..11
  __m512i q0, q1, q2, q3, q4, q5, q6, q7, q8, q9, q10, q11;  // x group 1 (columns 0..5 used)
  for (int64_t b = 0; b < a.blocks; ++b) {
    const int64_t c0 = b * a.block / 4, c1 = std::min(k4, (b + 1) * a.block / 4);
#define PT2Q_INIT(j)                                                   \
  if constexpr (NR > j) {                                              \
    p##j = _mm512_set1_epi32(corr[j * a.blocks + b]);                  \
    if constexpr (MV > 1 && j < 6) q##j = p##j;                        \
  }
#define PT2Q_STEP(j)                                                   \
  if constexpr (NR > j) {                                              \
    const __m512i w = broadcast4(wr[j] + 4 * c);                       \
    PT2Q_DPBUSD(p##j, xv0, w);                                         \
    if constexpr (MV > 1 && j < 6) PT2Q_DPBUSD(q##j, xv1, w);          \
  }
#define PT2Q_EPI(j)                                                                                  \
  if constexpr (NR > j) {                                                                            \
    const __m512 sw = _mm512_set1_ps(swf[j * a.blocks + b]);                                         \
    acc[0][j] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(p##j), sx0), sw, acc[0][j]);        \
    if constexpr (MV > 1 && j < 6) {                                                                 \
      acc[MV - 1][j] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(q##j), sx1), sw, acc[MV - 1][j]); \
    }                                                                                                \
  }
#define PT2Q_ALL(M) M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7) M(8) M(9) M(10) M(11)
    PT2Q_ALL(PT2Q_INIT)
    for (int64_t c = c0; c < c1; ++c) {
      if (next != nullptr && c % 16 == 0) {
#pragma GCC unroll 16
        for (int j = 0; j < NR; ++j) _mm_prefetch(reinterpret_cast<const char*>(next + j * a.k + 4 * c), _MM_HINT_T0);
      }
      const __m512i xv0 = _mm512_loadu_si512(x0 + c * 64);
      const __m512i xv1 = MV > 1 ? _mm512_loadu_si512(x1 + c * 64) : xv0;
      PT2Q_ALL(PT2Q_STEP)
    }
    const __m512 sx0 = _mm512_loadu_ps(a.sx + (g * a.blocks + b) * 16);
    const __m512 sx1 = MV > 1 ? _mm512_loadu_ps(a.sx + ((g + 1) * a.blocks + b) * 16) : sx0;
    PT2Q_ALL(PT2Q_EPI)
#undef PT2Q_ALL
#undef PT2Q_EPI
#undef PT2Q_STEP
#undef PT2Q_INIT
  }
  (void)p0, (void)q0;
  // Lanes are x rows: each column's 16 results go down a column of out.
  alignas(64) float col[16];
  for (int v = 0; v < MV; ++v) {
    const int64_t r0 = (g + v) * 16, rows = std::min<int64_t>(16, a.m - r0);
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) {
      _mm512_store_ps(col, acc[v][j]);
      for (int64_t l = 0; l < rows; ++l) a.out[(r0 + l) * a.ldo + n + j] = col[l];
    }
  }
}

template <int MV, int NR>
void tileUpTo(int nr, const MxInt8Gemm& a, int64_t g, int64_t n, const int32_t* corr, const float* swf,
              const int8_t* next) {
  if constexpr (NR > 0) {
    if (nr == NR) {
      tile<MV, NR>(a, g, n, corr, swf, next);
    } else {
      tileUpTo<MV, NR - 1>(nr, a, g, n, corr, swf, next);
    }
  }
}

// Two x groups share each weight broadcast when there are two; one group takes twice the columns
// (the accumulators fill the same 24 registers either way).
constexpr int kColsPair = 6;
constexpr int kColsSingle = 12;

void gemm(const MxInt8Gemm& a, int64_t n0, int64_t n1) {
  const int cols = a.groups >= 2 ? kColsPair : kColsSingle;
  std::vector<int32_t> corr(static_cast<size_t>(cols * a.blocks)), units;
  std::vector<float> swf(static_cast<size_t>(cols * a.blocks));
  for (int64_t n = n0; n < n1; n += cols) {
    const int nr = static_cast<int>(std::min<int64_t>(cols, n1 - n));
    for (int j = 0; j < nr; ++j) columnPrep(a, n + j, corr.data() + j * a.blocks, swf.data() + j * a.blocks, units);
    // Only a full next chunk is prefetched (its rows exist); the first tile does it.
    const int8_t* next = n + 2 * cols <= n1 ? a.w + (n + cols) * a.k : nullptr;
    int64_t g = 0;
    for (; g + 2 <= a.groups; g += 2, next = nullptr) tileUpTo<2, kColsPair>(nr, a, g, n, corr.data(), swf.data(), next);
    if (g < a.groups) tileUpTo<1, kColsSingle>(nr, a, g, n, corr.data(), swf.data(), next);
  }
}

}  // namespace

LinearMxInt8GemmFn linearMxInt8GemmVnni() { return &gemm; }

}  // namespace pt2q::cpu
