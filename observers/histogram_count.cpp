// Counting pass of HistogramObserver. torch.histc spends most of a calibration step in a generic
// N-d binning loop (about 2 GB/s on two cores); this loop bins 1-d fp32 data with the same fp32
// arithmetic, so every element lands in the bin torch.histc puts it in, and finds min/max on the
// way so that a batch inside the running range costs one pass instead of torch.ao's two.
#include "observers/histogram_count.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <limits>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define PT2Q_HISTC_AVX2 1
#endif

namespace pt2q {
namespace {

// Four interleaved sub-histograms per thread: consecutive elements that fall in the same bin
// (common in peaked activations) then do not wait on each other's increments.
constexpr int kWays = 4;

struct ThreadPart {
  std::vector<uint32_t> counts;  // kWays * (bins + 1); the extra bin takes skipped elements
  float min = std::numeric_limits<float>::infinity();
  float max = -std::numeric_limits<float>::infinity();
  bool has_nan = false;
};

void countRange(const float* x, int64_t begin, int64_t end, float lo, float hi, float nbins_f, int64_t bins,
                bool want_stats, ThreadPart& part) {
  const float width = hi - lo;
  uint32_t* h = part.counts.data();
  float mn = part.min, mx = part.max;
  bool nan = part.has_nan;
  for (int64_t i = begin; i < end; ++i) {
    const float e = x[i];
    if (want_stats) {
      mn = e < mn ? e : mn;
      mx = e > mx ? e : mx;
      nan |= e != e;
    }
    if (e >= lo && e <= hi) {
      // The same fp32 expression, in the same order, as ATen's LINEAR_INTERPOLATION binning.
      const float q = (e - lo) * nbins_f / width;
      // q is in [0, bins] unless hi - lo overflows to inf (then q may be NaN, where torch.histc's
      // cast is undefined): such elements go to bin 0 rather than out of bounds.
      const int64_t pos = q < nbins_f ? (q >= 0.0f ? static_cast<int64_t>(q) : 0) : bins - 1;
      ++h[(i & (kWays - 1)) * (bins + 1) + pos];
    }
  }
  part.min = mn;
  part.max = mx;
  part.has_nan = nan;
}

#ifdef PT2Q_HISTC_AVX2
// The same binning with the arithmetic 8 lanes wide: bins are computed for a block of elements
// into a buffer (a skipped element gets the extra bin) and counted by a scalar loop, which is
// what bounds the speed.
__attribute__((target("avx2"))) void countRangeAvx2(const float* x, int64_t begin, int64_t end, float lo, float hi,
                                                    float nbins_f, int64_t bins, bool want_stats, ThreadPart& part) {
  constexpr int64_t kBlock = 256;
  alignas(32) int32_t idx[kBlock];
  const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi), vn = _mm256_set1_ps(nbins_f);
  const __m256 vw = _mm256_set1_ps(hi - lo);
  const __m256i vlast = _mm256_set1_epi32(static_cast<int>(bins - 1)), vskip = _mm256_set1_epi32(static_cast<int>(bins));
  __m256 vmin = _mm256_set1_ps(part.min), vmax = _mm256_set1_ps(part.max), vnan = _mm256_setzero_ps();
  uint32_t* h = part.counts.data();
  const int64_t stride = bins + 1;
  int64_t i = begin;
  for (; i + kBlock <= end; i += kBlock) {
    for (int64_t j = 0; j < kBlock; j += 8) {
      const __m256 e = _mm256_loadu_ps(x + i + j);
      if (want_stats) {
        vmin = _mm256_min_ps(vmin, e);
        vmax = _mm256_max_ps(vmax, e);
        vnan = _mm256_or_ps(vnan, _mm256_cmp_ps(e, e, _CMP_UNORD_Q));
      }
      const __m256 in = _mm256_and_ps(_mm256_cmp_ps(e, vlo, _CMP_GE_OQ), _mm256_cmp_ps(e, vhi, _CMP_LE_OQ));
      const __m256 q = _mm256_div_ps(_mm256_mul_ps(_mm256_sub_ps(e, vlo), vn), vw);
      // cvtt gives INT_MIN for NaN (hi - lo overflowed): clamp into [0, bins - 1] like the scalar loop.
      const __m256i pos = _mm256_max_epi32(_mm256_min_epi32(_mm256_cvttps_epi32(q), vlast), _mm256_setzero_si256());
      const __m256i sel = _mm256_blendv_epi8(vskip, pos, _mm256_castps_si256(in));
      _mm256_store_si256(reinterpret_cast<__m256i*>(idx + j), sel);
    }
    for (int64_t j = 0; j < kBlock; j += 4) {
      ++h[idx[j]];
      ++h[stride + idx[j + 1]];
      ++h[2 * stride + idx[j + 2]];
      ++h[3 * stride + idx[j + 3]];
    }
  }
  if (want_stats) {
    alignas(32) float mn[8], mx[8], nn[8];
    _mm256_store_ps(mn, vmin);
    _mm256_store_ps(mx, vmax);
    _mm256_store_ps(nn, vnan);
    for (int k = 0; k < 8; ++k) {
      part.min = std::min(part.min, mn[k]);
      part.max = std::max(part.max, mx[k]);
      part.has_nan |= nn[k] != 0.0f;
    }
  }
  countRange(x, i, end, lo, hi, nbins_f, bins, want_stats, part);
}

const bool kHaveAvx2 = __builtin_cpu_supports("avx2");
#endif

}  // namespace

void histcCount(const float* x, int64_t n, float lo, float hi, int64_t bins, std::vector<uint32_t>& counts,
                CountStats* stats) {
  const int threads = at::get_num_threads();
  std::vector<ThreadPart> parts(static_cast<size_t>(threads));
  const float nbins_f = static_cast<float>(bins);
  at::parallel_for(0, n, int64_t{1} << 15, [&](int64_t begin, int64_t end) {
    ThreadPart& part = parts[static_cast<size_t>(at::get_thread_num())];
    if (part.counts.empty()) part.counts.assign(static_cast<size_t>(kWays * (bins + 1)), 0);
#ifdef PT2Q_HISTC_AVX2
    if (kHaveAvx2) {
      countRangeAvx2(x, begin, end, lo, hi, nbins_f, bins, stats != nullptr, part);
      return;
    }
#endif
    countRange(x, begin, end, lo, hi, nbins_f, bins, stats != nullptr, part);
  });
  CountStats total;
  total.min = std::numeric_limits<float>::infinity();
  total.max = -std::numeric_limits<float>::infinity();
  for (const ThreadPart& part : parts) {
    if (part.counts.empty()) continue;
    for (int w = 0; w < kWays; ++w) {
      const uint32_t* h = part.counts.data() + w * (bins + 1);
      for (int64_t b = 0; b < bins; ++b) counts[static_cast<size_t>(b)] += h[b];
    }
    total.min = std::min(total.min, part.min);
    total.max = std::max(total.max, part.max);
    total.has_nan |= part.has_nan;
  }
  if (stats != nullptr) *stats = total;
}

}  // namespace pt2q
