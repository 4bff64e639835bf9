// Affine microkernels of every ISA this CPU runs, against a scalar reference written here from
// the formulas in kernels/README.md (fp32), and against each other (bf16 / fp16 I/O).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/affine_microkernels.h"

namespace pt2q::cpu {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
// Sizes around every vector width (8, 16) and a large odd one.
const std::vector<int64_t> kSizes = {0, 1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 1025};

float midOf(const QuantParams& p) { return static_cast<float>(static_cast<double>(p.qmin + p.qmax + 1) / 2); }

// Reference code of one element: (code as int64, unclamped value in range?).
std::pair<int64_t, bool> refCode(float x, float s, const float* z, const QuantParams& p) {
  float v;
  if (p.domain == QDomain::kFloat) {
    const float minv = *z - s * midOf(p);
    v = std::nearbyint((x - minv) / s);
  } else {
    v = std::nearbyint(x * (1.0f / s));
    if (z) v = v + *z;
  }
  const bool in = v >= static_cast<float>(p.qmin) && v <= static_cast<float>(p.qmax);
  if (std::isnan(v)) return {p.qmin, false};
  float c = std::fmax(std::fmin(v, static_cast<float>(p.qmax)), static_cast<float>(p.qmin));
  int64_t ci = static_cast<int64_t>(c);
  ci = std::min(std::max(ci, p.qmin), p.qmax);
  return {ci, in};
}

float refDequant(int64_t c, float s, const float* z, const QuantParams& p) {
  if (p.domain == QDomain::kFloat) return (static_cast<float>(c) - midOf(p)) * s + *z;
  if (z) return static_cast<float>(static_cast<double>(c) - static_cast<double>(*z)) * s;
  return static_cast<float>(c) * s;
}

struct Case {
  std::vector<float> x, s, z;
  bool per_element;
  bool has_zp;
};

// Random data with adversarial values spliced in: exact ties, saturating values, NaN/Inf.
Case makeCase(int64_t n, bool per_element, bool has_zp, std::mt19937& rng, const QuantParams& p) {
  Case c;
  c.per_element = per_element;
  c.has_zp = has_zp;
  const int64_t nq = per_element ? std::max<int64_t>(n, 1) : 1;
  std::uniform_real_distribution<float> us(0.01f, 0.5f);
  std::uniform_int_distribution<int64_t> uz(p.qmin, p.qmax);
  for (int64_t i = 0; i < nq; ++i) {
    c.s.push_back(us(rng));
    c.z.push_back(p.domain == QDomain::kFloat ? us(rng) - 0.25f : static_cast<float>(uz(rng)));
  }
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int64_t i = 0; i < n; ++i) {
    const float s = c.s[per_element ? i : 0];
    float v = nd(rng) * s * static_cast<float>(p.qmax - p.qmin) / 4;
    switch (i % 11) {
      case 3: v = (std::floor(v / s) + 0.5f) * s; break;  // tie when (k + 0.5) * s / s is exact
      case 5: v = 1e30f; break;
      case 6: v = -1e30f; break;
      case 7: if (i % 3 == 0) v = kNaN; break;
      case 8: v = (i % 2) ? kInf : -kInf; break;
      default: break;
    }
    c.x.push_back(v);
  }
  return c;
}

std::string label(const AffineKernels& k, int64_t n, bool pe, bool zp, QDomain d) {
  return std::string(k.name) + " n=" + std::to_string(n) + (pe ? " per-element" : " per-run") +
         (zp ? " zp" : " no-zp") + " domain=" + std::to_string(static_cast<int>(d));
}

// A 64-byte aligned view of n elements inside `storage` (streaming stores need alignment).
template <typename T>
T* aligned(std::vector<T>& storage, int64_t n) {
  storage.assign(n + 64, T{});
  auto addr = reinterpret_cast<uintptr_t>(storage.data());
  return reinterpret_cast<T*>((addr + 63) / 64 * 64);
}

template <typename C>
void checkQuantizeF32(CodeKind ck, int64_t qmin, int64_t qmax, bool stream = false) {
  std::mt19937 rng(1234);
  for (const AffineKernels* k : availableAffineKernels()) {
    for (QDomain d : {QDomain::kInt, QDomain::kNone, QDomain::kFloat}) {
      for (bool pe : {false, true}) {
        for (int64_t n : kSizes) {
          const QuantParams p{qmin, qmax, d, stream};
          const bool has_zp = d != QDomain::kNone;
          const Case c = makeCase(n, pe, has_zp, rng, p);
          std::vector<C> q_store;
          std::vector<float> y_store, fq_store;
          C* q = aligned(q_store, n);
          float* y = aligned(y_store, n);
          float* fq = aligned(fq_store, n);
          std::vector<uint8_t> mask(n, 7);
          const float* zp = has_zp ? c.z.data() : nullptr;
          k->quantize[0][static_cast<int>(ck)](c.x.data(), q, n, c.s.data(), zp, pe, p);
          k->dequantize[static_cast<int>(ck)][0](q, y, n, c.s.data(), zp, pe, p);
          k->fake_quantize[0](c.x.data(), fq, mask.data(), n, c.s.data(), zp, pe, p);
          for (int64_t i = 0; i < n; ++i) {
            const int64_t j = pe ? i : 0;
            const auto [code, in] = refCode(c.x[i], c.s[j], zp ? &c.z[j] : nullptr, p);
            ASSERT_EQ(static_cast<int64_t>(q[i]), code) << label(*k, n, pe, has_zp, d) << " i=" << i << " x=" << c.x[i];
            const float want = refDequant(code, c.s[j], zp ? &c.z[j] : nullptr, p);
            ASSERT_EQ(std::memcmp(&y[i], &want, 4), 0) << label(*k, n, pe, has_zp, d) << " i=" << i;
            ASSERT_EQ(std::memcmp(&fq[i], &want, 4), 0) << label(*k, n, pe, has_zp, d) << " fake i=" << i;
            ASSERT_EQ(mask[i], in ? 1 : 0) << label(*k, n, pe, has_zp, d) << " mask i=" << i;
          }
        }
      }
    }
  }
}

// fp32 -> codes -> fp32 for every code type, every domain, both qparam layouts.
TEST(AffineMicrokernelTest, QuantizeInt8MatchesScalarReference) { checkQuantizeF32<int8_t>(CodeKind::kI8, -128, 127); }
TEST(AffineMicrokernelTest, QuantizeInt4InInt8MatchesScalarReference) { checkQuantizeF32<int8_t>(CodeKind::kI8, -8, 7); }
TEST(AffineMicrokernelTest, QuantizeUint8MatchesScalarReference) { checkQuantizeF32<uint8_t>(CodeKind::kU8, 0, 255); }
TEST(AffineMicrokernelTest, QuantizeInt16MatchesScalarReference) { checkQuantizeF32<int16_t>(CodeKind::kI16, -32768, 32767); }
TEST(AffineMicrokernelTest, QuantizeUint16MatchesScalarReference) { checkQuantizeF32<uint16_t>(CodeKind::kU16, 0, 65535); }
TEST(AffineMicrokernelTest, QuantizeInt32MatchesScalarReference) {
  checkQuantizeF32<int32_t>(CodeKind::kI32, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max());
}

// Streaming (non-temporal) stores write the same bits as regular stores.
TEST(AffineMicrokernelTest, StreamingStoresMatchScalarReference) {
  checkQuantizeF32<int8_t>(CodeKind::kI8, -128, 127, /*stream=*/true);
  checkQuantizeF32<uint8_t>(CodeKind::kU8, 0, 255, true);
  checkQuantizeF32<int16_t>(CodeKind::kI16, -32768, 32767, true);
  checkQuantizeF32<uint16_t>(CodeKind::kU16, 0, 65535, true);
  checkQuantizeF32<int32_t>(CodeKind::kI32, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max(),
                            true);
}

// int32 codes saturate at 2^31 - 1 although fp32 rounds that bound up to 2^31.
TEST(AffineMicrokernelTest, Int32SaturatesExactlyAtTheBound) {
  for (const AffineKernels* k : availableAffineKernels()) {
    const QuantParams p{std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max(), QDomain::kNone};
    std::vector<float> x = {3e9f, -3e9f, 2147483520.0f, 1.0f};
    std::vector<int32_t> q(x.size());
    const float s = 1.0f;
    k->quantize[0][4](x.data(), q.data(), x.size(), &s, nullptr, 0, p);
    EXPECT_EQ(q[0], std::numeric_limits<int32_t>::max()) << k->name;
    EXPECT_EQ(q[1], std::numeric_limits<int32_t>::min()) << k->name;
    EXPECT_EQ(q[2], 2147483520) << k->name;
    EXPECT_EQ(q[3], 1) << k->name;
  }
}

// Halfway codes round to even (2.5 -> 2, 3.5 -> 4, -2.5 -> -2), as torch.round.
TEST(AffineMicrokernelTest, TiesRoundToEven) {
  for (const AffineKernels* k : availableAffineKernels()) {
    const QuantParams p{-128, 127, QDomain::kNone};
    std::vector<float> x = {0.5f, 1.5f, 2.5f, 3.5f, -0.5f, -1.5f, -2.5f, 126.5f, 127.5f};
    std::vector<int8_t> q(x.size());
    const float s = 1.0f;
    k->quantize[0][0](x.data(), q.data(), x.size(), &s, nullptr, 0, p);
    const std::vector<int8_t> want = {0, 2, 2, 4, 0, -2, -2, 126, 127};
    EXPECT_EQ(q, want) << k->name;
  }
}

// NaN quantizes to qmin; +Inf / -Inf saturate to qmax / qmin; the mask is 0 for all three.
TEST(AffineMicrokernelTest, NanAndInfHaveDefinedCodes) {
  for (const AffineKernels* k : availableAffineKernels()) {
    const QuantParams p{-100, 100, QDomain::kInt};
    std::vector<float> x(19, 0.25f);
    x[0] = kNaN;
    x[17] = kInf;
    x[18] = -kInf;
    std::vector<int8_t> q(x.size());
    std::vector<float> fq(x.size());
    std::vector<uint8_t> m(x.size());
    const float s = 0.5f, z = 3.0f;
    k->quantize[0][0](x.data(), q.data(), x.size(), &s, &z, 0, p);
    k->fake_quantize[0](x.data(), fq.data(), m.data(), x.size(), &s, &z, 0, p);
    EXPECT_EQ(q[0], -100) << k->name;
    EXPECT_EQ(q[17], 100) << k->name;
    EXPECT_EQ(q[18], -100) << k->name;
    EXPECT_EQ(q[1], 3) << k->name;  // round(0.5) = 0 (even), + 3
    EXPECT_EQ(fq[0], (-100 - 3) * 0.5f) << k->name;
    EXPECT_EQ(m[0], 0);
    EXPECT_EQ(m[17], 0);
    EXPECT_EQ(m[1], 1);
  }
}

// Every ISA produces the same bits for bf16 and fp16 inputs and outputs as the generic table.
TEST(AffineMicrokernelTest, HalfTypesAgreeAcrossIsas) {
  const auto tables = availableAffineKernels();
  const AffineKernels& gen = *tables.front();
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> bits(0, 0xffff);
  for (int fk : {1, 2}) {
    for (int64_t n : kSizes) {
      std::vector<uint16_t> x(n);
      for (auto& v : x) v = static_cast<uint16_t>(bits(rng));
      std::vector<float> s(std::max<int64_t>(n, 1), 0.37f), z(std::max<int64_t>(n, 1), -3.0f);
      const QuantParams p{-128, 127, QDomain::kInt, /*stream_stores=*/n % 2 == 1};
      std::vector<int8_t> q0(n), q1(n);
      std::vector<uint16_t> y0(n), y1(n), f0(n), f1(n);
      std::vector<uint8_t> m0(n), m1(n);
      gen.quantize[fk][0](x.data(), q0.data(), n, s.data(), z.data(), 1, p);
      gen.dequantize[0][fk](q0.data(), y0.data(), n, s.data(), z.data(), 1, p);
      gen.fake_quantize[fk](x.data(), f0.data(), m0.data(), n, s.data(), z.data(), 0, p);
      for (const AffineKernels* k : tables) {
        k->quantize[fk][0](x.data(), q1.data(), n, s.data(), z.data(), 1, p);
        k->dequantize[0][fk](q0.data(), y1.data(), n, s.data(), z.data(), 1, p);
        k->fake_quantize[fk](x.data(), f1.data(), m1.data(), n, s.data(), z.data(), 0, p);
        EXPECT_EQ(q0, q1) << k->name << " kind " << fk << " n=" << n;
        EXPECT_EQ(y0, y1) << k->name << " kind " << fk << " n=" << n;
        EXPECT_EQ(f0, f1) << k->name << " kind " << fk << " n=" << n;
        EXPECT_EQ(m0, m1) << k->name << " kind " << fk << " n=" << n;
      }
    }
  }
}

// Min/max over a run and element-wise, with NaN propagating as torch.amin / amax.
TEST(AffineMicrokernelTest, MinMaxMatchesScalarAndPropagatesNan) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd;
  for (const AffineKernels* k : availableAffineKernels()) {
    for (int64_t n : kSizes) {
      std::vector<float> x(n);
      for (auto& v : x) v = nd(rng);
      float mn = kInf, mx = -kInf;
      k->minmax[0](x.data(), n, &mn, &mx, 0);
      float wmn = kInf, wmx = -kInf;
      for (float v : x) {
        wmn = std::min(wmn, v);
        wmx = std::max(wmx, v);
      }
      EXPECT_EQ(mn, wmn) << k->name << " n=" << n;
      EXPECT_EQ(mx, wmx) << k->name << " n=" << n;
      if (n == 0) continue;
      x[n / 2] = kNaN;
      mn = kInf;
      mx = -kInf;
      k->minmax[0](x.data(), n, &mn, &mx, 0);
      EXPECT_TRUE(std::isnan(mn) && std::isnan(mx)) << k->name << " n=" << n;
      std::vector<float> emn(n, 0.0f), emx(n, 0.0f);
      k->minmax[0](x.data(), n, emn.data(), emx.data(), 1);
      for (int64_t i = 0; i < n; ++i) {
        if (i == n / 2) {
          EXPECT_TRUE(std::isnan(emn[i]) && std::isnan(emx[i]));
        } else {
          EXPECT_EQ(emn[i], std::min(0.0f, x[i]));
          EXPECT_EQ(emx[i], std::max(0.0f, x[i]));
        }
      }
    }
  }
}

// Packing round-trips in both nibble orders, and reports the first out-of-range value.
TEST(AffineMicrokernelTest, Int4PackRoundTripsAndFindsBadValues) {
  for (const AffineKernels* k : availableAffineKernels()) {
    for (bool high_first : {false, true}) {
      for (bool is_signed : {false, true}) {
        for (int64_t nb : {1, 3, 255, 256, 257, 1000}) {
          std::vector<uint8_t> in(2 * nb), packed(nb), out(2 * nb);
          for (int64_t i = 0; i < 2 * nb; ++i) {
            const int v = static_cast<int>((i * 7 + 3) % 16) - (is_signed ? 8 : 0);
            in[i] = static_cast<uint8_t>(v);
          }
          ASSERT_EQ(k->pack_int4(in.data(), packed.data(), nb, high_first, is_signed), -1);
          const uint8_t want0 = high_first ? static_cast<uint8_t>((in[0] << 4) | (in[1] & 15))
                                           : static_cast<uint8_t>((in[0] & 15) | (in[1] << 4));
          EXPECT_EQ(packed[0], want0);
          k->unpack_int4(packed.data(), out.data(), nb, high_first, is_signed);
          EXPECT_EQ(in, out) << k->name;
          in[2 * nb - 1] = is_signed ? static_cast<uint8_t>(-9) : 16;
          EXPECT_EQ(k->pack_int4(in.data(), packed.data(), nb, high_first, is_signed), 2 * nb - 1);
        }
      }
    }
  }
}

}  // namespace
}  // namespace pt2q::cpu
