// The histogram carry's loops against the ATen calls torch.ao makes (linspace, bucketize,
// bincount), bit for bit, on random and adversarial ranges and weights.
#include "observers/histogram_combine.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace pt2q {
namespace {

std::vector<uint32_t> bitsOf(const float* p, int64_t n) {
  std::vector<uint32_t> b(static_cast<size_t>(n));
  std::memcpy(b.data(), p, static_cast<size_t>(n) * sizeof(float));
  return b;
}

void expectLinspace(double start, double end, int64_t steps) {
  const at::Tensor ref = at::linspace(start, end, steps, at::kFloat);
  std::vector<float> mine(static_cast<size_t>(steps));
  linspaceLikeATen(start, end, steps, mine.data());
  ASSERT_EQ(bitsOf(mine.data(), steps), bitsOf(ref.data_ptr<float>(), steps))
      << "linspace(" << start << ", " << end << ", " << steps << ")";
}

TEST(HistogramCombine, LinspaceRuleIsFoundOnX86) {
#if defined(__x86_64__)
  // ATen's kernels are built for AVX2 / AVX-512 with FMA contraction; falling back to at::linspace
  // would be correct but slow, so it is a failure here.
  EXPECT_NE(linspaceRule(), LinspaceRule::kATen);
#endif
}

TEST(HistogramCombine, LinspaceMatchesATenOnRandomRanges) {
  std::mt19937 gen(7);
  std::normal_distribution<double> normal;
  std::uniform_real_distribution<double> decade(-40.0, 30.0);
  const int64_t steps_choices[] = {2, 3, 8, 9, 17, 257, 2049, 32769, 65537};
  for (int threads : {1, 2}) {
    at::set_num_threads(threads);
    for (int t = 0; t < 400; ++t) {
      const double scale = std::pow(10.0, decade(gen) / 4.0);
      const double a = normal(gen) * scale;
      const double b = t % 5 == 0 ? a - std::abs(normal(gen)) * scale : a + std::abs(normal(gen)) * scale;
      expectLinspace(a, b, steps_choices[t % 9]);
    }
  }
  // degenerate and edge ranges
  expectLinspace(1.0, 1.0, 2049);
  expectLinspace(0.0, 0.0, 32769);
  expectLinspace(-0.0, 1e-45, 2049);
  expectLinspace(1e-40, 3e-38, 32769);
  expectLinspace(-3e38, 3e38, 2049);
  expectLinspace(1.0, std::nextafter(1.0f, 2.0f), 32769);
}

// torch.ao's _upscale_histogram through ATen, without the final add to the update.
at::Tensor referenceUpsample(const at::Tensor& src, double orig_min, double orig_max, float half_part, double lo,
                             double hi, int64_t rate) {
  const int64_t bins = src.numel();
  const at::Tensor mids = at::linspace(orig_min, orig_max, bins * rate + 1, at::kFloat).slice(0, 0, bins * rate) +
                          half_part;
  const at::Tensor edges = at::linspace(lo, hi, bins + 1, at::kFloat);
  const at::Tensor idx = at::clamp(at::bucketize(mids, edges, false, /*right=*/true) - 1, 0, bins - 1);
  const at::Tensor weights = at::repeat_interleave(src / static_cast<double>(rate), rate);
  return at::bincount(idx, weights, bins).to(at::kFloat);
}

void expectUpsample(const at::Tensor& src, double orig_min, double orig_max, double lo, double hi, int64_t rate = 16) {
  const int64_t bins = src.numel();
  const float half_part = 0.5f * static_cast<float>((static_cast<float>(orig_max) - static_cast<float>(orig_min)) /
                                                    static_cast<float>(bins * rate));
  const at::Tensor ref = referenceUpsample(src, orig_min, orig_max, half_part, lo, hi, rate);
  std::vector<float> mids(static_cast<size_t>(bins * rate + 1)), edges(static_cast<size_t>(bins + 1));
  linspaceLikeATen(orig_min, orig_max, bins * rate + 1, mids.data());
  linspaceLikeATen(lo, hi, bins + 1, edges.data());
  std::vector<float> moved(static_cast<size_t>(bins), 0.0f);
  upsampleHistogram(src.data_ptr<float>(), bins, rate, mids.data(), half_part, edges.data(), moved.data());
  const auto want = bitsOf(ref.data_ptr<float>(), bins), got = bitsOf(moved.data(), bins);
  for (int64_t b = 0; b < bins; ++b) {
    ASSERT_EQ(got[static_cast<size_t>(b)], want[static_cast<size_t>(b)])
        << "bin " << b << ": " << moved[static_cast<size_t>(b)] << " vs " << ref[b].item<float>() << " (range ["
        << orig_min << ", " << orig_max << "] into [" << lo << ", " << hi << "])";
  }
}

TEST(HistogramCombine, UpsampleMatchesBucketizeAndBincount) {
  std::mt19937 gen(11);
  std::normal_distribution<double> normal;
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (int t = 0; t < 120; ++t) {
    const int64_t bins = t % 3 == 0 ? 2048 : (t % 3 == 1 ? 256 : 100);
    const double scale = std::pow(10.0, unit(gen) * 8 - 4);
    const double a = normal(gen) * scale, b = a + (0.01 + unit(gen)) * scale;
    // widen by a few per cent (the usual case), by a factor, or by one ulp at one end
    double lo, hi;
    switch (t % 4) {
      case 0: lo = a - unit(gen) * 0.05 * (b - a); hi = b + unit(gen) * 0.05 * (b - a); break;
      case 1: lo = a - unit(gen) * 10 * (b - a); hi = b + unit(gen) * 10 * (b - a); break;
      case 2: lo = a; hi = std::nextafter(static_cast<float>(b), INFINITY); break;
      default: lo = a - (b - a) * 0.3; hi = b; break;
    }
    // counts (integers), carried histograms (fractions of 16ths), and huge counts whose runs of
    // adds round
    at::Tensor src;
    switch (t % 3) {
      case 0: src = at::floor(at::exp(at::randn({bins}) * 2)); break;
      case 1: src = at::rand({bins}) * 100; break;
      default: src = at::floor(at::rand({bins}) * 3e7) + 1; break;
    }
    src.index_put_({at::rand({bins}) < 0.2}, 0.0);  // empty bins
    if (t % 8 == 7) {
      // powers of two far apart: runs whose weight is exactly half an ulp of the sum, where
      // each add's rounding depends on the sum's last bit
      src = at::pow(2.0, at::randint(0, 40, {bins}, at::kDouble)).to(at::kFloat);
    }
    expectUpsample(src, a, b, lo, hi);
  }
}

TEST(HistogramCombine, UpsampleAdversarial) {
  const int64_t bins = 2048;
  // all mass in one bin, at either end of the range
  at::Tensor one = at::zeros({bins});
  one[0] = 1e6;
  one[bins - 1] = 3.0;
  expectUpsample(one, -1.0, 1.0, -1.0, 1.000001);
  expectUpsample(one, -1.0, 1.0, -1000.0, 1.0);
  // weights far apart in magnitude landing on one target, in both orders
  at::Tensor mixed = at::ones({bins}) * 1e-3;
  mixed.slice(0, 0, bins, 2).fill_(4e7);
  expectUpsample(mixed, 0.0, 1.0, -50.0, 51.0);
  // a carried histogram that is not all counts: negative, subnormal and infinite weights take the
  // one-by-one path
  at::Tensor odd = at::randn({bins});
  odd[5] = 1e-42;
  odd[6] = INFINITY;
  odd[7] = -0.0f;
  expectUpsample(odd, -2.0, 2.0, -2.5, 2.5);
  // a subnormal range, and a range near fp32's largest
  expectUpsample(at::rand({bins}) * 10, 1e-42, 1e-40, 0.0, 1e-39);
  expectUpsample(at::rand({bins}) * 10, -1e38, 1e38, -3e38, 3e38);
  // the target equal to the source
  expectUpsample(at::rand({bins}) * 7, -3.0, 5.0, -3.0, 5.0);
  // targets narrower than the source (the observer never makes one; the loop must still agree),
  // one with points exactly on the edges: parts j / 8 + 1 / 16, edges 1 / 16 + 15 i / 16, so every
  // 15th source bin runs from one edge to exactly two edges further
  expectUpsample(at::rand({bins}) * 5, -1.0, 1.0, -0.3, 0.2);
  expectUpsample(at::floor(at::rand({bins}) * 50), 0.0, 2.0 * bins, 1.0 / 16, 1.0 / 16 + bins * 15.0 / 16);
}

}  // namespace
}  // namespace pt2q
