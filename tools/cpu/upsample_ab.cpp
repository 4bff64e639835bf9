// Same-process A/B of HistogramObserver's carry loop (observers/histogram_combine.cpp's
// upsampleHistogram) of this tree against another revision's: microseconds a call (best of 200,
// alternating the two) for a 2048-bin histogram of counts (randn) and for one carried 29 times
// into a range 1 % wider each time (long fractions), into a range a few per cent wider; "same"
// says whether both gave the same bits. Build (from the repo root; TI and TL are torch's include
// and lib folders, as in histc_ab.cpp):
//   git show REV:observers/histogram_combine.cpp | sed 's/namespace pt2q {/namespace pt2q_old {/; s/} *\/\/ namespace pt2q$/}/; s/observers\/histogram_combine.h/old_combine.h/' > /tmp/old_combine.cpp
//   git show REV:observers/histogram_combine.h | sed 's/namespace pt2q {/namespace pt2q_old {/; s/} *\/\/ namespace pt2q$/}/' > /tmp/old_combine.h
//   g++ -O3 -DNDEBUG -ffp-contract=off -std=gnu++17 -I. -I/tmp -I$TI -I$TI/torch/csrc/api/include tools/cpu/upsample_ab.cpp \
//       observers/histogram_combine.cpp /tmp/old_combine.cpp -L$TL -ltorch_cpu -lc10 -Wl,-rpath,$TL -o /tmp/upsample_ab
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "observers/histogram_combine.h"
#include "old_combine.h"

namespace {

struct Carry {
  std::vector<float> mids = std::vector<float>(32769), edges = std::vector<float>(2049);
  float half;
  Carry(double omin, double omax, double lo, double hi) {
    pt2q::linspaceLikeATen(omin, omax, 32769, mids.data());
    pt2q::linspaceLikeATen(lo, hi, 2049, edges.data());
    half = 0.5f * static_cast<float>((static_cast<float>(omax) - static_cast<float>(omin)) / 32768.0f);
  }
};

}  // namespace

int main() {
  std::mt19937 g(1);
  std::normal_distribution<float> d;
  const double lo0 = -4.2, hi0 = 4.4;
  std::vector<float> counts(2048, 0.0f);
  for (int i = 0; i < 98304; ++i) {
    const float v = d(g);
    if (v >= lo0 && v <= hi0) counts[static_cast<size_t>(std::min(2047.0, std::floor((v - lo0) * 2048 / (hi0 - lo0))))] += 1;
  }
  std::vector<float> carried = counts;
  double lo = lo0, hi = hi0;
  for (int k = 0; k < 29; ++k) {
    const Carry c(lo, hi, lo * 1.01, hi * 1.01);
    std::vector<float> moved(2048, 0.0f);
    pt2q::upsampleHistogram(carried.data(), 2048, 16, c.mids.data(), c.half, c.edges.data(), moved.data());
    for (int b = 0; b < 2048; ++b) carried[b] = moved[b] + counts[b];
    lo *= 1.01;
    hi *= 1.01;
  }
  for (int which = 0; which < 2; ++which) {
    const std::vector<float>& src = which ? carried : counts;
    const Carry c(which ? lo : lo0, which ? hi : hi0, (which ? lo : lo0) * 1.03, (which ? hi : hi0) * 1.02);
    double best_old = 1e9, best_new = 1e9;
    bool same = true;
    for (int r = 0; r < 200; ++r) {
      std::vector<float> mo(2048, 0.0f), mn(2048, 0.0f);
      const auto t0 = std::chrono::steady_clock::now();
      pt2q_old::upsampleHistogram(src.data(), 2048, 16, c.mids.data(), c.half, c.edges.data(), mo.data());
      const auto t1 = std::chrono::steady_clock::now();
      pt2q::upsampleHistogram(src.data(), 2048, 16, c.mids.data(), c.half, c.edges.data(), mn.data());
      const auto t2 = std::chrono::steady_clock::now();
      best_old = std::min(best_old, std::chrono::duration<double, std::micro>(t1 - t0).count());
      best_new = std::min(best_new, std::chrono::duration<double, std::micro>(t2 - t1).count());
      same = same && std::memcmp(mo.data(), mn.data(), mo.size() * sizeof(float)) == 0;
    }
    std::printf("%-30s old %6.1f us  new %6.1f us  new/old speed %.2fx  same %d\n",
                which ? "histogram carried 29 times" : "histogram of counts", best_old, best_new, best_old / best_new,
                same);
  }
}
