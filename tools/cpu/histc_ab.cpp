// Same-process A/B of HistogramObserver's counting pass (observers/histogram_count.cpp) of this
// tree against another revision's, on the same data: microseconds a call (best of 40,
// alternating the two), randn and ReLU-like activations of 98304 and 786432 elements over their
// own range (what a batch inside the running range costs), 1 and 2 threads; "same" says whether
// both gave the same counts and the same verdict on the range. Then batches streamed from memory:
// six randn batches of 32x64x56x56 (25.7 MB each) counted in turn, median of 8 rounds. Build (from the repo root; TI and TL
// are torch's include and lib folders, `python -c "import torch.utils.cpp_extension as c; print(c.include_paths(), c.library_paths())"`):
//   git show REV:observers/histogram_count.cpp | sed 's/namespace pt2q {/namespace pt2q_old {/; s/} *\/\/ namespace pt2q$/}/; s/observers\/histogram_count.h/old_count.h/' > /tmp/old_count.cpp
//   git show REV:observers/histogram_count.h | sed 's/namespace pt2q {/namespace pt2q_old {/; s/} *\/\/ namespace pt2q$/}/' > /tmp/old_count.h
//   g++ -O3 -DNDEBUG -ffp-contract=off -std=gnu++17 -fopenmp -I. -I/tmp -I$TI -I$TI/torch/csrc/api/include tools/cpu/histc_ab.cpp \
//       observers/histogram_count.cpp /tmp/old_count.cpp -L$TL -ltorch_cpu -lc10 -Wl,-rpath,$TL -o /tmp/histc_ab
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "observers/histogram_count.h"
#include "old_count.h"

int main() {
  for (int64_t n : {98304, 786432}) {
    for (bool relu : {false, true}) {
      std::mt19937 g(1);
      std::normal_distribution<float> d;
      std::vector<float> x(static_cast<size_t>(n));
      for (float& v : x) v = relu ? std::max(d(g), 0.0f) : d(g);
      const float lo = *std::min_element(x.begin(), x.end()), hi = *std::max_element(x.begin(), x.end());
      for (int threads : {1, 2}) {
        at::set_num_threads(threads);
        double best_old = 1e9, best_new = 1e9;
        bool same = true;
        for (int r = 0; r < 40; ++r) {
          std::vector<uint32_t> co(2048, 0), cn(2048, 0);
          pt2q::CountStats so, sn;
          pt2q_old::CountStats so_raw;
          auto t0 = std::chrono::steady_clock::now();
          pt2q_old::histcCount(x.data(), n, lo, hi, 2048, co, &so_raw, true);
          auto t1 = std::chrono::steady_clock::now();
          pt2q::histcCount(x.data(), n, lo, hi, 2048, cn, &sn, true);
          auto t2 = std::chrono::steady_clock::now();
          best_old = std::min(best_old, std::chrono::duration<double, std::micro>(t1 - t0).count());
          best_new = std::min(best_new, std::chrono::duration<double, std::micro>(t2 - t1).count());
          same = same && co == cn && so_raw.outside == sn.outside;
        }
        std::printf("n %7lld %-5s threads %d: old %7.1f us  new %7.1f us  new/old speed %.2fx  same %d\n",
                    static_cast<long long>(n), relu ? "relu" : "randn", threads, best_old, best_new,
                    best_old / best_new, same);
      }
    }
  }
  const int64_t n = 32 * 64 * 56 * 56;
  std::vector<std::vector<float>> xs(6);
  std::mt19937 g(1);
  std::normal_distribution<float> d;
  for (auto& x : xs) {
    x.resize(static_cast<size_t>(n));
    for (float& v : x) v = d(g);
  }
  for (int threads : {1, 2}) {
    at::set_num_threads(threads);
    std::vector<double> t_old, t_new;
    bool same = true;
    for (int r = 0; r < 8; ++r) {
      double a = 0, b = 0;
      for (size_t k = 0; k < xs.size(); ++k) {
        std::vector<uint32_t> co(2048, 0), cn(2048, 0);
        pt2q::CountStats sn;
        pt2q_old::CountStats so;
        auto t0 = std::chrono::steady_clock::now();
        pt2q_old::histcCount(xs[k].data(), n, -7.0f, 7.0f, 2048, co, &so, true);
        auto t1 = std::chrono::steady_clock::now();
        pt2q::histcCount(xs[(k + 3) % xs.size()].data(), n, -7.0f, 7.0f, 2048, cn, &sn, true);
        auto t2 = std::chrono::steady_clock::now();
        a += std::chrono::duration<double, std::milli>(t1 - t0).count();
        b += std::chrono::duration<double, std::milli>(t2 - t1).count();
        same = same && so.outside == sn.outside;
      }
      t_old.push_back(a / static_cast<double>(xs.size()));
      t_new.push_back(b / static_cast<double>(xs.size()));
    }
    std::sort(t_old.begin(), t_old.end());
    std::sort(t_new.begin(), t_new.end());
    std::printf("n %lld streamed threads %d: old %.2f ms  new %.2f ms (medians)  new/old speed %.2fx  same %d\n",
                static_cast<long long>(n), threads, t_old[4], t_new[4], t_old[4] / t_new[4], same);
  }
}
