// The carry step of HistogramObserver (torch.ao's _combine_histograms / _upscale_histogram): the
// running histogram over an old range moved into a wider one, with torch.ao's rounding, in plain
// loops. A batch that widens the range pays for this whatever its size, so it sets the cost of a
// widening call on small activations.
#pragma once

#include <cstdint>

namespace pt2q {

/// How ATen's CPU linspace kernel rounds its fp32 points in this torch build.
enum class LinspaceRule {
  kFused,  // start + step * i and end - step * (steps - 1 - i), each one fused multiply-add
  kPlain,  // the same with the product rounded first
  kATen,   // neither matched: at::linspace itself is called
};

/// The rule at::linspace follows in this process, found once by comparing it with both rules on
/// a few ranges that tell them apart.
LinspaceRule linspaceRule();

/// at::linspace(start, end, steps, float32) into out[0..steps), bit for bit (steps >= 2).
void linspaceLikeATen(double start, double end, int64_t steps, float* out);

/// torch.ao's _upscale_histogram without the final add: each of the `bins` source bins is split
/// into `rate` parts whose points are mids[j] + half_part (j = bin * rate + part, mids as
/// linspaceLikeATen gives them), each point is bucketed among the target edges[0..bins]
/// (torch.bucketize(right=True) - 1, clamped into [0, bins)), and the part's weight
/// src[bin] / rate is added to moved[target] in element order, in fp32, as torch.bincount does.
/// moved[0..bins) must start at zero.
void upsampleHistogram(const float* src, int64_t bins, int64_t rate, const float* mids, float half_part,
                       const float* edges, float* moved);

}  // namespace pt2q
