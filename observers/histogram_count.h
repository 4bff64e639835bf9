// The counting pass of HistogramObserver: torch.histc's CPU binning (linear interpolation) on
// fp32 data, with the batch's min and max found in the same pass.
#pragma once

#include <cstdint>
#include <vector>

namespace pt2q {

/// What one pass over the data found besides the counts.
struct CountStats {
  float min = 0.0f;  // of the finite and infinite values; meaningless when has_nan
  float max = 0.0f;
  bool has_nan = false;
};

/// Adds to counts[0..bins) the number of x[i] in each of `bins` equal bins over [lo, hi] (lo < hi,
/// both finite), binned as torch.histc does on CPU: bin = trunc((x - lo) * bins / (hi - lo)) in
/// fp32, the value hi in the last bin, values outside [lo, hi] and NaN skipped. Runs on
/// at::parallel_for; stats (optional) receives the min, max and NaN presence of all of x.
void histcCount(const float* x, int64_t n, float lo, float hi, int64_t bins, std::vector<uint32_t>& counts,
                CountStats* stats);

}  // namespace pt2q
