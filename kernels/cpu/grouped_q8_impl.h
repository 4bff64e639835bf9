// Grouped conv2d_q8 with several input channels per group (GroupedQ8, linear_microkernels.h),
// compiled inside linear_kernels_impl.h for the VNNI and AVX2 tables. Each output pixel sums its
// taps directly, as the depthwise kernel does, instead of an im2col and a GEMM per group: with
// 4-32 channels per group (ResNeXt, RegNet) those GEMMs are a few columns wide, and the per-group
// im2col, panel setup and epilogue cost more than the arithmetic (0.21-0.37x fp32 F.conv2d on
// ResNeXt's 3x3 layers on the 2-core Zen 5 VM).
//
// Lanes are output channels. `vpdpbusd` multiplies 4 input bytes by 4 weight bytes per lane, so a
// tap of a 16-channel vector is: one 64-byte load of x from the first channel of its first group,
// then per 4 channels of the group one `vpermd` that hands each lane its group's 4 bytes, and one
// `vpdpbusd` against the weights (already in lane order). Before (per output pixel): kh x kw taps
// of c bytes; after: oc codes.
#pragma once

#ifndef PT2Q_CPU_ISA_NS
#error "include grouped_q8_impl.h through linear_kernels_impl.h"
#endif

namespace pt2q::cpu::PT2Q_CPU_ISA_NS {

// The output pixels [p0, p1) in order: run(P, inside, px, tap, nt, out) with the taps inside the
// input of the pixel (px: where each tap's pixel starts in x, tap: its index); P = 2 where the
// next pixel of the row has all its taps inside too (its taps are the first's moved sw pixels),
// and then that pixel is done as well.
template <class Run>
inline void forEachGroupedPixel(const GroupedQ8& a, int64_t p0, int64_t p1, Run&& run) {
  const uint8_t* px[64];
  int64_t tap[64];
  const int64_t taps = a.kh * a.kw;
  for (int64_t p = p0; p < p1; ++p) {
    const int64_t r = p / a.ow, ow = p % a.ow;
    int nt = 0;
    forEachTap(a, r / a.oh, r % a.oh, ow, [&](int64_t at, int64_t t) {
      px[nt] = a.x + at;
      tap[nt++] = t;
    });
    int8_t* out = a.out + p * a.oc;
    // The next pixel of the row is inside too when its last column of taps is.
    if (nt == taps && p + 1 < p1 && ow + 1 < a.ow && (ow + 1) * a.sw - a.pw + (a.kw - 1) * a.dw < a.w) {
      run(std::integral_constant<int, 2>(), std::true_type(), px, tap, nt, out);
      ++p;
    } else if (nt == taps) {
      run(std::integral_constant<int, 1>(), std::true_type(), px, tap, nt, out);
    } else {
      run(std::integral_constant<int, 1>(), std::false_type(), px, tap, nt, out);
    }
  }
}

#if defined(PT2Q_VEC_AVX512) && defined(PT2Q_VNNI)
// Where the 16 output channels from 16 v read x: byte offset of their first group's channels
// within a pixel, the load mask for the bytes inside the pixel, and per 4 channels j of a group
// the dword of the load that each lane takes.
struct GroupedLanes {
  int64_t base = 0;
  __mmask64 load = 0;
  std::vector<__m512i> idx;
};

inline std::vector<GroupedLanes> groupedLanes(const GroupedQ8& a) {
  const int64_t cgq = a.cg / 4;
  std::vector<GroupedLanes> lanes((a.oc + 15) / 16);
  for (size_t v = 0; v < lanes.size(); ++v) {
    const int64_t o0 = 16 * static_cast<int64_t>(v), first = o0 / a.ocg;
    GroupedLanes& l = lanes[v];
    l.base = first * a.cg;
    const int64_t valid = std::min<int64_t>(64, a.c - l.base);
    l.load = valid >= 64 ? ~__mmask64{0} : (__mmask64{1} << valid) - 1;
    for (int64_t j = 0; j < cgq; ++j) {
      alignas(64) int32_t idx[16];
      for (int64_t i = 0; i < 16; ++i) {
        const int64_t o = std::min(o0 + i, a.oc - 1);  // lanes past oc: any dword (their weights are 0)
        idx[i] = static_cast<int32_t>((o / a.ocg - first) * cgq + j);
      }
      l.idx.push_back(_mm512_load_si512(idx));
    }
  }
  return lanes;
}

// VN vectors (16 VN channels from 16 v0) of P neighbouring output pixels of a row, their sums in
// registers across the taps (VN and P constants, so the accumulators are not an array in memory).
// kInside: every tap is inside the input, so the taps' weight sums come off once, as their total
// (the per-tap subtraction was 1 load and 1 subtraction per tap of each vector).
// P = 2 (inside only; pixel p's taps are the first's moved p sw pixels): each weight vector, loaded
// once, serves both. With 16-32 channels a group a layer's weight (295 KB at 1024 channels)
// outgrows the L1 and every pixel streamed it from the L2; with 4 a group it halves the weight
// loads. 1.04-1.10x on ResNeXt's layers (Zen 5 VM, 2 threads).
template <int VN, int P, bool kInside>
inline void groupedPixels(const GroupedQ8& a, const GroupedLanes* lanes, int64_t v0, int64_t cgq, int64_t ocp,
                          const uint8_t* const* px, const int64_t* tap, int nt, const Q8EpilogueAvx512& e,
                          int8_t* out) {
  static_assert(P == 1 || kInside, "pixels share their taps only when all are inside");
  const int64_t step = a.sw * a.c;
  __m512i acc[P][VN];
  for (auto& row : acc) {
    for (auto& v : row) v = _mm512_setzero_si512();
  }
  for (int t = 0; t < nt; ++t) {
    const int8_t* wt = a.wq + tap[t] * cgq * ocp * 4 + v0 * 64;
    __m512i x[P][VN];
    for (int p = 0; p < P; ++p) {
      for (int u = 0; u < VN; ++u) {
        x[p][u] = _mm512_maskz_loadu_epi8(lanes[v0 + u].load, px[t] + p * step + lanes[v0 + u].base);
      }
    }
    for (int64_t j = 0; j < cgq; ++j) {
      for (int u = 0; u < VN; ++u) {
        const __m512i w = _mm512_loadu_si512(wt + j * ocp * 4 + u * 64), idx = lanes[v0 + u].idx[j];
        for (int p = 0; p < P; ++p) acc[p][u] = _mm512_dpbusd_epi32(acc[p][u], _mm512_permutexvar_epi32(idx, x[p][u]), w);
      }
    }
    if (!kInside) {
      const int32_t* ws = a.wsum + tap[t] * ocp + v0 * 16;
      for (int u = 0; u < VN; ++u) acc[0][u] = _mm512_sub_epi32(acc[0][u], _mm512_loadu_si512(ws + u * 16));
    }
  }
  const int32_t* total = a.wsum + a.kh * a.kw * ocp + v0 * 16;  // the row after the taps': their total
  for (int u = 0; u < VN; ++u) {
    const int64_t o = (v0 + u) * 16;
    const __m512i sub = kInside ? _mm512_loadu_si512(total + u * 16) : _mm512_setzero_si512();
    for (int p = 0; p < P; ++p) {
      e.store(_mm512_sub_epi32(acc[p][u], sub), laneMask(a.oc - o), a.scales + o, a.bias + o, out + p * a.oc + o);
    }
  }
}

// Every vector of P pixels: 4 at a time for one pixel, 2 for two (the registers of 8 sums).
template <int P, bool kInside>
inline void groupedVectors(const GroupedQ8& a, const GroupedLanes* lanes, int64_t nv, int64_t cgq,
                           const uint8_t* const* px, const int64_t* tap, int nt, const Q8EpilogueAvx512& e,
                           int8_t* out) {
  constexpr int kVN = P == 1 ? 4 : 2;
  const int64_t ocp = nv * 16;
  int64_t v0 = 0;
  for (; v0 + kVN <= nv; v0 += kVN) groupedPixels<kVN, P, kInside>(a, lanes, v0, cgq, ocp, px, tap, nt, e, out);
  if constexpr (kVN == 4) {
    if (nv - v0 == 3) return groupedPixels<3, P, kInside>(a, lanes, v0, cgq, ocp, px, tap, nt, e, out);
    if (nv - v0 == 2) return groupedPixels<2, P, kInside>(a, lanes, v0, cgq, ocp, px, tap, nt, e, out);
  }
  if (nv - v0 == 1) groupedPixels<1, P, kInside>(a, lanes, v0, cgq, ocp, px, tap, nt, e, out);
}

inline void groupedQ8Pixels(const GroupedQ8& a, int64_t p0, int64_t p1) {
  const std::vector<GroupedLanes> lanes = groupedLanes(a);
  const int64_t cgq = a.cg / 4, nv = static_cast<int64_t>(lanes.size());
  const Q8EpilogueAvx512 e(a.epilogue);
  forEachGroupedPixel(a, p0, p1, [&](auto P, auto inside, const uint8_t* const* px, const int64_t* tap, int nt,
                                     int8_t* out) {
    groupedVectors<decltype(P)::value, decltype(inside)::value>(a, lanes.data(), nv, cgq, px, tap, nt, e, out);
  });
}

constexpr GroupedQ8Fn kGroupedQ8 = &groupedQ8Pixels;
constexpr GroupedQ8TakesFn kGroupedQ8Takes = &groupedLanes16Fit;
#elif defined(PT2Q_VEC_AVX2)
// Without VNNI the products go through vpmaddwd, exact on codes widened to int16: a lane's 4
// bytes of x (unsigned, 0..255) and of w (signed) as 4 int16 each, two lanes' pair sums per
// 128 bits. Vectors are 8 output channels in two halves of 4 lanes; per 4 channels j of a group,
// the half's lanes sum into 8 int32 (2 per lane), folded into lane order once per pixel. A layer
// whose groups hold a multiple of 8 output channels ("single": a vector's lanes share one group,
// any cg) takes each j's 4 bytes by one broadcast; otherwise the groups under a vector must fit
// one 32-byte load, from which a vpermd hands each lane its group's 4 bytes.
struct GroupedLanes8 {
  int64_t base = 0;          // byte offset of the vector's first group within a pixel
  __m256i load{};            // dwords of the 32-byte load inside the pixel (not single)
  std::vector<__m256i> idx;  // per j, the load's dword each lane takes (not single)
};

inline bool groupedSingle(int64_t ocg) { return ocg % 8 == 0; }

// The int32 sums stay exact while |sum (u - z) w| <= 255 * 128 * cg * taps < 2^31; the
// single-group kind takes any cg, so longer rows are left to the GEMMs.
inline bool groupedQ8TakesAvx2(int64_t cg, int64_t ocg, int64_t oc, int64_t taps) {
  if (cg <= 0 || cg % 4 != 0 || ocg <= 0 || taps > 64 || cg * taps > 65536) return false;
  return groupedSingle(ocg) || groupedWindowsFit(cg, ocg, oc, 8, 32);
}

inline std::vector<GroupedLanes8> groupedLanes8(const GroupedQ8& a) {
  const int64_t cgq = a.cg / 4;
  std::vector<GroupedLanes8> lanes((a.oc + 7) / 8);
  for (size_t v = 0; v < lanes.size(); ++v) {
    const int64_t o0 = 8 * static_cast<int64_t>(v), first = o0 / a.ocg;
    GroupedLanes8& l = lanes[v];
    l.base = first * a.cg;
    if (groupedSingle(a.ocg)) continue;
    const int64_t dwords = std::min<int64_t>(8, (a.c - l.base) / 4);
    alignas(32) int32_t m[8], idx[8];
    for (int64_t i = 0; i < 8; ++i) m[i] = i < dwords ? -1 : 0;
    l.load = _mm256_load_si256(reinterpret_cast<const __m256i*>(m));
    for (int64_t j = 0; j < cgq; ++j) {
      for (int64_t i = 0; i < 8; ++i) {
        const int64_t o = std::min(o0 + i, a.oc - 1);  // lanes past oc: any dword (their weights are 0)
        idx[i] = static_cast<int32_t>((o / a.ocg - first) * cgq + j);
      }
      l.idx.push_back(_mm256_load_si256(reinterpret_cast<const __m256i*>(idx)));
    }
  }
  return lanes;
}

// VN vectors from v0 of P neighbouring output pixels of a row (P = 2: inside only, each weight
// load serving both, as groupedPixels). lo / hi: lanes 0-3 / 4-7 as (lane, pair) int32.
template <int VN, int P, bool kSingle, bool kInside>
inline void groupedPixels8(const GroupedQ8& a, const GroupedLanes8* lanes, int64_t v0, int64_t cgq, int64_t ocp,
                           const uint8_t* const* px, const int64_t* tap, int nt, const Q8EpilogueAvx2& e,
                           int8_t* out) {
  static_assert(P == 1 || kInside, "pixels share their taps only when all are inside");
  const int64_t step = a.sw * a.c;
  __m256i lo[P][VN], hi[P][VN];
  for (int q = 0; q < P; ++q) {
    for (int u = 0; u < VN; ++u) lo[q][u] = hi[q][u] = _mm256_setzero_si256();
  }
  for (int t = 0; t < nt; ++t) {
    const int8_t* wt = a.wq + (tap[t] * cgq * ocp + v0 * 8) * 4;
    for (int u = 0; u < VN; ++u) {
      const uint8_t* p = px[t] + lanes[v0 + u].base;
      __m256i window[P];
      for (int q = 0; q < P; ++q) {
        window[q] = kSingle ? _mm256_setzero_si256()
                            : _mm256_maskload_epi32(reinterpret_cast<const int*>(p + q * step), lanes[v0 + u].load);
      }
      for (int64_t j = 0; j < cgq; ++j) {
        const int8_t* w = wt + (j * ocp + u * 8) * 4;
        const __m256i wa = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w)));
        const __m256i wb = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 16)));
        for (int q = 0; q < P; ++q) {
          __m256i xa, xb;
          if constexpr (kSingle) {
            int32_t d;
            std::memcpy(&d, p + q * step + 4 * j, 4);
            xa = xb = _mm256_cvtepu8_epi16(_mm_set1_epi32(d));
          } else {
            const __m256i d = _mm256_permutevar8x32_epi32(window[q], lanes[v0 + u].idx[static_cast<size_t>(j)]);
            xa = _mm256_cvtepu8_epi16(_mm256_castsi256_si128(d));
            xb = _mm256_cvtepu8_epi16(_mm256_extracti128_si256(d, 1));
          }
          lo[q][u] = _mm256_add_epi32(lo[q][u], _mm256_madd_epi16(xa, wa));
          hi[q][u] = _mm256_add_epi32(hi[q][u], _mm256_madd_epi16(xb, wb));
        }
      }
    }
  }
  for (int u = 0; u < VN; ++u) {
    const int64_t o = (v0 + u) * 8;
    __m256i sub = _mm256_setzero_si256();
    if (kInside) {
      sub = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.wsum + a.kh * a.kw * ocp + o));
    } else {
      for (int t = 0; t < nt; ++t) {
        sub = _mm256_add_epi32(sub, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.wsum + tap[t] * ocp + o)));
      }
    }
    for (int q = 0; q < P; ++q) {
      // [l0 l1 l4 l5 | l2 l3 l6 l7] -> lane order
      const __m256i acc = _mm256_sub_epi32(_mm256_permute4x64_epi64(_mm256_hadd_epi32(lo[q][u], hi[q][u]), 0xD8), sub);
      int8_t* dst = out + q * a.oc;
      if (o + 8 <= a.oc) {
        e.store(acc, a.scales + o, a.bias + o, dst + o);
      } else {  // the last, partial vector (scales and bias are padded to ocp)
        int8_t tail[8];
        e.store(acc, a.scales + o, a.bias + o, tail);
        std::memcpy(dst + o, tail, static_cast<size_t>(a.oc - o));
      }
    }
  }
}

// Every vector of P pixels: 4 at a time for one pixel of the single-group kind, else 2 (the
// permuted kind holds a load per vector and pixel too).
template <int P, bool kSingle, bool kInside>
inline void groupedVectors8(const GroupedQ8& a, const GroupedLanes8* lanes, int64_t nv, int64_t cgq, int64_t ocp,
                            const uint8_t* const* px, const int64_t* tap, int nt, const Q8EpilogueAvx2& e,
                            int8_t* out) {
  constexpr int kVN = P == 1 && kSingle ? 4 : 2;
  int64_t v0 = 0;
  for (; v0 + kVN <= nv; v0 += kVN) {
    groupedPixels8<kVN, P, kSingle, kInside>(a, lanes, v0, cgq, ocp, px, tap, nt, e, out);
  }
  for (; v0 < nv; ++v0) groupedPixels8<1, P, kSingle, kInside>(a, lanes, v0, cgq, ocp, px, tap, nt, e, out);
}

template <bool kSingle>
inline void groupedRowPixels8(const GroupedQ8& a, const GroupedLanes8* lanes, int64_t nv, int64_t p0, int64_t p1) {
  const int64_t cgq = a.cg / 4, ocp = (a.oc + 15) / 16 * 16;  // ocp: the weight's rows, oc rounded up to 16
  const Q8EpilogueAvx2 e(a.epilogue);
  forEachGroupedPixel(a, p0, p1, [&](auto P, auto inside, const uint8_t* const* px, const int64_t* tap, int nt,
                                     int8_t* out) {
    groupedVectors8<decltype(P)::value, kSingle, decltype(inside)::value>(a, lanes, nv, cgq, ocp, px, tap, nt, e, out);
  });
}

inline void groupedQ8PixelsAvx2(const GroupedQ8& a, int64_t p0, int64_t p1) {
  const std::vector<GroupedLanes8> lanes = groupedLanes8(a);
  const auto nv = static_cast<int64_t>(lanes.size());
  if (groupedSingle(a.ocg)) {
    groupedRowPixels8<true>(a, lanes.data(), nv, p0, p1);
  } else {
    groupedRowPixels8<false>(a, lanes.data(), nv, p0, p1);
  }
}

constexpr GroupedQ8Fn kGroupedQ8 = &groupedQ8PixelsAvx2;
constexpr GroupedQ8TakesFn kGroupedQ8Takes = &groupedQ8TakesAvx2;
#else
constexpr GroupedQ8Fn kGroupedQ8 = nullptr;
constexpr GroupedQ8TakesFn kGroupedQ8Takes = nullptr;
#endif

}  // namespace pt2q::cpu::PT2Q_CPU_ISA_NS
