// Same-process A/B of the weight-only block kernels (linear_kernels_impl.h's block4, AVX2 build)
// of this tree against another revision's, on the same weights: bytes of weights a second with
// them in the L2 (1 MiB, reused) and streamed from memory (256 MiB), 1 and 2 threads, int8 and
// int4, 1 and 2 rows of x; "same" says whether both gave the same bits. Build (from the repo root):
//   git show REV:kernels/cpu/linear_kernels_impl.h | sed '/linear_int8_impl.h/,$d; /pragma once/d' > /tmp/old_impl.h
//   sed '/linear_int8_impl.h/,$d; /pragma once/d' kernels/cpu/linear_kernels_impl.h > /tmp/new_impl.h
//   g++ -O3 -DNDEBUG -ffp-contract=off -std=gnu++17 -mavx2 -mfma -mf16c -I. -I/tmp tools/cpu/block_ab.cpp -lpthread -o /tmp/block_ab
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>
#define PT2Q_VEC_AVX2
#define PT2Q_CPU_ISA_NS oldk
#include "old_impl.h"
#undef PT2Q_CPU_ISA_NS
#define PT2Q_CPU_ISA_NS newk
#include "new_impl.h"
using namespace pt2q::cpu;
int main() {
  const int64_t K = 4096;
  for (int64_t mib : {1, 256}) for (int threads : {1, 2}) for (int bits : {8, 4}) for (int mx : {1, 2}) {
    const int64_t chunkK = bits == 4 ? 32 : 16, chunks = K / chunkK, bbytes = chunks * 64;
    const int64_t blocks = (mib << 20) / bbytes;
    std::vector<int8_t> w(blocks * bbytes); for (auto& b : w) b = rand();
    std::vector<float> x(2 * K); for (auto& v : x) v = rand() / (float)RAND_MAX - 0.5f;
    const int64_t gc = bits == 4 ? 128 / chunkK : chunks, groups = chunks / gc;
    std::vector<float> s(blocks * 4 * groups, 0.01f), oo(blocks * 8), on(blocks * 8);
    using F = void (*)(const int8_t*, const float*, int64_t, int64_t, int64_t, int64_t, const float*, int64_t, float*);
    F fo = bits == 4 ? &oldk::block4Rows<oldk::DecodeI4> : &oldk::block4Rows<oldk::DecodeI8>;
    F fn = bits == 4 ? &newk::block4Rows<newk::DecodeI4> : &newk::block4Rows<newk::DecodeI8>;
    const int reps = mib == 1 ? 50 : 1;
    auto pass = [&](F f, std::vector<float>& out) {
      auto t0 = std::chrono::steady_clock::now();
      std::vector<std::thread> ts;
      for (int t = 0; t < threads; ++t) ts.emplace_back([&, t] {
        for (int r = 0; r < reps; ++r)
          for (int64_t b = t * blocks / threads; b < (t + 1) * blocks / threads; ++b)
            f(w.data() + b * bbytes, x.data(), K, mx, chunks, gc, s.data() + b * 4 * groups, groups, out.data() + 8 * b);
      });
      for (auto& t : ts) t.join();
      return (double)w.size() * reps / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 1e9;
    };
    double bo = 0, bn = 0;
    for (int r = 0; r < 9; ++r) { bo = std::max(bo, pass(fo, oo)); bn = std::max(bn, pass(fn, on)); }
    printf("%s %d thr W%d x rows %d: old %5.1f new %5.1f GB/s of weights  new/old %.2fx  same %d\n",
           mib == 1 ? "L2  " : "DRAM", threads, bits, mx, bo, bn, bn / bo, oo == on);
  }
}
