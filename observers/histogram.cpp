// HistogramObserver (contract §3.4): a 2048-bin running histogram and torch.ao's L2
// non-linear search for the clipping range. The statistics and the search reproduce torch.ao's
// tensor arithmetic step by step (fp32 where it computes on tensors, double where it computes on
// Python floats), so qparams match bit for bit. Speed comes from three places: a counting pass
// that replaces torch.histc (observers/histogram_count.h), one pass instead of two for a batch
// inside the running range, and the search in plain loops instead of Python over 0-d tensors.
#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "observers/histogram_combine.h"
#include "observers/histogram_count.h"
#include "observers/observer.h"

namespace pt2q {
namespace {

constexpr int64_t kUpsampleRate = 16;
// Per-bin counts are exact in fp32 below 2^24; torch.histc's fp32 sums are too, so a batch
// smaller than that gives the same histogram either way.
constexpr int64_t kExactCountLimit = int64_t{1} << 24;

int64_t bitsOf(c10::ScalarType t) {
  switch (t) {
    case c10::kChar:
    case c10::kByte: return 8;
    case c10::kShort:
    case c10::kUInt16: return 16;
    case c10::kInt: return 32;
    default:
      TORCH_CHECK(false, "HistogramObserver: dtype ", t, " is not an integer type (torch.iinfo would fail)");
  }
}

// Python's floor division of fp32 values, as torch.div(rounding_mode="floor") computes it
// (fmod, then a rounding fix-up). For |a / b| < 2^21 that is exactly floor(a / b): the fix-up
// absorbs the one fp32 rounding of a - fmod(a, b), and double division of two floats cannot round
// a non-integer quotient onto an integer. That case skips the slow fmod.
float floorDiv(float a, float b) {
  if (b == 0.0f) return a / b;
  const double q = static_cast<double>(a) / static_cast<double>(b);
  if (std::fabs(q) < 2097152.0 && q != 0.0) return static_cast<float>(std::floor(q));
  const float mod = std::fmod(a, b);
  float div = (a - mod) / b;
  if (mod != 0.0f && ((b < 0.0f) != (mod < 0.0f))) div -= 1.0f;
  if (div == 0.0f) return std::copysign(0.0f, a / b);
  float fl = std::floor(div);
  if (div - fl > 0.5f) fl += 1.0f;
  return fl;
}

inline float clampF(float v, float lo, float hi) { return std::min(std::max(v, lo), hi); }

struct ErrorArgs {
  int64_t s;
  float bw, dw, half, neg_half, top;
  bool exact_floor;
};

// One iteration per source bin of torch.ao's _compute_quantization_error, op for op. Written
// branch-free so that the compiler vectorizes it (the divisions dominate).
template <bool kExactFloor>
inline __attribute__((always_inline)) void errorTermsBody(const float* __restrict hist, int64_t bins,
                                                          const ErrorArgs& g, float* __restrict out) {
  const int64_t s = g.s;
  const float bw = g.bw, dw = g.dw, half = g.half, neg_half = g.neg_half, top = g.top;
  const double dwd = dw;
  const float half3 = half * half * half, neg_half3 = neg_half * neg_half * neg_half;
  const float inner = (half3 - neg_half3) / 3.0f;
  for (int64_t i = 0; i < bins; ++i) {
    const float begin = static_cast<float>(i - s) * bw;
    const float end = begin + bw;
    const float fb = kExactFloor ? static_cast<float>(std::floor(begin / dwd)) : floorDiv(begin, dw);
    const float fe = kExactFloor ? static_cast<float>(std::floor(end / dwd)) : floorDiv(end, dw);
    const float db = clampF(fb, 0.0f, top);
    const float db_center = (db + 0.5f) * dw;
    const float de = clampF(fe, 0.0f, top);
    const float density = hist[i] / bw;
    const float a = begin - db_center;
    float n = 0.0f + density * ((half3 - a * a * a) / 3.0f);
    n = n + (de - db - 1.0f) * (density * inner);
    const float de_center = de * dw + half;
    const float b = end - de_center;
    n = n + density * ((b * b * b - neg_half3) / 3.0f);
    out[i] = n;
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) inline __m256 floorDivAvx2(__m256 v, __m256d d) {
  const __m256d a = _mm256_floor_pd(_mm256_div_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v)), d));
  const __m256d b = _mm256_floor_pd(_mm256_div_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)), d));
  return _mm256_set_m128(_mm256_cvtpd_ps(b), _mm256_cvtpd_ps(a));
}

__attribute__((target("avx2"))) inline __m256 cube(__m256 v) { return _mm256_mul_ps(_mm256_mul_ps(v, v), v); }

// errorTermsBody<true> eight bins at a time; the same IEEE operations in the same order.
__attribute__((target("avx2"))) void errorTermsAvx2(const float* hist, int64_t bins, const ErrorArgs& g, float* out) {
  const __m256 bw = _mm256_set1_ps(g.bw), dw = _mm256_set1_ps(g.dw), half = _mm256_set1_ps(g.half);
  const __m256d dwd = _mm256_set1_pd(g.dw);
  const __m256 zero = _mm256_setzero_ps(), top = _mm256_set1_ps(g.top), three = _mm256_set1_ps(3.0f);
  const __m256 point5 = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
  const float half3s = g.half * g.half * g.half, neg_half3s = g.neg_half * g.neg_half * g.neg_half;
  const __m256 half3 = _mm256_set1_ps(half3s), neg_half3 = _mm256_set1_ps(neg_half3s);
  const __m256 inner = _mm256_set1_ps((half3s - neg_half3s) / 3.0f);
  int64_t i = 0;
  for (; i + 8 <= bins; i += 8) {
    const __m256i idx = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(i - g.s)),
                                         _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    const __m256 begin = _mm256_mul_ps(_mm256_cvtepi32_ps(idx), bw);
    const __m256 end = _mm256_add_ps(begin, bw);
    const __m256 db = _mm256_min_ps(top, _mm256_max_ps(zero, floorDivAvx2(begin, dwd)));
    const __m256 de = _mm256_min_ps(top, _mm256_max_ps(zero, floorDivAvx2(end, dwd)));
    const __m256 db_center = _mm256_mul_ps(_mm256_add_ps(db, point5), dw);
    const __m256 density = _mm256_div_ps(_mm256_loadu_ps(hist + i), bw);
    const __m256 a = _mm256_sub_ps(begin, db_center);
    __m256 n = _mm256_add_ps(zero, _mm256_mul_ps(density, _mm256_div_ps(_mm256_sub_ps(half3, cube(a)), three)));
    n = _mm256_add_ps(n, _mm256_mul_ps(_mm256_sub_ps(_mm256_sub_ps(de, db), one), _mm256_mul_ps(density, inner)));
    const __m256 de_center = _mm256_add_ps(_mm256_mul_ps(de, dw), half);
    const __m256 b = _mm256_sub_ps(end, de_center);
    n = _mm256_add_ps(n, _mm256_mul_ps(density, _mm256_div_ps(_mm256_sub_ps(cube(b), neg_half3), three)));
    _mm256_storeu_ps(out + i, n);
  }
  ErrorArgs rest = g;
  rest.s = g.s - i;
  errorTermsBody<true>(hist + i, bins - i, rest, out + i);
}

const bool kErrorAvx2 = __builtin_cpu_supports("avx2");
#endif

void errorTerms(const float* hist, int64_t bins, const ErrorArgs& g, float* out) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (kErrorAvx2 && g.exact_floor) {
    errorTermsAvx2(hist, bins, g, out);
    return;
  }
#endif
  if (g.exact_floor) {
    errorTermsBody<true>(hist, bins, g, out);
  } else {
    errorTermsBody<false>(hist, bins, g, out);
  }
}

class HistogramObserver : public Observer {
 public:
  explicit HistogramObserver(const ObserverSpec& s) : Observer(s), bins_(s.bins) {
    TORCH_CHECK(s.qscheme == QScheme::kPerTensorAffine || s.qscheme == QScheme::kPerTensorSymmetric,
                "HistogramObserver takes per_tensor_affine or per_tensor_symmetric");
    TORCH_CHECK(bins_ > 0, "HistogramObserver: bins must be positive, got ", bins_);
    dst_nbins_ = std::ldexp(1.0, static_cast<int>(bitsOf(s.dtype)));
    min_val_ = at::full({}, std::numeric_limits<float>::infinity(), at::kFloat);
    max_val_ = at::full({}, -std::numeric_limits<float>::infinity(), at::kFloat);
    histogram_ = at::zeros({bins_}, at::kFloat);
  }
  std::string kind() const override { return "HistogramObserver"; }

  void observe(const at::Tensor& x_orig) override {
    if (x_orig.numel() == 0) return;
    at::Tensor x = x_orig.detach();
    const bool fast = x.scalar_type() == at::kFloat && x.device().is_cpu() && x.numel() < kExactCountLimit;
    const float cur_min = scalarOf(min_val_), cur_max = scalarOf(max_val_);
    std::optional<CountStats> found;  // the batch's extremes, when a pass below saw all of it
    if (fast) {
      x = x.contiguous();
      if (cur_min < cur_max) {
        // A batch inside the running range leaves min/max alone: count it against that range in
        // one pass. The counting stops at the first value outside the range (those counts would
        // be thrown away); histcCount then finds the batch's min / max in a pass of its own,
        // which spares the widening batch its aminmax pass.
        counts_.assign(static_cast<size_t>(bins_), 0);
        CountStats st;
        histcCount(x.data_ptr<float>(), x.numel(), cur_min, cur_max, bins_, counts_, &st, /*stop_outside=*/true);
        TORCH_CHECK(!st.has_nan, kind(), ": the observed tensor holds NaN; calibration data must be finite");
        if (!st.outside) {
          // In place, as torch.ao updates its buffer; each bin is one fp32 add of an exact count,
          // as histogram + torch.histc(...) gives.
          addCounts(histogram_.data_ptr<float>());
          return;
        }
        found = st;
      } else if (cur_min == INFINITY && cur_max == -INFINITY) {
        found = minMaxOf(x.data_ptr<float>(), x.numel());
        TORCH_CHECK(!found->has_nan, kind(), ": the observed tensor holds NaN; calibration data must be finite");
      }
    }
    // aminmax's choice between -0.0 and 0.0 is its own, so a zero extreme is left to it; so are
    // infinities, which the path below filters out.
    const bool known = found && std::isfinite(found->min) && std::isfinite(found->max) && found->min != 0.0f &&
                       found->max != 0.0f;
    if (known && found->min < found->max) {
      widen(x, cur_min, cur_max, found->min, found->max);
      return;
    }
    auto [x_min, x_max] = known ? std::make_tuple(at::scalar_tensor(found->min, at::kFloat),
                                                  at::scalar_tensor(found->max, at::kFloat))
                                : at::aminmax(x);
    checkObservedRange(kind(), x_min, x_max, true);
    if (x_min.item<double>() == -INFINITY || x_max.item<double>() == INFINITY) {
      TORCH_WARN("HistogramObserver: torch.inf detected in input tensor, ignoring those values");
      x = x.index({at::abs(x) != INFINITY});
      if (x.numel() == 0) return;
      std::tie(x_min, x_max) = at::aminmax(x);
    }
    auto checkSpan = [&](const at::Tensor& lo, const at::Tensor& hi) {
      TORCH_CHECK(std::isfinite(hi.item<float>() - lo.item<float>()), kind(), ": the observed range [",
                  lo.item<float>(), ", ", hi.item<float>(), "] is wider than fp32 can represent");
    };
    if (cur_min == INFINITY || cur_max == -INFINITY) {
      checkSpan(x_min, x_max);
      // The statistics change in place, as torch.ao's buffers do: a reference to them (the Python
      // module's buffers) stays current.
      histogram_.copy_(histc(x, x_min.item<double>(), x_max.item<double>()));
      min_val_.copy_(x_min.reshape({}));
      max_val_.copy_(x_max.reshape({}));
      return;
    }
    const at::Tensor new_min = at::minimum(min_val_, x_min), new_max = at::maximum(max_val_, x_max);
    checkSpan(new_min, new_max);
    const at::Tensor update = histc(x, new_min.item<double>(), new_max.item<double>());
    if (new_min.item<float>() == cur_min && new_max.item<float>() == cur_max) {
      histogram_.add_(update);
    } else {
      histogram_.copy_(combine(histogram_, min_val_, max_val_, update, new_min, new_max));
      min_val_.copy_(new_min);
      max_val_.copy_(new_max);
    }
  }

  // The first batch or a widening one, with a finite batch range x_min < x_max, in scalars:
  // torch.ao's tensor steps (minimum / maximum of 0-d fp32 tensors, histc over the union, the
  // carry) with the same fp32 results. observe()'s general path spends about 40 small ATen calls
  // on the same step; on a 2-core Zen 3 they took longer than counting a 1x128x768 batch.
  void widen(const at::Tensor& x, float cur_min, float cur_max, float x_min, float x_max) {
    const bool first = cur_min == INFINITY && cur_max == -INFINITY;
    const float lo = first ? x_min : std::min(cur_min, x_min), hi = first ? x_max : std::max(cur_max, x_max);
    TORCH_CHECK(std::isfinite(hi - lo), kind(), ": the observed range [", lo, ", ", hi,
                "] is wider than fp32 can represent");
    counts_.assign(static_cast<size_t>(bins_), 0);
    histcCount(x.data_ptr<float>(), x.numel(), lo, hi, bins_, counts_, nullptr);
    float* h = histogram_.data_ptr<float>();
    if (first) {
      for (int64_t b = 0; b < bins_; ++b) h[b] = static_cast<float>(counts_[static_cast<size_t>(b)]);
    } else if (lo == cur_min && hi == cur_max) {
      addCounts(h);
      return;
    } else {
      carry(h, cur_min, cur_max, lo, hi);  // reads h before anything is written to it
      for (int64_t b = 0; b < bins_; ++b) {
        h[b] = static_cast<float>(counts_[static_cast<size_t>(b)]) + moved_[static_cast<size_t>(b)];
      }
    }
    *min_val_.data_ptr<float>() = lo;
    *max_val_.data_ptr<float>() = hi;
  }

  void addCounts(float* h) const {
    for (int64_t b = 0; b < bins_; ++b) h[b] += static_cast<float>(counts_[static_cast<size_t>(b)]);
  }

  // torch.ao's _upscale_histogram of src (bins_ bins over [orig_min, orig_max], orig_min < orig_max)
  // into bins_ bins over [lo, hi], left in moved_ (observers/histogram_combine.h): each source bin
  // split into 16 equal parts, each part's midpoint bucketed into the new range and its weight
  // added in element order, with ATen's linspace points. orig_span_part is torch.ao's
  // (orig_max - orig_min) / n on 0-d fp32 tensors: an fp32 subtraction, then a true fp32 division
  // by n (which fp32 holds exactly below 2^24; ATen does not use the reciprocal for fp32).
  void carry(const float* src, float orig_min, float orig_max, float lo, float hi) const {
    const int64_t n = bins_ * kUpsampleRate;
    const float orig_span_part = (orig_max - orig_min) / static_cast<float>(n);
    mids_.resize(static_cast<size_t>(n + 1));
    edges_.resize(static_cast<size_t>(bins_ + 1));
    moved_.assign(static_cast<size_t>(bins_), 0.0f);
    linspaceLikeATen(orig_min, orig_max, n + 1, mids_.data());
    linspaceLikeATen(lo, hi, bins_ + 1, edges_.data());
    upsampleHistogram(src, bins_, kUpsampleRate, mids_.data(), 0.5f * orig_span_part, edges_.data(), moved_.data());
  }

  // Histograms over different ranges are both carried into the union range the way torch.ao
  // carries its running histogram into a wider one (16x upsampling of each source bin).
  void merge(const Observer& other_base) override {
    TORCH_CHECK(other_base.kind() == kind(), "observer merge: a ", kind(), " cannot merge a ", other_base.kind());
    const auto& other = static_cast<const HistogramObserver&>(other_base);
    TORCH_CHECK(other.bins_ == bins_, "observer merge: ", bins_, " bins vs ", other.bins_);
    if (other.min_val_.item<float>() == INFINITY) return;
    if (min_val_.item<float>() == INFINITY) {
      min_val_ = other.min_val_.clone();
      max_val_ = other.max_val_.clone();
      histogram_ = other.histogram_.clone();
      return;
    }
    const at::Tensor new_min = at::minimum(min_val_, other.min_val_);
    const at::Tensor new_max = at::maximum(max_val_, other.max_val_);
    auto into = [&](const at::Tensor& h, const at::Tensor& lo, const at::Tensor& hi) {
      if (at::equal(lo, new_min) && at::equal(hi, new_max)) return h;
      return combine(h, lo, hi, at::zeros_like(h), new_min, new_max);
    };
    histogram_ = into(histogram_, min_val_, max_val_) + into(other.histogram_, other.min_val_, other.max_val_);
    min_val_ = new_min;
    max_val_ = new_max;
  }

  QParams computeQParams() const override {
    if (min_val_.item<float>() == INFINITY && max_val_.item<float>() == -INFINITY) {
      TORCH_WARN("HistogramObserver: calculate_qparams before any data; returning scale 1.0, zero point 0");
      return {at::ones({1}, at::kFloat), at::zeros({1}, at::kLong)};
    }
    const auto [new_min, new_max] = nonLinearParamSearch();
    return calculateQParams(new_min, new_max, spec_);
  }

  std::vector<std::pair<std::string, at::Tensor>> state() const override {
    return {{"min_val", min_val_}, {"max_val", max_val_}, {"histogram", histogram_}};
  }
  void setState(const std::vector<std::pair<std::string, at::Tensor>>& state) override {
    checkState(state, {"min_val", "max_val", "histogram"});
    // Validate everything before changing anything.
    TORCH_CHECK(state[2].second.dim() == 1 && state[2].second.size(0) == bins_, kind(), " state: histogram of ",
                state[2].second.numel(), " bins, this observer has ", bins_);
    TORCH_CHECK(state[2].second.scalar_type() == at::kFloat, kind(), " state: histogram must be float32");
    Observer::setState({state[0], state[1]});
    histogram_ = state[2].second.to(at::kFloat).clone();
  }

  /// _compute_quantization_error, public for the tests that compare it with torch.ao's.
  double quantizationError(int64_t s, int64_t e) const { return errorOf(s, e); }

 private:
  at::Tensor countsTensor(const std::vector<uint32_t>& counts) const {
    at::Tensor t = at::empty({bins_}, at::kFloat);
    float* d = t.data_ptr<float>();
    for (int64_t b = 0; b < bins_; ++b) d[b] = static_cast<float>(counts[static_cast<size_t>(b)]);
    return t;
  }

  // torch.histc(x, bins, min=lo, max=hi), with the counting pass where it gives the same bins.
  at::Tensor histc(const at::Tensor& x, double lo, double hi) const {
    if (x.scalar_type() != at::kFloat || !x.device().is_cpu() || x.numel() >= kExactCountLimit || !(lo < hi)) {
      return at::histc(x, bins_, lo, hi);
    }
    const at::Tensor xc = x.contiguous();
    std::vector<uint32_t> counts(static_cast<size_t>(bins_), 0);
    histcCount(xc.data_ptr<float>(), xc.numel(), static_cast<float>(lo), static_cast<float>(hi), bins_, counts,
               nullptr);
    return countsTensor(counts);
  }

  // _combine_histograms: the running histogram over [orig_min, orig_max] carried into
  // [new_min, new_max] and added to `update`, with torch.ao's ATen calls in its order.
  at::Tensor combine(const at::Tensor& orig, const at::Tensor& orig_min, const at::Tensor& orig_max,
                     const at::Tensor& update, const at::Tensor& new_min, const at::Tensor& new_max) const {
    if (at::equal(new_min, orig_min) && at::equal(new_max, orig_max)) return orig + update;
    const double lo = new_min.item<double>(), hi = new_max.item<double>();
    if (orig_min.item<float>() == orig_max.item<float>()) {
      const at::Tensor bin_value = at::sum(orig);
      return at::histc(orig_min, bins_, lo, hi) * bin_value + update;
    }
    const at::Tensor src = orig.to(at::kFloat).contiguous();
    carry(src.data_ptr<float>(), orig_min.item<float>(), orig_max.item<float>(), static_cast<float>(lo),
          static_cast<float>(hi));
    at::Tensor out = update.to(at::kFloat).clone();
    float* o = out.data_ptr<float>();
    for (int64_t b = 0; b < bins_; ++b) o[b] = o[b] + moved_[static_cast<size_t>(b)];
    return out;
  }

  // _compute_quantization_error(s, e): the L2 error of quantizing bins s..e into dst_nbins
  // levels, each bin's mass spread uniformly. The per-bin terms are torch.ao's tensor ops, in fp32
  // and in its order (errorTerms); only the final sum goes through ATen, whose reduction order
  // we keep.
  double errorOf(int64_t s, int64_t e) const {
    const double bin_width = (static_cast<double>(max_val_.item<float>()) - min_val_.item<float>()) / bins_;
    const double dst_bin_width = bin_width * static_cast<double>(e - s + 1) / dst_nbins_;
    if (dst_bin_width == 0.0) return 0.0;
    ErrorArgs args;
    args.s = s;
    args.bw = static_cast<float>(bin_width);
    args.dw = static_cast<float>(dst_bin_width);
    args.half = static_cast<float>(dst_bin_width / 2);
    args.neg_half = static_cast<float>(-dst_bin_width / 2);
    args.top = static_cast<float>(dst_nbins_ - 1);
    // |begin / dw| <= bins * dst_nbins; below 2^21 floor division needs no fmod (see floorDiv).
    args.exact_floor = static_cast<double>(bins_) * dst_nbins_ < 2097152.0;
    at::Tensor norm = at::empty({bins_}, at::kFloat);
    errorTerms(histogram_.data_ptr<float>(), bins_, args, norm.data_ptr<float>());
    return at::sum(norm).item<double>();
  }

  // torch.ao's loop moves alpha up or beta down by 1e-5 per step, up to 10^5 steps, and most
  // steps change nothing. alpha and beta only ever take the values of the sequences
  // 0 + 1e-5 + 1e-5 ... and 1 - 1e-5 - 1e-5 ... (summed in double, as Python does), so the
  // search keeps step counts and skips a run of no-change steps by a binary search: in such a run
  // only beta moves, and the step that ends it is the first where csum[end_bin] exceeds the
  // (monotone) threshold.
  std::pair<at::Tensor, at::Tensor> nonLinearParamSearch() const {
    const at::Tensor bin_width = (max_val_ - min_val_) / bins_;
    const double total = at::sum(histogram_).item<double>();
    const at::Tensor csum_t = at::cumsum(histogram_, 0);
    const float* csum = csum_t.data_ptr<float>();
    const std::vector<double>& up = stepSequence(true);
    const std::vector<double>& down = stepSequence(false);
    // A 0-d fp32 tensor compared with a Python float compares in fp32.
    auto mass = [total](double fraction) { return static_cast<float>(fraction * total); };
    size_t k = 0, m = 0;  // alpha = up[k], beta = down[m]
    double norm_min = std::numeric_limits<double>::infinity();
    int64_t start_bin = 0, end_bin = bins_ - 1;
    while (up[k] < down[m]) {
      const float lo_mass = mass(up[k + 1]), hi_mass = mass(down[m + 1]);
      int64_t l = start_bin, r = end_bin;
      while (l < end_bin && csum[l] < lo_mass) ++l;
      while (r > start_bin && csum[r] > hi_mass) --r;
      if (l == start_bin && r == end_bin) {
        if (start_bin == end_bin) break;  // nothing can move any more before the loop ends
        // No change: beta steps down until csum[end_bin] > mass(down[m' + 1]), or the loop ends.
        size_t lo = m + 1, hi = down.size() - 2;
        while (lo < hi) {
          const size_t mid = (lo + hi) / 2;
          if (csum[end_bin] > mass(down[mid + 1])) hi = mid; else lo = mid + 1;
        }
        m = lo;
        continue;
      }
      int64_t next_start = start_bin, next_end = end_bin;
      if ((l - start_bin) > (end_bin - r)) {
        next_start = l;
        ++k;
      } else {
        next_end = r;
        ++m;
      }
      if (next_start == start_bin && next_end == end_bin) continue;
      const double norm = errorOf(next_start, next_end);
      if (norm > norm_min) break;
      norm_min = norm;
      start_bin = next_start;
      end_bin = next_end;
    }
    return {min_val_ + bin_width * start_bin, min_val_ + bin_width * (end_bin + 1)};
  }

  // from, from + step, from + step + step, ... in double, far enough that alpha meets beta.
  static const std::vector<double>& stepSequence(bool up) {
    auto build = [](double from, double step) {
      std::vector<double> v(100010);
      double a = from;
      for (double& x : v) {
        x = a;
        a += step;
      }
      return v;
    };
    static const std::vector<double> ups = build(0.0, 1e-5), downs = build(1.0, -1e-5);
    return up ? ups : downs;
  }

  // The value of a 0-d fp32 statistic without a dispatcher call (min_val_ / max_val_ are always
  // this observer's own 0-d fp32 CPU tensors).
  static float scalarOf(const at::Tensor& t) {
    TORCH_INTERNAL_ASSERT(t.numel() == 1 && t.scalar_type() == at::kFloat && t.device().is_cpu());
    return *t.data_ptr<float>();
  }

  int64_t bins_;
  double dst_nbins_;
  at::Tensor histogram_;  // 1-d fp32, contiguous, owned (setState clones)
  std::vector<uint32_t> counts_;  // scratch for the counting pass, kept between calls
  // scratch for the carry, kept between calls: 32769 points are past malloc's mmap threshold, and
  // a fresh mapping each widening call costs its page faults
  mutable std::vector<float> mids_, edges_, moved_;
};

}  // namespace

std::unique_ptr<Observer> makeHistogramObserver(const ObserverSpec& spec) {
  return std::make_unique<HistogramObserver>(spec);
}

double histogramQuantizationError(const Observer& o, int64_t start_bin, int64_t end_bin) {
  const auto* h = dynamic_cast<const HistogramObserver*>(&o);
  TORCH_CHECK(h != nullptr, "histogramQuantizationError: a ", o.kind(), " is not a HistogramObserver");
  return h->quantizationError(start_bin, end_bin);
}

}  // namespace pt2q
