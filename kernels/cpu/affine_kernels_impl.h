// Bodies of the affine microkernels, written once against the Vec interface of
// simd/vec_*.h and compiled once per ISA. Each ISA file defines PT2Q_CPU_ISA_NS and includes
// this header at file scope; everything here lands in pt2q::cpu::<isa>, so the copies built
// with different -m flags can never be merged by the linker (the trick ATen's CPU_CAPABILITY
// namespaces use).
//
// See Note [Affine kernel semantics] in kernels/README.md. In short, per element, in fp32:
//   int / none domain:  v = round_even(x * (1/s)) [+ zp]
//   float domain:       v = round_even((x - (zp - s*mid)) / s)
//   code = clamp(v, qmin, qmax) with NaN -> qmin; dequantize inverts with the same qparams.
// The build passes -ffp-contract=off: a fused multiply-add would round differently from
// PyTorch's separate mul and add.
#pragma once

#ifndef PT2Q_CPU_ISA_NS
#error "define PT2Q_CPU_ISA_NS before including affine_kernels_impl.h"
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#if defined(PT2Q_VEC_AVX512) || defined(PT2Q_VEC_AVX2)
#include <immintrin.h>
#endif

#include "kernels/cpu/affine_microkernels.h"

namespace pt2q::cpu::PT2Q_CPU_ISA_NS {

#include "kernels/cpu/simd/float_bits.h"
#if defined(PT2Q_VEC_AVX512)
#include "kernels/cpu/simd/vec_avx512.h"
#elif defined(PT2Q_VEC_AVX2)
#include "kernels/cpu/simd/vec_avx2.h"
#else
#include "kernels/cpu/simd/vec_generic.h"
#endif

using F = Vec::F;
constexpr int kN = Vec::N;

template <FloatKind K>
struct FloatIO;
template <>
struct FloatIO<FloatKind::kF32> {
  using T = float;
  static F load(const T* p) { return Vec::load(p); }
  static void store(T* p, F v) { Vec::store(p, v); }
  static void stream(T* p, F v) { Vec::streamF32(p, v); }
  static float scalar(T v) { return v; }
  static T fromScalar(float v) { return v; }
};
template <>
struct FloatIO<FloatKind::kBF16> {
  using T = uint16_t;
  static F load(const T* p) { return Vec::loadBF16(p); }
  static void store(T* p, F v) { Vec::storeBF16(p, v); }
  static void stream(T* p, F v) { Vec::streamBF16(p, v); }
  static float scalar(T v) { return bf16ToFloat(v); }
  static T fromScalar(float v) { return floatToBF16(v); }
};
template <>
struct FloatIO<FloatKind::kF16> {
  using T = uint16_t;
  static F load(const T* p) { return Vec::loadF16(p); }
  static void store(T* p, F v) { Vec::storeF16(p, v); }
  static void stream(T* p, F v) { Vec::streamF16(p, v); }
  static float scalar(T v) { return f16ToFloat(v); }
  static T fromScalar(float v) { return floatToF16(v); }
};

// int32 codes: the clamped fp32 value may be 2^31 (fp32 has no 2^31 - 1), so convert through
// int64 and clamp again, as the reference does. Other code types are exact in fp32.
template <typename C>
void storeCodes(C* p, F v, const QuantParams& q) {
  Vec::storeCodes(p, v);
}
template <>
inline void storeCodes<int32_t>(int32_t* p, F v, const QuantParams& q) {
  alignas(64) float t[kN];
  Vec::store(t, v);
  for (int i = 0; i < kN; ++i) {
    const int64_t c = static_cast<int64_t>(t[i]);
    p[i] = static_cast<int32_t>(std::min(std::max(c, q.qmin), q.qmax));
  }
}

// Tail of forEachVector: one vector staged through zero-padded buffers.
template <typename In, typename Out, typename Body>
void forTail(const In* in, Out* out, int64_t n, int64_t i, const float* s, const float* z, int64_t qs, Body& body) {
  const int64_t r = n - i;
  if (r == 0) return;
  In in_buf[kN] = {};
  Out out_buf[kN] = {};
  float s_buf[kN], z_buf[kN];
  std::memcpy(in_buf, in + i, r * sizeof(In));
  const float* sp = s;
  const float* zp = z;
  if (qs == 1) {
    std::fill(s_buf, s_buf + kN, 1.0f);
    std::fill(z_buf, z_buf + kN, 0.0f);
    std::memcpy(s_buf, s + i, r * sizeof(float));
    if (z) std::memcpy(z_buf, z + i, r * sizeof(float));
    sp = s_buf;
    zp = z ? z_buf : nullptr;
  }
  body(in_buf, out_buf, sp, zp, -1 - i);
  std::memcpy(out + i, out_buf, r * sizeof(Out));
}

// Runs body(offset, lanes) over [0, n): full vectors in place, then one padded vector for the
// tail. body receives pointers into either the real arrays or zero-padded staging buffers.
template <typename In, typename Out, typename Body>
void forEachVector(const In* in, Out* out, int64_t n, const float* s, const float* z, int64_t qs, Body&& body) {
  int64_t i = 0;
  for (; i + kN <= n; i += kN) {
    body(in + i, out + i, s + i * qs, z ? z + i * qs : nullptr, i);
  }
  if constexpr (kN > 1) {
    forTail(in, out, n, i, s, z, qs, body);
  }
}

// Qparams of one vector: broadcast (qs == 0, hoisted by the caller) or loaded per lane.
struct Lanes {
  F s, inv, z, minv;
};

inline Lanes lanesFor(const float* s, const float* z, int64_t qs, QDomain d, F mid) {
  Lanes l;
  l.s = qs ? Vec::load(s) : Vec::set1(*s);
  l.inv = Vec::div(Vec::set1(1.0f), l.s);
  l.z = (z == nullptr) ? Vec::set1(0.0f) : (qs ? Vec::load(z) : Vec::set1(*z));
  l.minv = (d == QDomain::kFloat) ? Vec::sub(l.z, Vec::mul(l.s, mid)) : l.z;
  return l;
}

inline F unclampedCode(F x, const Lanes& l, QDomain d, bool has_zp) {
  if (d == QDomain::kFloat) return Vec::roundEven(Vec::div(Vec::sub(x, l.minv), l.s));
  F v = Vec::roundEven(Vec::mul(x, l.inv));
  return has_zp ? Vec::add(v, l.z) : v;
}

inline F dequantCode(F c, const Lanes& l, QDomain d, bool has_zp, F mid) {
  if (d == QDomain::kFloat) return Vec::add(Vec::mul(Vec::sub(c, mid), l.s), l.z);
  return has_zp ? Vec::mul(Vec::sub(c, l.z), l.s) : Vec::mul(c, l.s);
}

inline float midPoint(const QuantParams& p) {
  return static_cast<float>(static_cast<double>(p.qmin + p.qmax + 1) / 2);
}

// Whether a call writes its output with streaming stores: asked for by the caller (large
// outputs, see QuantParams::stream_stores), supported by the ISA, and the output aligned to
// one vector store, so that every full-vector store stays aligned.
template <typename Out>
bool useStream(const QuantParams& p, const void* out) {
  constexpr uintptr_t width = kN * sizeof(Out);
  return Vec::kHasStream && p.stream_stores && (reinterpret_cast<uintptr_t>(out) % width == 0);
}

// Full-vector stores: streaming or regular; the tail path (staging buffers) is always regular.
template <bool S, typename IO>
void putFloat(typename IO::T* p, F v, int64_t off) {
  if constexpr (S) {
    if (off >= 0) return IO::stream(p, v);
  }
  IO::store(p, v);
}

template <bool S, typename C>
void putCodes(C* p, F v, int64_t off, const QuantParams& q) {
  if constexpr (S && !std::is_same_v<C, int32_t>) {
    if (off >= 0) return Vec::streamCodes(p, v);
  }
  storeCodes<C>(p, v, q);
}

template <FloatKind K, typename C, bool S>
void quantizeImpl(const void* xv, void* qv, int64_t n, const float* s, const float* z, int64_t qs,
                  const QuantParams& p) {
  using IO = FloatIO<K>;
  const auto* x = static_cast<const typename IO::T*>(xv);
  auto* q = static_cast<C*>(qv);
  const F lo = Vec::set1(static_cast<float>(p.qmin)), hi = Vec::set1(static_cast<float>(p.qmax));
  const F mid = Vec::set1(midPoint(p));
  const bool has_zp = z != nullptr;
  const Lanes fixed = lanesFor(s, z, 0, p.domain, mid);
  forEachVector(x, q, n, s, z, qs, [&](const typename IO::T* xp, C* qp, const float* sp, const float* zp, int64_t off) {
    const Lanes l = qs ? lanesFor(sp, zp, 1, p.domain, mid) : fixed;
    const F v = unclampedCode(IO::load(xp), l, p.domain, has_zp);
    putCodes<S, C>(qp, Vec::clampNanLow(v, lo, hi), off, p);
  });
  if constexpr (S) Vec::fence();
}

template <FloatKind K, typename C>
void quantize(const void* xv, void* qv, int64_t n, const float* s, const float* z, int64_t qs,
              const QuantParams& p) {
  if (useStream<C>(p, qv)) return quantizeImpl<K, C, true>(xv, qv, n, s, z, qs, p);
  quantizeImpl<K, C, false>(xv, qv, n, s, z, qs, p);
}

template <typename C, FloatKind K, bool S>
void dequantizeImpl(const void* qv, void* yv, int64_t n, const float* s, const float* z, int64_t qs,
                    const QuantParams& p) {
  using IO = FloatIO<K>;
  const auto* q = static_cast<const C*>(qv);
  auto* y = static_cast<typename IO::T*>(yv);
  const F mid = Vec::set1(midPoint(p));
  const bool has_zp = z != nullptr;
  const Lanes fixed = lanesFor(s, z, 0, p.domain, mid);
  forEachVector(q, y, n, s, z, qs, [&](const C* qp, typename IO::T* yp, const float* sp, const float* zp, int64_t off) {
    const Lanes l = qs ? lanesFor(sp, zp, 1, p.domain, mid) : fixed;
    putFloat<S, IO>(yp, dequantCode(Vec::loadCodes(qp), l, p.domain, has_zp, mid), off);
  });
  if constexpr (S) Vec::fence();
}

template <typename C, FloatKind K>
void dequantize(const void* qv, void* yv, int64_t n, const float* s, const float* z, int64_t qs,
                const QuantParams& p) {
  if (useStream<typename FloatIO<K>::T>(p, yv)) return dequantizeImpl<C, K, true>(qv, yv, n, s, z, qs, p);
  dequantizeImpl<C, K, false>(qv, yv, n, s, z, qs, p);
}

// int32 codes: q - zp in double, as the reference, so codes beyond 2^24 dequantize exactly.
template <FloatKind K>
void dequantizeInt32(const void* qv, void* yv, int64_t n, const float* s, const float* z, int64_t qs,
                     const QuantParams& p) {
  using IO = FloatIO<K>;
  const auto* q = static_cast<const int32_t*>(qv);
  auto* y = static_cast<typename IO::T*>(yv);
  const float mid = midPoint(p);
  alignas(64) float out[kN];
  for (int64_t i0 = 0; i0 < n; i0 += kN) {
    const int64_t m = std::min<int64_t>(kN, n - i0);
    for (int64_t j = 0; j < m; ++j) {
      const int64_t i = i0 + j;
      const float sc = s[i * qs];
      const float zz = z ? z[i * qs] : 0.0f;
      float v;
      if (p.domain == QDomain::kFloat) {
        v = (static_cast<float>(q[i]) - mid) * sc + zz;
      } else {
        v = static_cast<float>(static_cast<double>(q[i]) - static_cast<double>(zz)) * sc;
      }
      out[j] = v;
    }
    if (m == kN) {
      IO::store(y + i0, Vec::load(out));
    } else {
      typename IO::T tmp[kN];
      std::fill(out + m, out + kN, 0.0f);
      IO::store(tmp, Vec::load(out));
      std::memcpy(y + i0, tmp, m * sizeof(typename IO::T));
    }
  }
}

// Ranges wider than 2^24 (int32 codes) with a zero point: code - zp is not exact in fp32, so
// take it in double as dequantize does. Scalar: int32 fake-quant is rare.
template <FloatKind K>
void fakeQuantizeWide(const void* xv, void* yv, uint8_t* mask, int64_t n, const float* s, const float* z,
                      int64_t qs, const QuantParams& p) {
  using IO = FloatIO<K>;
  const auto* x = static_cast<const typename IO::T*>(xv);
  auto* y = static_cast<typename IO::T*>(yv);
  const float lo = static_cast<float>(p.qmin), hi = static_cast<float>(p.qmax);
  for (int64_t i = 0; i < n; ++i) {
    const float sc = s[i * qs], zz = z[i * qs];
    const float v = std::nearbyint(IO::scalar(x[i]) * (1.0f / sc)) + zz;
    float c = (v > lo) ? v : lo;
    c = (c < hi) ? c : hi;
    // Through int64, as quantize does: fp32 holds 2^31 where the code is 2^31 - 1.
    const int64_t code = std::min(std::max(static_cast<int64_t>(c), p.qmin), p.qmax);
    y[i] = IO::fromScalar(static_cast<float>(static_cast<double>(code) - static_cast<double>(zz)) * sc);
    if (mask) mask[i] = (v >= lo && v <= hi) ? 1 : 0;
  }
}

template <FloatKind K, bool S>
void fakeQuantizeImpl(const void* xv, void* yv, uint8_t* mask, int64_t n, const float* s, const float* z,
                      int64_t qs, const QuantParams& p) {
  using IO = FloatIO<K>;
  using T = typename IO::T;
  const auto* x = static_cast<const T*>(xv);
  auto* y = static_cast<T*>(yv);
  const F lo = Vec::set1(static_cast<float>(p.qmin)), hi = Vec::set1(static_cast<float>(p.qmax));
  const F mid = Vec::set1(midPoint(p));
  const bool has_zp = z != nullptr;
  const Lanes fixed = lanesFor(s, z, 0, p.domain, mid);
  uint8_t mask_tail[kN];
  forEachVector(x, y, n, s, z, qs, [&](const T* xp, T* yp, const float* sp, const float* zp, int64_t off) {
    const Lanes l = qs ? lanesFor(sp, zp, 1, p.domain, mid) : fixed;
    const F v = unclampedCode(IO::load(xp), l, p.domain, has_zp);
    // + 0 turns a -0 code (round(-0.3)) into +0, as an integer code would be.
    const F c = Vec::add(Vec::clampNanLow(v, lo, hi), Vec::set1(0.0f));
    putFloat<S, IO>(yp, dequantCode(c, l, p.domain, has_zp, mid), off);
    if (mask == nullptr) return;
    if (off >= 0) {
      Vec::storeMask(mask + off, Vec::inRange(v, lo, hi));
    } else {  // tail: off = -1 - start
      const int64_t start = -1 - off;
      Vec::storeMask(mask_tail, Vec::inRange(v, lo, hi));
      std::memcpy(mask + start, mask_tail, n - start);
    }
  });
  if constexpr (S) Vec::fence();
}

template <FloatKind K>
void fakeQuantize(const void* xv, void* yv, uint8_t* mask, int64_t n, const float* s, const float* z, int64_t qs,
                  const QuantParams& p) {
  if (p.domain == QDomain::kInt && z != nullptr && p.qmax - p.qmin > (int64_t(1) << 24)) {
    return fakeQuantizeWide<K>(xv, yv, mask, n, s, z, qs, p);
  }
  if (useStream<typename FloatIO<K>::T>(p, yv)) return fakeQuantizeImpl<K, true>(xv, yv, mask, n, s, z, qs, p);
  fakeQuantizeImpl<K, false>(xv, yv, mask, n, s, z, qs, p);
}

template <FloatKind K>
void minmax(const void* xv, int64_t n, float* mn, float* mx, int64_t acc_stride) {
  using IO = FloatIO<K>;
  const auto* x = static_cast<const typename IO::T*>(xv);
  auto smin = [](float a, float v) { return (std::isnan(v) || v < a) ? v : a; };
  auto smax = [](float a, float v) { return (std::isnan(v) || v > a) ? v : a; };
  int64_t i = 0;
  if (acc_stride == 0) {
    F vmin = Vec::set1(std::numeric_limits<float>::infinity());
    F vmax = Vec::set1(-std::numeric_limits<float>::infinity());
    for (; i + kN <= n; i += kN) {
      const F v = IO::load(x + i);
      vmin = Vec::pmin(vmin, v);
      vmax = Vec::pmax(vmax, v);
    }
    float a = smin(*mn, Vec::reduceMin(vmin)), b = smax(*mx, Vec::reduceMax(vmax));
    for (; i < n; ++i) {
      const float v = IO::scalar(x[i]);
      a = smin(a, v);
      b = smax(b, v);
    }
    *mn = a;
    *mx = b;
    return;
  }
  for (; i + kN <= n; i += kN) {
    const F v = IO::load(x + i);
    Vec::store(mn + i, Vec::pmin(Vec::load(mn + i), v));
    Vec::store(mx + i, Vec::pmax(Vec::load(mx + i), v));
  }
  for (; i < n; ++i) {
    const float v = IO::scalar(x[i]);
    mn[i] = smin(mn[i], v);
    mx[i] = smax(mx[i], v);
  }
}

// Packing is byte shuffling; plain loops that the compiler vectorizes for each ISA's flags.
inline int64_t packInt4(const uint8_t* in, uint8_t* out, int64_t n_bytes, bool high_first, bool is_signed) {
  // A value v is in range iff (v + offset) mod 256 < 16: offset 8 maps [-8, 7] to [0, 15].
  const uint8_t offset = is_signed ? 8 : 0;
  constexpr int64_t kChunk = 256;
  for (int64_t c = 0; c < n_bytes; c += kChunk) {
    const int64_t e = std::min(n_bytes, c + kChunk);
    uint8_t bad = 0;
    for (int64_t i = c; i < e; ++i) {
      const uint8_t a = in[2 * i], b = in[2 * i + 1];
      bad |= static_cast<uint8_t>(static_cast<uint8_t>(a + offset) | static_cast<uint8_t>(b + offset));
      const uint8_t first = high_first ? static_cast<uint8_t>(a << 4) : static_cast<uint8_t>(a & 0x0f);
      const uint8_t second = high_first ? static_cast<uint8_t>(b & 0x0f) : static_cast<uint8_t>(b << 4);
      out[i] = first | second;
    }
    if (bad & 0xf0) {
      for (int64_t i = 2 * c; i < 2 * e; ++i) {
        if (static_cast<uint8_t>(in[i] + offset) > 15) return i;
      }
    }
  }
  return -1;
}

inline void unpackInt4(const uint8_t* in, uint8_t* out, int64_t n_bytes, bool high_first, bool is_signed) {
  for (int64_t i = 0; i < n_bytes; ++i) {
    const uint8_t b = in[i];
    uint8_t lo = b & 0x0f, hi = b >> 4;
    if (is_signed) {
      lo = static_cast<uint8_t>(static_cast<int8_t>(static_cast<uint8_t>(lo << 4)) >> 4);
      hi = static_cast<uint8_t>(static_cast<int8_t>(static_cast<uint8_t>(hi << 4)) >> 4);
    }
    out[2 * i] = high_first ? hi : lo;
    out[2 * i + 1] = high_first ? lo : hi;
  }
}

inline AffineKernels makeTable(Isa isa, const char* name) {
  AffineKernels t{};
  t.isa = isa;
  t.name = name;
#define PT2Q_Q(k, ki, c, ci) t.quantize[ki][ci] = &quantize<FloatKind::k, c>;
#define PT2Q_Q_ALL(k, ki) \
  PT2Q_Q(k, ki, int8_t, 0) PT2Q_Q(k, ki, uint8_t, 1) PT2Q_Q(k, ki, int16_t, 2) PT2Q_Q(k, ki, uint16_t, 3) \
  PT2Q_Q(k, ki, int32_t, 4)
  PT2Q_Q_ALL(kF32, 0)
  PT2Q_Q_ALL(kBF16, 1)
  PT2Q_Q_ALL(kF16, 2)
#undef PT2Q_Q_ALL
#undef PT2Q_Q
#define PT2Q_DQ(c, ci) \
  t.dequantize[ci][0] = &dequantize<c, FloatKind::kF32>;  \
  t.dequantize[ci][1] = &dequantize<c, FloatKind::kBF16>; \
  t.dequantize[ci][2] = &dequantize<c, FloatKind::kF16>;
  PT2Q_DQ(int8_t, 0)
  PT2Q_DQ(uint8_t, 1)
  PT2Q_DQ(int16_t, 2)
  PT2Q_DQ(uint16_t, 3)
#undef PT2Q_DQ
  t.dequantize[4][0] = &dequantizeInt32<FloatKind::kF32>;
  t.dequantize[4][1] = &dequantizeInt32<FloatKind::kBF16>;
  t.dequantize[4][2] = &dequantizeInt32<FloatKind::kF16>;
  t.fake_quantize[0] = &fakeQuantize<FloatKind::kF32>;
  t.fake_quantize[1] = &fakeQuantize<FloatKind::kBF16>;
  t.fake_quantize[2] = &fakeQuantize<FloatKind::kF16>;
  t.minmax[0] = &minmax<FloatKind::kF32>;
  t.minmax[1] = &minmax<FloatKind::kBF16>;
  t.minmax[2] = &minmax<FloatKind::kF16>;
  t.pack_int4 = &packInt4;
  t.unpack_int4 = &unpackInt4;
  return t;
}

}  // namespace pt2q::cpu::PT2Q_CPU_ISA_NS
