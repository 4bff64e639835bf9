// Same-process A/B of the AVX2 int8 dot-product panel (linear_q8 / conv2d_q8 / linear_w8a8's
// `w8_dot`, kernels/cpu/linear_int8_impl.h) of this tree (A) against a variant (B): the avx2 table
// built a second time under another namespace from a copy of the headers that holds the change.
// Best of 200 alternating calls, one thread, on shapes of the digits demo's convolutions (im2col
// rows of one parallel task) and of a linear panel; "same" says whether both gave the same floats.
// Build (from the repo root; TI / TL as in histc_ab.cpp; put the changed linear_int8_impl.h under
// /tmp/alt/kernels/cpu/):
//   sed 's/linear_avx2/linear_avx2_b/g; s/linearKernelsAvx2/linearKernelsAvx2B/g' \
//       kernels/cpu/x86_avx2/linear_avx2.cpp > /tmp/alt/linear_avx2_b.cpp
//   FL="-O3 -DNDEBUG -std=gnu++17 -mavx2 -mfma -mf16c -I. -I$TI -I$TI/torch/csrc/api/include"
//   g++ $FL -c kernels/cpu/x86_avx2/linear_avx2.cpp -o /tmp/la.o
//   g++ $FL -I/tmp/alt -c /tmp/alt/linear_avx2_b.cpp -o /tmp/lb.o
//   g++ -O2 -std=gnu++17 -I. -I$TI -c tools/cpu/q8dot_ab.cpp -o /tmp/q8m.o
//   g++ /tmp/q8m.o /tmp/la.o /tmp/lb.o -L$TL -ltorch_cpu -lc10 -Wl,-rpath,$TL -o /tmp/q8dot_ab
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "kernels/cpu/linear_microkernels.h"

namespace pt2q::cpu {
const LinearKernels& linearKernelsAvx2B();
}

int main() {
  using pt2q::cpu::LinearKernels;
  const LinearKernels& a = pt2q::cpu::linearKernelsAvx2();
  const LinearKernels& b = pt2q::cpu::linearKernelsAvx2B();
  struct Case {
    const char* name;
    int64_t blocks, chunks, rows;
  };
  for (const Case& cs : {Case{"conv 16 -> 32 3x3: k 144, 1024 rows", 8, 9, 1024},
                         Case{"conv 1 -> 16 3x3: k 9 (16), 2048 rows", 4, 1, 2048},
                         Case{"linear panel: 64 outputs, k 4096, 64 rows", 16, 256, 64},
                         Case{"linear: 64 outputs, k 512, 64 rows", 16, 32, 64}}) {
    std::mt19937 g(1);
    std::vector<int8_t> w(static_cast<size_t>(cs.blocks * cs.chunks * 64));
    for (auto& v : w) v = static_cast<int8_t>(static_cast<int>(g() % 256) - 128);
    const int64_t xs = cs.chunks * 16 + 64;
    std::vector<uint8_t> xu(static_cast<size_t>(cs.rows * xs));
    for (auto& v : xu) v = static_cast<uint8_t>(g() % 256);
    std::vector<int32_t> zx(static_cast<size_t>(cs.rows), 3), sums(static_cast<size_t>(cs.blocks * 16));
    std::vector<float> s4(static_cast<size_t>(cs.blocks * 4), 0.01f);
    a.w8_sums(w.data(), cs.blocks, cs.chunks, cs.chunks, sums.data());
    std::vector<float> oa(static_cast<size_t>(cs.rows * cs.blocks * 4)), ob(oa.size());
    double ta = 1e9, tb = 1e9;
    for (int r = 0; r < 200; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      a.w8_dot(w.data(), cs.blocks, cs.chunks, cs.chunks, xu.data(), xs, cs.rows, zx.data(), s4.data(), sums.data(),
               oa.data(), cs.blocks * 4);
      const auto t1 = std::chrono::steady_clock::now();
      b.w8_dot(w.data(), cs.blocks, cs.chunks, cs.chunks, xu.data(), xs, cs.rows, zx.data(), s4.data(), sums.data(),
               ob.data(), cs.blocks * 4);
      const auto t2 = std::chrono::steady_clock::now();
      ta = std::min(ta, std::chrono::duration<double, std::micro>(t1 - t0).count());
      tb = std::min(tb, std::chrono::duration<double, std::micro>(t2 - t1).count());
    }
    const double macs = static_cast<double>(cs.rows) * cs.blocks * 4 * cs.chunks * 16;
    std::printf("%-42s A %8.1f us (%5.1f MAC/ns)  B %8.1f us (%5.1f MAC/ns)  A/B %.2fx  same %d\n", cs.name, ta,
                macs / ta / 1e3, tb, macs / tb / 1e3, ta / tb, static_cast<int>(oa == ob));
  }
}
