// The carry of a running histogram into a wider range. torch.ao does it with two linspaces,
// bucketize and bincount over 16 points per source bin (32768 for 2048 bins); through ATen that
// took 200 us a call on a Zen 3 core, about what counting a 128x768 activation costs, and every
// batch that widens the range pays it. The loops here give the same fp32 values.
#include "observers/histogram_combine.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define PT2Q_COMBINE_AVX2 1
#endif

namespace pt2q {
namespace {

// ATen's linspace_kernel: start and end converted to fp32, step = (end - start) / (steps - 1) in
// fp32, the first half of the points counted up from start and the second half down from end.
struct LinspaceParams {
  float start, end, step;
  int64_t steps, halfway;
};

LinspaceParams linspaceParams(double start, double end, int64_t steps) {
  LinspaceParams p;
  p.start = static_cast<float>(start);
  p.end = static_cast<float>(end);
  p.step = (p.end - p.start) / static_cast<float>(steps - 1);
  p.steps = steps;
  p.halfway = steps / 2;
  return p;
}

void fillPlain(const LinspaceParams& p, float* out) {
  for (int64_t i = 0; i < p.steps; ++i) {
    out[i] = i < p.halfway ? p.start + p.step * static_cast<float>(i)
                           : p.end - p.step * static_cast<float>(p.steps - i - 1);
  }
}

void fillFusedScalar(const LinspaceParams& p, int64_t from, float* out) {
  for (int64_t i = from; i < p.steps; ++i) {
    out[i] = i < p.halfway ? std::fma(p.step, static_cast<float>(i), p.start)
                           : std::fma(-p.step, static_cast<float>(p.steps - i - 1), p.end);
  }
}

#ifdef PT2Q_COMBINE_AVX2
__attribute__((target("avx2,fma"))) void fillFusedAvx2(const LinspaceParams& p, float* out) {
  const __m256 vstart = _mm256_set1_ps(p.start), vend = _mm256_set1_ps(p.end), vstep = _mm256_set1_ps(p.step);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i vhalf = _mm256_set1_epi32(static_cast<int>(p.halfway));
  const __m256i vlast = _mm256_set1_epi32(static_cast<int>(p.steps - 1));
  int64_t i = 0;
  for (; i + 8 <= p.steps; i += 8) {
    const __m256i idx = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(i)), lane);
    const __m256 up = _mm256_fmadd_ps(vstep, _mm256_cvtepi32_ps(idx), vstart);
    const __m256 down = _mm256_fnmadd_ps(vstep, _mm256_cvtepi32_ps(_mm256_sub_epi32(vlast, idx)), vend);
    const __m256 first_half = _mm256_castsi256_ps(_mm256_cmpgt_epi32(vhalf, idx));
    _mm256_storeu_ps(out + i, _mm256_blendv_ps(down, up, first_half));
  }
  fillFusedScalar(p, i, out);
}

const bool kHaveFma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
const bool kHaveAvx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt");

__attribute__((target("avx2"))) inline int inRange8(__m256 v, __m256 lo, __m256 hi) {
  return _mm256_movemask_ps(_mm256_and_ps(_mm256_cmp_ps(v, lo, _CMP_GE_OQ), _mm256_cmp_ps(v, hi, _CMP_LT_OQ)));
}

// How many of the 16 points m[i] + half lie in [e0, e1) and how many in [e1, e2).
__attribute__((target("avx2,popcnt"))) inline void countRuns16(const float* m, float half, float e0, float e1, float e2,
                                                        int64_t& k0, int64_t& k1) {
  const __m256 h = _mm256_set1_ps(half), v0 = _mm256_set1_ps(e0), v1 = _mm256_set1_ps(e1), v2 = _mm256_set1_ps(e2);
  const __m256 a = _mm256_add_ps(_mm256_loadu_ps(m), h), b = _mm256_add_ps(_mm256_loadu_ps(m + 8), h);
  k0 = __builtin_popcount(static_cast<unsigned>(inRange8(a, v0, v1) | (inRange8(b, v0, v1) << 8)));
  k1 = __builtin_popcount(static_cast<unsigned>(inRange8(a, v1, v2) | (inRange8(b, v1, v2) << 8)));
}
#endif

void fillFused(const LinspaceParams& p, float* out) {
#ifdef PT2Q_COMBINE_AVX2
  // int32 lanes hold the indices
  if (kHaveFma && p.steps < (int64_t{1} << 30)) {
    fillFusedAvx2(p, out);
    return;
  }
#endif
  fillFusedScalar(p, 0, out);
}

// Ranges where the two rules give different points (checked in histogram_combine_test).
LinspaceRule detectRule() {
  struct Probe {
    double start, end;
    int64_t steps;
  };
  const Probe probes[] = {{-1.2345678, 3.3333333, 32769}, {0.1, 7.77, 2049}, {-100.5, -3.25, 32769},
                          {-3.7e-3, 5.1e-2, 2049}};
  bool fused_ok = true, plain_ok = true;
  for (const Probe& pr : probes) {
    const at::Tensor ref = at::linspace(pr.start, pr.end, pr.steps, at::kFloat);
    const LinspaceParams p = linspaceParams(pr.start, pr.end, pr.steps);
    std::vector<float> fused(static_cast<size_t>(pr.steps)), plain(static_cast<size_t>(pr.steps));
    fillFused(p, fused.data());
    fillPlain(p, plain.data());
    const size_t bytes = static_cast<size_t>(pr.steps) * sizeof(float);
    fused_ok = fused_ok && std::memcmp(fused.data(), ref.data_ptr<float>(), bytes) == 0;
    plain_ok = plain_ok && std::memcmp(plain.data(), ref.data_ptr<float>(), bytes) == 0;
  }
  if (fused_ok && !plain_ok) return LinspaceRule::kFused;
  if (plain_ok && !fused_ok) return LinspaceRule::kPlain;
  return LinspaceRule::kATen;
}

// Largest e such that f is a multiple of 2^e (f finite, nonzero).
int lowBitExponent(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  const int exp = static_cast<int>((bits >> 23) & 0xFF);
  const uint32_t mant = bits & 0x7FFFFF;
  const uint32_t sig = exp == 0 ? mant : (mant | 0x800000);
  return (exp == 0 ? 1 : exp) - 150 + __builtin_ctz(sig);
}

// 2^e for -1022 <= e <= 1023, from its bits (std::ldexp is a libm call: 7 % of a carry).
inline double pow2(int e) {
  const uint64_t bits = static_cast<uint64_t>(1023 + e) << 52;
  double v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

// acc += w, k times, in fp32 (acc >= 0 and finite, w > 0 and finite). When every partial sum is
// a multiple of a common power of two 2^g below 2^(g + 24) it is exact in fp32, so the k rounded
// adds give acc + k * w exactly; otherwise they run one by one.
inline void addRun(float& acc, float w, int64_t k) {
  if (k == 0) return;
  if (k == 1) {
    acc += w;
    return;
  }
  const double total = static_cast<double>(acc) + static_cast<double>(k) * static_cast<double>(w);
  const int g = acc == 0.0f ? lowBitExponent(w) : std::min(lowBitExponent(acc), lowBitExponent(w));
  if (total < pow2(std::min(g + 24, 127))) {
    acc = static_cast<float>(total);
    return;
  }
  // A carried histogram's sums have long fractions, so the above rarely holds after a few carries.
  // While the sums stay in acc's binade [2^e, 2^(e+1)) every add rounds w to the same multiple d of
  // acc's ulp (unless w is exactly half-way between two, where the rounding depends on the
  // sum's last bit), so the k adds give acc + k * d.
  uint32_t bits;
  std::memcpy(&bits, &acc, sizeof bits);
  const int exp = static_cast<int>((bits >> 23) & 0xFF);
  if (exp != 0) {
    const double ulp = pow2(exp - 150);
    const double r = static_cast<double>(w) / ulp, whole = std::floor(r);
    if (r - whole != 0.5) {
      const double d = (r - whole < 0.5 ? whole : whole + 1.0) * ulp;
      const double sum = static_cast<double>(acc) + static_cast<double>(k) * d;
      if (sum < pow2(exp - 126)) {
        acc = static_cast<float>(sum);
        return;
      }
    }
  }
  for (int64_t i = 0; i < k; ++i) acc += w;
}

// torch.bucketize(v, edges, right=True) - 1, clamped into [0, bins): the first edge above v, by
// binary search (sorted or not, as the one-by-one path always did).
int64_t bucketOf(const float* edges, int64_t bins, float v) {
  int64_t b = 0, e = bins + 1;
  while (b < e) {
    const int64_t m = b + ((e - b) >> 1);
    if (!(edges[m] > v)) b = m + 1; else e = m;
  }
  return std::min(std::max(b - 1, int64_t{0}), bins - 1);
}

template <bool kAvx2>
__attribute__((always_inline)) inline void upsampleBins(const float* src, int64_t bins, int64_t rate, const float* mids,
                                                        float half_part, const float* edges, bool sorted,
                                                        float* moved) {
  const float inf = std::numeric_limits<float>::infinity();
  const float rate_f = static_cast<float>(rate);
  // Dividing by a power of two and multiplying by its reciprocal round the same real value.
  const bool pow2_rate = (rate & (rate - 1)) == 0;
  const float inv_rate = 1.0f / rate_f;
  int64_t cursor = 0;  // the target bin of the last source bin's first point
  for (int64_t b = 0; b < bins; ++b) {
    const float w = pow2_rate ? src[b] * inv_rate : src[b] / rate_f;
    // Adding zero changes no sum: they start at +0 and never become -0.
    if (w == 0.0f) continue;
    const float* m = mids + b * rate;
    // The target range is at least as wide as the source, so a bin's points land in at most two
    // neighbouring targets; then the adds into each are one run of equal weights.
    if (sorted && w > 0.0f && w < inf) {
      const float v0 = m[0] + half_part;
      // Consecutive source bins' first points are at most one target bin apart; anything else
      // (the first bin, a range that grew on the low side) searches.
      int64_t p = cursor + (cursor + 1 <= bins && edges[cursor + 1] <= v0 ? 1 : 0);
      if (!(p + 1 <= bins && edges[p] <= v0 && v0 < edges[p + 1])) p = bucketOf(edges, bins, v0);
      cursor = p;
      if (p + 2 <= bins) {
        const float e0 = edges[p], e1 = edges[p + 1], e2 = edges[p + 2];
        int64_t k0 = 0, k1 = 0;
#ifdef PT2Q_COMBINE_AVX2
        if constexpr (kAvx2) {
          countRuns16(m, half_part, e0, e1, e2, k0, k1);
        } else
#endif
        {
          for (int64_t i = 0; i < rate; ++i) {
            const float v = m[i] + half_part;
            k0 += (v >= e0) & (v < e1);
            k1 += (v >= e1) & (v < e2);
          }
        }
        if (k0 + k1 == rate && moved[p] >= 0.0f && moved[p] < inf && moved[p + 1] >= 0.0f && moved[p + 1] < inf) {
          addRun(moved[p], w, k0);
          addRun(moved[p + 1], w, k1);
          continue;
        }
      }
    }
    for (int64_t i = 0; i < rate; ++i) moved[bucketOf(edges, bins, m[i] + half_part)] += w;
  }
}

#ifdef PT2Q_COMBINE_AVX2
__attribute__((target("avx2,popcnt"))) void upsampleAvx2(const float* src, int64_t bins, const float* mids,
                                                         float half_part, const float* edges, bool sorted,
                                                         float* moved) {
  upsampleBins<true>(src, bins, 16, mids, half_part, edges, sorted, moved);
}
#endif

}  // namespace

LinspaceRule linspaceRule() {
  static const LinspaceRule rule = detectRule();
  return rule;
}

void linspaceLikeATen(double start, double end, int64_t steps, float* out) {
  TORCH_CHECK(steps >= 2, "linspaceLikeATen: steps must be at least 2, got ", steps);
  switch (linspaceRule()) {
    case LinspaceRule::kFused: fillFused(linspaceParams(start, end, steps), out); return;
    case LinspaceRule::kPlain: fillPlain(linspaceParams(start, end, steps), out); return;
    case LinspaceRule::kATen: {
      const at::Tensor t = at::linspace(start, end, steps, at::kFloat);
      std::memcpy(out, t.data_ptr<float>(), static_cast<size_t>(steps) * sizeof(float));
      return;
    }
  }
}

void upsampleHistogram(const float* src, int64_t bins, int64_t rate, const float* mids, float half_part,
                       const float* edges, float* moved) {
  const bool sorted = std::is_sorted(edges, edges + bins + 1);
#ifdef PT2Q_COMBINE_AVX2
  if (kHaveAvx2 && rate == 16) {
    upsampleAvx2(src, bins, mids, half_part, edges, sorted, moved);
    return;
  }
#endif
  upsampleBins<false>(src, bins, rate, mids, half_part, edges, sorted, moved);
}

}  // namespace pt2q
