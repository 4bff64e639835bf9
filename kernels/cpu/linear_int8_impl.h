// Bodies of the int8-activation linear microkernels (linear_w8a8 / linear_w4a8), included by
// linear_kernels_impl.h once per ISA. Activations arrive as unsigned bytes xu = q + 128 (q the
// per-token int8 code), weights as signed bytes (int8 codes, or int4 nibbles u - 8), so each
// 4-byte group is one u8 x s8 dot product: `vpdpbusd` with AVX512_VNNI, widening 16-bit
// multiply-adds elsewhere. A 64-byte chunk of a packed block is 4 weight rows x 16 bytes, so one
// 16-byte slice of x broadcast to the four 128-bit lanes meets all four rows at once; lane
// r * 4 + j of an accumulator sums bytes 4j..4j+3 of row r's slices.
//
// sum_k (q - zx') w = sum_k xu w - (zx' + 128) sum_k w, with zx' the token's zero point: the
// weight sums ("lane sums", the same lanes as the accumulators) are taken once per panel by
// weightSums and subtracted per group in int32 (exact) before the one conversion to fp32.
#pragma once

#include <cmath>
#include <cstring>

namespace pt2q::cpu::PT2Q_CPU_ISA_NS {

// ---- 16 int32 lanes: one chunk of one block -----------------------------------------------------
#if defined(PT2Q_VEC_AVX512)
struct IV {
  __m512i v;
  static IV zero() { return {_mm512_setzero_si512()}; }
  static IV load(const int32_t* p) { return {_mm512_loadu_si512(p)}; }
  void store(int32_t* p) const { _mm512_storeu_si512(p, v); }
};
struct BV {  // 64 bytes: 4 rows x 16 bytes, or one 16-byte x slice in every 128-bit lane
  __m512i v;
};
inline BV loadBytes(const void* p) { return {_mm512_loadu_si512(p)}; }
inline void storeBytes(BV b, void* p) { _mm512_storeu_si512(p, b.v); }
inline BV onesBytes() { return {_mm512_set1_epi8(1)}; }
inline BV broadcastX(const uint8_t* p) {
  return {_mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))};
}
inline void splitNibbles(BV b, BV& lo, BV& hi) {
  const __m512i mask = _mm512_set1_epi8(0x0F), eight = _mm512_set1_epi8(8);
  lo = {_mm512_sub_epi8(_mm512_and_si512(b.v, mask), eight)};
  hi = {_mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(b.v, 4), mask), eight)};
}
#if defined(PT2Q_VNNI)
inline IV dot(IV acc, BV xu, BV w) { return {_mm512_dpbusd_epi32(acc.v, xu.v, w.v)}; }
inline void dotInto(IV& acc, BV xu, BV w) { acc.v = _mm512_dpbusd_epi32(acc.v, xu.v, w.v); }
inline IV dotNarrow(IV acc, BV xu, BV w) { return dot(acc, xu, w); }  // vpdpbusd cannot saturate
// acc += xu . w in place. With the intrinsic GCC copies every loop-carried accumulator into a
// fresh register and back (two moves per vpdpbusd), which bounds the GEMM tile by the front end.
#define PT2Q_DPBUSD(acc, xu, w) asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(xu), "v"(w))
#else
// Without VNNI: widen to int16 (u8 x s8 pairs can overflow vpmaddubsw's saturating int16) and
// vpmaddwd twice. A lane then sums bytes {2j, 2j+1, 2j+8, 2j+9} of its row instead of VNNI's
// 4j..4j+3; only a row's total is read (fmaRows, rowSums) and the weight sums come from the same
// dot, so the lanes are not shuffled back into VNNI's order (two shuffles a dot, dropped:
// see the AVX2 section below).
inline IV dot(IV acc, BV xu, BV w) {
  const __m512i zero = _mm512_setzero_si512();
  const __m512i sign = _mm512_movm_epi8(_mm512_movepi8_mask(w.v));
  const __m512i lo = _mm512_madd_epi16(_mm512_unpacklo_epi8(xu.v, zero), _mm512_unpacklo_epi8(w.v, sign));
  const __m512i hi = _mm512_madd_epi16(_mm512_unpackhi_epi8(xu.v, zero), _mm512_unpackhi_epi8(w.v, sign));
  return {_mm512_add_epi32(acc.v, _mm512_add_epi32(lo, hi))};
}
// Weights of magnitude <= 8 (int4 codes): `vpmaddubsw` is exact (a pair sums to at most 2 x 255 x 8).
inline IV dotNarrow(IV acc, BV xu, BV w) {
  return {_mm512_add_epi32(acc.v, _mm512_madd_epi16(_mm512_maddubs_epi16(xu.v, w.v), _mm512_set1_epi16(1)))};
}
inline void dotInto(IV& acc, BV xu, BV w) { acc = dot(acc, xu, w); }
#endif
inline IV subMul(IV acc, IV sums, int32_t z) { return {_mm512_sub_epi32(acc.v, _mm512_mullo_epi32(sums.v, _mm512_set1_epi32(z)))}; }
// tot + float(a) * (scale of row r in lanes 4r..4r+3), the 4 row scales at s.
inline V fmaRows(IV a, const float* s, V tot) {
  const __m512 s4 = _mm512_castps128_ps512(_mm_loadu_ps(s));
  const __m512 sx = _mm512_permutexvar_ps(_mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0), s4);
  return {_mm512_fmadd_ps(_mm512_cvtepi32_ps(a.v), sx, tot.v)};
}
inline void rowSums(V t, float* out) {
  alignas(64) float l[16];
  _mm512_store_ps(l, t.v);
  for (int r = 0; r < 4; ++r) out[r] = (l[4 * r] + l[4 * r + 1]) + (l[4 * r + 2] + l[4 * r + 3]);
}
#elif defined(PT2Q_VEC_AVX2)
// Two 256-bit halves: rows 0-1 and rows 2-3 of a chunk. AVX2 has no u8 x s8 dot into int32 that
// cannot saturate (`vpmaddubsw` sums a pair into int16: 2 x 255 x 127 overflows), so int8 weights
// widen to int16 and go through `vpmaddwd`. A lane then sums bytes {2j, 2j+1, 2j+8, 2j+9} of its
// row rather than VNNI's 4j..4j+3: only a row's total is ever read (fmaRows, rowSums), and the
// weight sums come from the same dot, so the lanes need not match the other tables'. The plain
// loops this replaces were not vectorized: linear_q8 at 64 x 4096 x 4096 took 151 ms, 12x fp32
// F.linear (Zen 5 VM, 2 threads).
struct IV {
  __m256i a, b;
  static IV zero() { return {_mm256_setzero_si256(), _mm256_setzero_si256()}; }
  static IV load(const int32_t* p) {
    return {_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)),
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 8))};
  }
  void store(int32_t* p) const {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), a);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p + 8), b);
  }
};
struct BV {  // bytes 0-31 and 32-63
  __m256i a, b;
};
inline BV loadBytes(const void* p) {
  const auto* q = static_cast<const __m256i*>(p);
  return {_mm256_loadu_si256(q), _mm256_loadu_si256(q + 1)};
}
inline void storeBytes(BV b, void* p) {
  auto* q = static_cast<__m256i*>(p);
  _mm256_storeu_si256(q, b.a);
  _mm256_storeu_si256(q + 1, b.b);
}
inline BV onesBytes() { return {_mm256_set1_epi8(1), _mm256_set1_epi8(1)}; }
inline BV broadcastX(const uint8_t* p) {
  const __m256i x = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return {x, x};
}
inline void splitNibbles(BV b, BV& lo, BV& hi) {
  const __m256i mask = _mm256_set1_epi8(0x0F), eight = _mm256_set1_epi8(8);
  lo = {_mm256_sub_epi8(_mm256_and_si256(b.a, mask), eight), _mm256_sub_epi8(_mm256_and_si256(b.b, mask), eight)};
  hi = {_mm256_sub_epi8(_mm256_and_si256(_mm256_srli_epi16(b.a, 4), mask), eight),
        _mm256_sub_epi8(_mm256_and_si256(_mm256_srli_epi16(b.b, 4), mask), eight)};
}
inline __m256i dotHalf(__m256i acc, __m256i xu, __m256i w) {
  const __m256i zero = _mm256_setzero_si256(), sign = _mm256_cmpgt_epi8(zero, w);
  const __m256i lo = _mm256_madd_epi16(_mm256_unpacklo_epi8(xu, zero), _mm256_unpacklo_epi8(w, sign));
  const __m256i hi = _mm256_madd_epi16(_mm256_unpackhi_epi8(xu, zero), _mm256_unpackhi_epi8(w, sign));
  return _mm256_add_epi32(acc, _mm256_add_epi32(lo, hi));
}
inline IV dot(IV acc, BV xu, BV w) { return {dotHalf(acc.a, xu.a, w.a), dotHalf(acc.b, xu.b, w.b)}; }
// Weights of magnitude <= 8 (int4 codes): a pair sums to at most 2 x 255 x 8 in int16, so
// `vpmaddubsw` is exact, and lanes take VNNI's order.
inline __m256i dotNarrowHalf(__m256i acc, __m256i xu, __m256i w) {
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(xu, w), _mm256_set1_epi16(1)));
}
inline IV dotNarrow(IV acc, BV xu, BV w) { return {dotNarrowHalf(acc.a, xu.a, w.a), dotNarrowHalf(acc.b, xu.b, w.b)}; }
inline void dotInto(IV& acc, BV xu, BV w) { acc = dot(acc, xu, w); }
inline IV subMul(IV acc, IV sums, int32_t z) {
  const __m256i vz = _mm256_set1_epi32(z);
  return {_mm256_sub_epi32(acc.a, _mm256_mullo_epi32(sums.a, vz)), _mm256_sub_epi32(acc.b, _mm256_mullo_epi32(sums.b, vz))};
}
struct V16 {
  __m256 a, b;
};
// tot + float(a) * (scale of row r in lanes 4r..4r+3), the 4 row scales at s.
inline V16 fmaRows(IV a, const float* s, V16 tot) {
  const __m256 s4 = _mm256_castps128_ps256(_mm_loadu_ps(s));
  const __m256 sa = _mm256_permutevar8x32_ps(s4, _mm256_set_epi32(1, 1, 1, 1, 0, 0, 0, 0));
  const __m256 sb = _mm256_permutevar8x32_ps(s4, _mm256_set_epi32(3, 3, 3, 3, 2, 2, 2, 2));
  return {_mm256_fmadd_ps(_mm256_cvtepi32_ps(a.a), sa, tot.a), _mm256_fmadd_ps(_mm256_cvtepi32_ps(a.b), sb, tot.b)};
}
inline void rowSums(V16 t, float* out) {
  alignas(32) float l[16];
  _mm256_store_ps(l, t.a);
  _mm256_store_ps(l + 8, t.b);
  for (int r = 0; r < 4; ++r) out[r] = (l[4 * r] + l[4 * r + 1]) + (l[4 * r + 2] + l[4 * r + 3]);
}
#else
// Portable: plain int32 lanes.
struct IV {
  int32_t v[16];
  static IV zero() { return {}; }
  static IV load(const int32_t* p) {
    IV r;
    std::memcpy(r.v, p, sizeof(r.v));
    return r;
  }
  void store(int32_t* p) const { std::memcpy(p, v, sizeof(v)); }
};
struct BV {
  uint8_t b[64];
};
inline BV loadBytes(const void* p) {
  BV r;
  std::memcpy(r.b, p, 64);
  return r;
}
inline void storeBytes(BV b, void* p) { std::memcpy(p, b.b, 64); }
inline BV onesBytes() {
  BV r;
  std::memset(r.b, 1, 64);
  return r;
}
inline BV broadcastX(const uint8_t* p) {
  BV r;
  for (int q = 0; q < 4; ++q) std::memcpy(r.b + 16 * q, p, 16);
  return r;
}
inline void splitNibbles(BV b, BV& lo, BV& hi) {
  for (int i = 0; i < 64; ++i) {
    lo.b[i] = static_cast<uint8_t>((b.b[i] & 0xF) - 8);
    hi.b[i] = static_cast<uint8_t>((b.b[i] >> 4) - 8);
  }
}
inline IV dot(IV acc, BV xu, BV w) {
  for (int l = 0; l < 16; ++l) {
    int32_t s = 0;
    for (int t = 0; t < 4; ++t) s += static_cast<int32_t>(xu.b[4 * l + t]) * static_cast<int8_t>(w.b[4 * l + t]);
    acc.v[l] += s;
  }
  return acc;
}
inline void dotInto(IV& acc, BV xu, BV w) { acc = dot(acc, xu, w); }
inline IV dotNarrow(IV acc, BV xu, BV w) { return dot(acc, xu, w); }  // int32 lanes: exact as is
inline IV subMul(IV acc, IV sums, int32_t z) {
  for (int l = 0; l < 16; ++l) acc.v[l] -= sums.v[l] * z;
  return acc;
}
// The fp32 vector V of this ISA has 16 (generic) or 8 (AVX2) lanes; the int8 kernels keep their
// own 16 fp32 lanes.
struct V16 {
  float v[16];
};
inline V16 fmaRows(IV a, const float* s, V16 tot) {
  for (int l = 0; l < 16; ++l) tot.v[l] += static_cast<float>(a.v[l]) * s[l / 4];
  return tot;
}
inline void rowSums(V16 t, float* out) {
  for (int r = 0; r < 4; ++r) out[r] = (t.v[4 * r] + t.v[4 * r + 1]) + (t.v[4 * r + 2] + t.v[4 * r + 3]);
}
#endif

#if defined(PT2Q_VEC_AVX512)
using FV = V;
inline FV fzero() { return V::zero(); }
#elif defined(PT2Q_VEC_AVX2)
using FV = V16;
inline FV fzero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
#else
using FV = V16;
inline FV fzero() { return {}; }
#endif

// ---- weights: signed bytes of one chunk of one block --------------------------------------------
struct WI8 {
  static constexpr bool kNarrow = false;  // |code| <= 8 (dotNarrow is exact)
  static constexpr int kParts = 1;  // 64-byte weight vectors per chunk
  static constexpr int64_t kChunkK = 16;
  static void decode(const int8_t* c, BV* out) { out[0] = loadBytes(c); }
};
struct WI4 {
  static constexpr bool kNarrow = true;
  static constexpr int kParts = 2;  // low nibbles: k = 32c + l; high: k = 32c + 16 + l
  static constexpr int64_t kChunkK = 32;
  static void decode(const int8_t* c, BV* out) { splitNibbles(loadBytes(c), out[0], out[1]); }
};

constexpr int64_t kChunkBytes = kRows * kRowBytes;  // one chunk of one block

#if defined(PT2Q_VNNI)
// The 4 x 4 tile's inner loop: 16 accumulators as named locals updated in place (PT2Q_DPBUSD).
template <class W>
inline void chunkRangeVnni4x4(const int8_t* w, int64_t chunks, int64_t c0, int64_t c1, const uint8_t* xu,
                              int64_t xs, IV (&acc)[4][4]) {
  __m512i a00 = acc[0][0].v, a01 = acc[0][1].v, a02 = acc[0][2].v, a03 = acc[0][3].v;
  __m512i a10 = acc[1][0].v, a11 = acc[1][1].v, a12 = acc[1][2].v, a13 = acc[1][3].v;
  __m512i a20 = acc[2][0].v, a21 = acc[2][1].v, a22 = acc[2][2].v, a23 = acc[2][3].v;
  __m512i a30 = acc[3][0].v, a31 = acc[3][1].v, a32 = acc[3][2].v, a33 = acc[3][3].v;
  const int64_t bs = chunks * kChunkBytes;
  for (int64_t c = c0; c < c1; ++c) {
    BV w0[W::kParts], w1[W::kParts], w2[W::kParts], w3[W::kParts];
    const int8_t* wc = w + c * kChunkBytes;
    W::decode(wc, w0);
    W::decode(wc + bs, w1);
    W::decode(wc + 2 * bs, w2);
    W::decode(wc + 3 * bs, w3);
    for (int p = 0; p < W::kParts; ++p) {
      const uint8_t* xp = xu + c * W::kChunkK + p * kRowBytes;
#define PT2Q_ROW(m)                               \
  {                                               \
    const __m512i x = broadcastX(xp + (m) * xs).v; \
    PT2Q_DPBUSD(a##m##0, x, w0[p].v);             \
    PT2Q_DPBUSD(a##m##1, x, w1[p].v);             \
    PT2Q_DPBUSD(a##m##2, x, w2[p].v);             \
    PT2Q_DPBUSD(a##m##3, x, w3[p].v);             \
  }
      PT2Q_ROW(0)
      PT2Q_ROW(1)
      PT2Q_ROW(2)
      PT2Q_ROW(3)
#undef PT2Q_ROW
    }
  }
  acc[0][0].v = a00, acc[0][1].v = a01, acc[0][2].v = a02, acc[0][3].v = a03;
  acc[1][0].v = a10, acc[1][1].v = a11, acc[1][2].v = a12, acc[1][3].v = a13;
  acc[2][0].v = a20, acc[2][1].v = a21, acc[2][2].v = a22, acc[2][3].v = a23;
  acc[3][0].v = a30, acc[3][1].v = a31, acc[3][2].v = a32, acc[3][3].v = a33;
}
#endif


// int4 blocks ("n4k32", chunks of 32) re-laid as int8 blocks ("n4k16", 2 * chunks chunks): a
// chunk's low nibbles (k = 32c + l) become chunk 2c, its high nibbles chunk 2c + 1.
inline void expandInt4(const int8_t* w, int64_t blocks, int64_t chunks, int8_t* out) {
  for (int64_t i = 0; i < blocks * chunks; ++i) {
    BV parts[2];
    WI4::decode(w + i * kChunkBytes, parts);
    storeBytes(parts[0], out + 2 * i * kChunkBytes);
    storeBytes(parts[1], out + (2 * i + 1) * kChunkBytes);
  }
}

// Lane sums of `blocks` blocks, per group: sums[(b * groups + g) * 16 + lane].
template <class W>
void weightSums(const int8_t* w, int64_t blocks, int64_t chunks, int64_t group_chunks, int32_t* sums) {
  const int64_t groups = (chunks + group_chunks - 1) / group_chunks;
  const BV ones = onesBytes();
  for (int64_t b = 0; b < blocks; ++b) {
    const int8_t* wb = w + b * chunks * kChunkBytes;
    for (int64_t g = 0; g < groups; ++g) {
      IV s = IV::zero();
      const int64_t c1 = std::min(chunks, (g + 1) * group_chunks);
      for (int64_t c = g * group_chunks; c < c1; ++c) {
        BV parts[W::kParts];
        W::decode(wb + c * kChunkBytes, parts);
        for (int p = 0; p < W::kParts; ++p) s = dot(s, ones, parts[p]);
      }
      s.store(sums + (b * groups + g) * 16);
    }
  }
}

// acc[m][b] += the dot products of chunks [c0, c1) of x row m and block b.
template <int MX, int NB, class W>
inline void chunkRange(const int8_t* w, int64_t chunks, int64_t c0, int64_t c1, const uint8_t* xu, int64_t xu_stride,
                       IV (&acc)[MX][NB]) {
#if defined(PT2Q_VNNI)
  if constexpr (MX == 4 && NB == 4) {
    chunkRangeVnni4x4<W>(w, chunks, c0, c1, xu, xu_stride, acc);
    return;
  }
#endif
  for (int64_t c = c0; c < c1; ++c) {
    BV wv[NB][W::kParts];
    for (int b = 0; b < NB; ++b) W::decode(w + (b * chunks + c) * kChunkBytes, wv[b]);
    for (int m = 0; m < MX; ++m) {
      for (int p = 0; p < W::kParts; ++p) {
        const BV xv = broadcastX(xu + m * xu_stride + c * W::kChunkK + p * kRowBytes);
        for (int b = 0; b < NB; ++b) {
          if constexpr (W::kNarrow) {
            acc[m][b] = dotNarrow(acc[m][b], xv, wv[b][p]);
          } else {
            dotInto(acc[m][b], xv, wv[b][p]);
          }
        }
      }
    }
  }
}

// MX x-rows against NB consecutive blocks: out[m * out_stride + b * 4 + r] =
//   sum_g s[b][g][r] * (sum_{k in g} xu[m][k] w[b*4+r][k] - zx[m] sum_{k in g} w[b*4+r][k]).
template <int MX, int NB, class W>
void dotTile(const int8_t* w, int64_t chunks, int64_t group_chunks, const uint8_t* xu, int64_t xu_stride,
             const int32_t* zx, const float* scales4, const int32_t* sums, float* out, int64_t out_stride) {
  const int64_t groups = (chunks + group_chunks - 1) / group_chunks;
  FV tot[MX][NB];
  for (auto& row : tot) for (auto& t : row) t = fzero();
  for (int64_t g = 0; g < groups; ++g) {
    IV acc[MX][NB];
    for (auto& row : acc) for (auto& a : row) a = IV::zero();
    chunkRange<MX, NB, W>(w, chunks, g * group_chunks, std::min(chunks, (g + 1) * group_chunks), xu, xu_stride,
                          acc);
    for (int b = 0; b < NB; ++b) {
      const IV s = IV::load(sums + (b * groups + g) * 16);
      const float* sc = scales4 + (b * groups + g) * 4;
      for (int m = 0; m < MX; ++m) tot[m][b] = fmaRows(subMul(acc[m][b], s, zx[m]), sc, tot[m][b]);
    }
  }
  for (int m = 0; m < MX; ++m) {
    for (int b = 0; b < NB; ++b) rowSums(tot[m][b], out + m * out_stride + b * kRows);
  }
}

constexpr int kTileRows = 4;  // x rows per tile
// Weight blocks per tile. AVX2 has 16 vector registers and an accumulator takes two, so 4 x 4
// tiles spill: linear_q8 4096 x 4096 on the Zen 5 VM under PT2Q_CPU_ISA=avx2, 4 rows x 2 blocks
// ran 1.06x 4 x 4 and 1.03-1.04x 4 x 1 at 64 and 256 rows; a lone row took 1.28x as long with 2
// blocks as with 1.
template <int MX>
constexpr int tileBlocks() {
#if defined(PT2Q_VEC_AVX2)
  return MX == kTileRows ? 2 : 1;
#else
  return 4;
#endif
}

template <int MX, class W>
void dotRowTile(const int8_t* w, int64_t blocks, int64_t chunks, int64_t group_chunks, const uint8_t* xu,
                int64_t xu_stride, const int32_t* zx, const float* scales4, const int32_t* sums, float* out,
                int64_t out_stride) {
  const int64_t groups = (chunks + group_chunks - 1) / group_chunks;
  int64_t b = 0;
  constexpr int kTileBlocks = tileBlocks<MX>();
  for (; b + kTileBlocks <= blocks; b += kTileBlocks) {
    dotTile<MX, kTileBlocks, W>(w + b * chunks * kChunkBytes, chunks, group_chunks, xu, xu_stride, zx,
                                scales4 + b * groups * 4, sums + b * groups * 16, out + b * kRows, out_stride);
  }
  for (; b < blocks; ++b) {
    dotTile<MX, 1, W>(w + b * chunks * kChunkBytes, chunks, group_chunks, xu, xu_stride, zx,
                      scales4 + b * groups * 4, sums + b * groups * 16, out + b * kRows, out_stride);
  }
}

// The last rows % kTileRows rows: one tile of exactly that many.
template <int MX, class W>
void dotRest(int64_t rows, const int8_t* w, int64_t blocks, int64_t chunks, int64_t group_chunks, const uint8_t* xu,
             int64_t xu_stride, const int32_t* zx, const float* scales4, const int32_t* sums, float* out,
             int64_t out_stride) {
  if constexpr (MX > 0) {
    if (rows == MX) {
      dotRowTile<MX, W>(w, blocks, chunks, group_chunks, xu, xu_stride, zx, scales4, sums, out, out_stride);
    } else {
      dotRest<MX - 1, W>(rows, w, blocks, chunks, group_chunks, xu, xu_stride, zx, scales4, sums, out, out_stride);
    }
  }
}

// Every x row against `blocks` blocks, x tiles outermost so a tile's rows stay in L1 while the
// blocks (a panel sized by the caller to stay in L2) stream past.
template <class W>
void dotPanel(const int8_t* w, int64_t blocks, int64_t chunks, int64_t group_chunks, const uint8_t* xu,
              int64_t xu_stride, int64_t rows, const int32_t* zx, const float* scales4, const int32_t* sums,
              float* out, int64_t out_stride) {
  int64_t m = 0;
  for (; m + kTileRows <= rows; m += kTileRows) {
    dotRowTile<kTileRows, W>(w, blocks, chunks, group_chunks, xu + m * xu_stride, xu_stride, zx + m, scales4, sums,
                             out + m * out_stride, out_stride);
  }
  dotRest<kTileRows - 1, W>(rows - m, w, blocks, chunks, group_chunks, xu + m * xu_stride, xu_stride, zx + m,
                            scales4, sums, out + m * out_stride, out_stride);
}

// ---- per-token asymmetric int8 quantization of fp32 rows ----------------------------------------
// quantized_decomposed.choose_qparams_per_token_asymmetric (XNNPACK's rule, in fp32) and
// quantize_per_token (x * (1 / scale) + zero_point in fp64, rounded half to even, clamped), the
// codes stored as xu = q + 128. Returns the first row holding NaN or Inf, or -1.
inline bool rowMinMax(const float* x, int64_t k, float& lo, float& hi) {
  int64_t i = 0;
  float mn = x[0], mx = x[0], bad = 0.0f;
#if defined(PT2Q_VEC_AVX512)
  if (k >= 16) {
    __m512 vmn = _mm512_loadu_ps(x), vmx = vmn, vbad = _mm512_setzero_ps();
    for (; i + 16 <= k; i += 16) {
      const __m512 v = _mm512_loadu_ps(x + i);
      vmn = _mm512_min_ps(vmn, v);
      vmx = _mm512_max_ps(vmx, v);
      vbad = _mm512_add_ps(vbad, _mm512_mul_ps(v, _mm512_setzero_ps()));  // NaN once any NaN or Inf
    }
    mn = _mm512_reduce_min_ps(vmn);
    mx = _mm512_reduce_max_ps(vmx);
    bad = _mm512_reduce_add_ps(vbad);
  }
#endif
  for (; i < k; ++i) {
    mn = std::min(mn, x[i]);
    mx = std::max(mx, x[i]);
    bad += x[i] * 0.0f;
  }
  lo = mn;
  hi = mx;
  return bad == 0.0f;
}

inline int64_t quantizeRowsI8(const float* x, int64_t rows, int64_t k, int64_t x_stride, uint8_t* xu,
                              int64_t xu_stride, double* scales, int32_t* zero_points) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * x_stride;
    float lo = 0.0f, hi = 0.0f;
    if (!rowMinMax(xr, k, lo, hi)) return r;
    const float mn = std::min(lo, 0.0f), mx = std::max(hi, 0.0f);
    float scale = (mx - mn) / 255.0f;
    scale = std::max(scale, 1.1920928955078125e-07f);  // torch.finfo(torch.float32).eps
    const float dmin = mn / scale, dmax = mx / scale;
    const float zf = (-128.0f + dmin) + (127.0f + dmax) > 0.0f ? -128.0f - dmin : 127.0f - dmax;
    const float z = std::nearbyint(std::min(std::max(zf, -128.0f), 127.0f));
    const double inv = 1.0 / static_cast<double>(scale), zd = static_cast<double>(z);
    scales[r] = static_cast<double>(scale);
    zero_points[r] = static_cast<int32_t>(z);
    uint8_t* o = xu + r * xu_stride;
    int64_t i = 0;
#if defined(PT2Q_VEC_AVX512)
    const __m512d vinv = _mm512_set1_pd(inv), vz = _mm512_set1_pd(zd);
    const __m512d qmin = _mm512_set1_pd(-128.0), qmax = _mm512_set1_pd(127.0);
    for (; i + 8 <= k; i += 8) {
      const __m512d v = _mm512_cvtps_pd(_mm256_loadu_ps(xr + i));
      __m512d q = _mm512_roundscale_pd(_mm512_add_pd(_mm512_mul_pd(v, vinv), vz),
                                       _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      q = _mm512_min_pd(_mm512_max_pd(q, qmin), qmax);
      const __m256i qi = _mm256_add_epi32(_mm512_cvtpd_epi32(q), _mm256_set1_epi32(128));
      _mm_storel_epi64(reinterpret_cast<__m128i*>(o + i), _mm256_cvtepi32_epi8(qi));
    }
#endif
    for (; i < k; ++i) {
      const double q = std::nearbyint(static_cast<double>(xr[i]) * inv + zd);
      o[i] = static_cast<uint8_t>(static_cast<int32_t>(std::min(std::max(q, -128.0), 127.0)) + 128);
    }
  }
  return -1;
}

}  // namespace pt2q::cpu::PT2Q_CPU_ISA_NS
