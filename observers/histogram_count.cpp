// Counting pass of HistogramObserver. torch.histc spends most of a calibration step in a generic
// N-d binning loop (about 2 GB/s on two cores); this loop bins 1-d fp32 data with the same fp32
// arithmetic, so every element lands in the bin torch.histc puts it in, and checks the running
// range on the way so that a batch inside it costs one pass instead of torch.ao's two.
#include "observers/histogram_count.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cstring>
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

// With stop_outside: set by the thread that meets a value outside [lo, hi]; every thread then only
// finds min / max for the rest of its range. Null when counting must not stop.
using StopFlag = std::atomic<bool>*;

void minMaxRange(const float* x, int64_t begin, int64_t end, ThreadPart& part) {
  float mn = part.min, mx = part.max;
  bool nan = part.has_nan;
  for (int64_t i = begin; i < end; ++i) {
    const float e = x[i];
    mn = e < mn ? e : mn;
    mx = e > mx ? e : mx;
    nan |= e != e;
  }
  part.min = mn;
  part.max = mx;
  part.has_nan = nan;
}

void countRange(const float* x, int64_t begin, int64_t end, float lo, float hi, float nbins_f, int64_t bins,
                bool want_stats, StopFlag stop, ThreadPart& part) {
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
    if (stop != nullptr && !(e >= lo && e <= hi)) {
      stop->store(true, std::memory_order_relaxed);
      return;
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
// The 8 lanes' min, max and NaN flags into part.
__attribute__((target("avx2"))) void mergeStats(__m256 vmin, __m256 vmax, __m256 vnan, ThreadPart& part) {
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

__attribute__((target("avx2"))) void minMaxRangeAvx2(const float* x, int64_t begin, int64_t end, ThreadPart& part) {
  __m256 vmin = _mm256_set1_ps(part.min), vmax = _mm256_set1_ps(part.max), vnan = _mm256_setzero_ps();
  int64_t i = begin;
  for (; i + 8 <= end; i += 8) {
    const __m256 e = _mm256_loadu_ps(x + i);
    vmin = _mm256_min_ps(vmin, e);
    vmax = _mm256_max_ps(vmax, e);
    vnan = _mm256_or_ps(vnan, _mm256_cmp_ps(e, e, _CMP_UNORD_Q));
  }
  mergeStats(vmin, vmax, vnan, part);
  minMaxRange(x, i, end, part);
}

// The same binning with the arithmetic 8 lanes wide: bins are computed for a block of elements
// into a buffer (a skipped element gets the extra bin) and counted by a scalar loop, which is
// what bounds the speed.
template <bool kPrefetch>
__attribute__((target("avx2"))) void countRangeAvx2(const float* x, int64_t begin, int64_t end, float lo, float hi,
                                                    float nbins_f, int64_t bins, bool want_stats, StopFlag stop,
                                                    ThreadPart& part) {
  // 64 elements a block keep a block's binning and its counting close enough for the core to
  // overlap them (256 ran 1.06-1.12x slower on a Zen 3 core).
  constexpr int64_t kBlock = 64;
  constexpr int64_t kAhead = 1024;  // floats
  alignas(32) int32_t idx[kBlock];
  const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi), vn = _mm256_set1_ps(nbins_f);
  const __m256 vw = _mm256_set1_ps(hi - lo);
  const __m256i vlast = _mm256_set1_epi32(static_cast<int>(bins - 1)), vskip = _mm256_set1_epi32(static_cast<int>(bins));
  __m256 vmin = _mm256_set1_ps(part.min), vmax = _mm256_set1_ps(part.max), vnan = _mm256_setzero_ps();
  uint32_t* h = part.counts.data();
  const int64_t stride = bins + 1;
  int64_t i = begin;
  bool stopped = false;
  for (; i + kBlock <= end; i += kBlock) {
    if (stop != nullptr && stop->load(std::memory_order_relaxed)) {
      stopped = true;
      break;
    }
    __m256 all_in = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
    if constexpr (kPrefetch) {
      for (int64_t j = 0; j < kBlock; j += 16) {
        _mm_prefetch(reinterpret_cast<const char*>(x + i + j + kAhead), _MM_HINT_T0);
      }
    }
    for (int64_t j = 0; j < kBlock; j += 8) {
      const __m256 e = _mm256_loadu_ps(x + i + j);
      if (want_stats) {
        vmin = _mm256_min_ps(vmin, e);
        vmax = _mm256_max_ps(vmax, e);
        vnan = _mm256_or_ps(vnan, _mm256_cmp_ps(e, e, _CMP_UNORD_Q));
      }
      const __m256 in = _mm256_and_ps(_mm256_cmp_ps(e, vlo, _CMP_GE_OQ), _mm256_cmp_ps(e, vhi, _CMP_LE_OQ));
      all_in = _mm256_and_ps(all_in, in);
      const __m256 q = _mm256_div_ps(_mm256_mul_ps(_mm256_sub_ps(e, vlo), vn), vw);
      // cvtt gives INT_MIN for NaN (hi - lo overflowed): clamp into [0, bins - 1] like the scalar loop.
      const __m256i pos = _mm256_max_epi32(_mm256_min_epi32(_mm256_cvttps_epi32(q), vlast), _mm256_setzero_si256());
      const __m256i sel = _mm256_blendv_epi8(vskip, pos, _mm256_castps_si256(in));
      _mm256_store_si256(reinterpret_cast<__m256i*>(idx + j), sel);
    }
    if (stop != nullptr && _mm256_movemask_ps(all_in) != 0xFF) {
      stop->store(true, std::memory_order_relaxed);
      stopped = true;
      break;
    }
    // Two indices per load: the increments' loads and stores are what bound this loop.
    uint64_t pairs[kBlock / 2];
    std::memcpy(pairs, idx, sizeof pairs);
    for (int64_t j = 0; j < kBlock / 2; j += 2) {
      const uint64_t a = pairs[j], b = pairs[j + 1];
      ++h[static_cast<uint32_t>(a)];
      ++h[stride + (a >> 32)];
      ++h[2 * stride + static_cast<uint32_t>(b)];
      ++h[3 * stride + (b >> 32)];
    }
  }
  if (want_stats) mergeStats(vmin, vmax, vnan, part);
  if (!stopped) countRange(x, i, end, lo, hi, nbins_f, bins, want_stats, stop, part);
}

const bool kHaveAvx2 = __builtin_cpu_supports("avx2");
#endif
constexpr int64_t kStreamedElements = int64_t{1} << 20;  // 4 MiB of fp32

}  // namespace

CountStats minMaxOf(const float* x, int64_t n) {
  std::vector<ThreadPart> parts(static_cast<size_t>(at::get_num_threads()));
  at::parallel_for(0, n, int64_t{1} << 16, [&](int64_t begin, int64_t end) {
    ThreadPart& part = parts[static_cast<size_t>(at::get_thread_num())];
#ifdef PT2Q_HISTC_AVX2
    if (kHaveAvx2) {
      minMaxRangeAvx2(x, begin, end, part);
      return;
    }
#endif
    minMaxRange(x, begin, end, part);
  });
  CountStats total;
  total.min = std::numeric_limits<float>::infinity();
  total.max = -std::numeric_limits<float>::infinity();
  for (const ThreadPart& part : parts) {
    total.min = std::min(total.min, part.min);
    total.max = std::max(total.max, part.max);
    total.has_nan |= part.has_nan;
  }
  return total;
}

void histcCount(const float* x, int64_t n, float lo, float hi, int64_t bins, std::vector<uint32_t>& counts,
                CountStats* stats, bool stop_outside) {
  const int threads = at::get_num_threads();
  std::vector<ThreadPart> parts(static_cast<size_t>(threads));
  const float nbins_f = static_cast<float>(bins);
  std::atomic<bool> stop_flag{false};
  const StopFlag stop = stop_outside && stats != nullptr ? &stop_flag : nullptr;
  // With a stop, the counting pass does not track min / max: a batch inside the range does not need
  // them, and one that widens it gets them from a separate pass below (a tenth of a count).
  const bool count_stats = stats != nullptr && stop == nullptr;
  // The hardware prefetchers alone left a batch streamed from memory short: software prefetch
  // 4 KiB ahead counted 6.4M elements 1.10-1.51x faster on a Zen 3 VM, but cache-resident batches
  // 2-10 % slower (tools/cpu/histc_ab.cpp; 3 MiB within 3 % either way), so it runs only from
  // 4 MiB on. A prefetch past the end does not fault.
  [[maybe_unused]] const bool streamed = n >= kStreamedElements;
  at::parallel_for(0, n, int64_t{1} << 15, [&](int64_t begin, int64_t end) {
    ThreadPart& part = parts[static_cast<size_t>(at::get_thread_num())];
    if (part.counts.empty()) part.counts.assign(static_cast<size_t>(kWays * (bins + 1)), 0);
    if (stop != nullptr && stop->load(std::memory_order_relaxed)) return;
#ifdef PT2Q_HISTC_AVX2
    if (kHaveAvx2) {
      (streamed ? countRangeAvx2<true> : countRangeAvx2<false>)(x, begin, end, lo, hi, nbins_f, bins, count_stats,
                                                                  stop, part);
      return;
    }
#endif
    countRange(x, begin, end, lo, hi, nbins_f, bins, count_stats, stop, part);
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
  total.outside = stop_flag.load();
  if (stop != nullptr) {
    if (total.outside) {
      const CountStats mm = minMaxOf(x, n);
      total.min = std::min(total.min, mm.min);
      total.max = std::max(total.max, mm.max);
      total.has_nan |= mm.has_nan;
    } else {
      total.min = lo;  // bounds: every value lies in [lo, hi]
      total.max = hi;
    }
  }
  if (stats != nullptr) *stats = total;
}

}  // namespace pt2q
