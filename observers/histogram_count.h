// The counting pass of HistogramObserver: torch.histc's CPU binning (linear interpolation) on
// fp32 data, with the batch's min and max found in the same pass.
#pragma once

#include <cstdint>
#include <vector>

namespace pt2q {

/// What one pass over the data found besides the counts.
struct CountStats {
  float min = 0.0f;  // of the finite and infinite values; meaningless when has_nan (see stop_outside)
  float max = 0.0f;
  bool has_nan = false;
  bool outside = false;  // with stop_outside: some value lay outside [lo, hi] and counts are partial
};

/// The min, max and NaN presence of x[0..n) (min / max over the non-NaN values), in one parallel
/// pass; outside stays false.
CountStats minMaxOf(const float* x, int64_t n);

/// Adds to counts[0..bins) the number of x[i] in each of `bins` equal bins over [lo, hi] (lo < hi,
/// both finite), binned as torch.histc does on CPU: bin = trunc((x - lo) * bins / (hi - lo)) in
/// fp32, the value hi in the last bin, values outside [lo, hi] and NaN skipped. Runs on
/// at::parallel_for; stats (optional) receives the min, max and NaN presence of all of x.
/// stop_outside (with stats): a value outside [lo, hi] (or NaN) stops the counting and sets
/// stats->outside; counts are then partial, and stats gets the min, max and NaN presence of all of
/// x from a separate pass. A batch that widens the observed range is counted again over the new
/// range anyway, so the counting done before it is found is wasted. When no value lies outside,
/// stats->min and max are only the bounds lo and hi.
void histcCount(const float* x, int64_t n, float lo, float hi, int64_t bins, std::vector<uint32_t>& counts,
                CountStats* stats, bool stop_outside = false);

}  // namespace pt2q
