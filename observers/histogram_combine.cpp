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
  if (total < std::ldexp(1.0, std::min(g + 24, 127))) {
    acc = static_cast<float>(total);
    return;
  }
  for (int64_t i = 0; i < k; ++i) acc += w;
}

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
  const int64_t n_edges = bins + 1;
  // Sorted edges (always, in practice) let a moving cursor replace the binary search; both give
  // the index of the first edge above the value.
  const bool sorted = std::is_sorted(edges, edges + n_edges);
  int64_t cursor = 0;
  auto bucket = [&](float v) {
    int64_t pos;
    if (sorted) {
      while (cursor < n_edges && !(edges[cursor] > v)) ++cursor;
      while (cursor > 0 && edges[cursor - 1] > v) --cursor;
      pos = cursor;
    } else {
      int64_t b = 0, e = n_edges;
      while (b < e) {
        const int64_t m = b + ((e - b) >> 1);
        if (!(edges[m] > v)) b = m + 1; else e = m;
      }
      pos = b;
    }
    return std::min(std::max(pos - 1, int64_t{0}), bins - 1);
  };
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t b = 0; b < bins; ++b) {
    const float w = src[b] / static_cast<float>(rate);
    const float* m = mids + b * rate;
    // Adding zero changes no sum: they start at +0 and never become -0.
    if (w == 0.0f) continue;
    // The target range is at least as wide as the source, so a bin's points land in at most two
    // neighbouring targets; then the adds into each are one run of equal weights.
    if (sorted && w > 0.0f && w < inf) {
      const int64_t p = bucket(m[0] + half_part);
      if (p + 2 <= bins) {
        const float e0 = edges[p], e1 = edges[p + 1], e2 = edges[p + 2];
        int64_t k0 = 0, k1 = 0;
        for (int64_t i = 0; i < rate; ++i) {
          const float v = m[i] + half_part;
          k0 += (v >= e0) & (v < e1);
          k1 += (v >= e1) & (v < e2);
        }
        if (k0 + k1 == rate && moved[p] >= 0.0f && moved[p] < inf && moved[p + 1] >= 0.0f && moved[p + 1] < inf) {
          addRun(moved[p], w, k0);
          addRun(moved[p + 1], w, k1);
          continue;
        }
      }
    }
    for (int64_t i = 0; i < rate; ++i) moved[bucket(m[i] + half_part)] += w;
  }
}

}  // namespace pt2q
