// Experiment driver for the GPU machine (not a test; tests/kernels/test_affine_cuda.py and
// tests/mx/test_mx_cuda.py are): the affine and MX fake-quantize kernels of this tree against
// those of another revision, in one process. Both outputs are compared bit for bit, and both
// versions are timed on 64 Mi elements (CUDA events, medians of 40 calls, the two versions
// alternating), beside a device-to-device copy of the same bytes.
//   mkdir -p /tmp/ab/kernels/cuda && for f in affine_cuda_kernels.cu affine_cuda_vec_kernels.cu \
//     mx_cuda_kernels.cu; do git show REV:kernels/cuda/$f > /tmp/ab/kernels/cuda/$f; done   # + headers
//   nvcc -std=c++17 -I. --fmad=false -gencode arch=compute_90,code=sm_90 -c -Dpt2q=pt2q_ab -I/tmp/ab \
//     /tmp/ab/kernels/cuda/{affine_cuda_kernels,affine_cuda_vec_kernels,mx_cuda_kernels}.cu   (-o each)
//   nvcc -std=c++17 -I. --fmad=false -gencode arch=compute_90,code=sm_90 tools/gpu/fq_ab_probe.cu \
//     kernels/cuda/{affine_cuda_kernels,affine_cuda_vec_kernels,mx_cuda_kernels}.cu *.o -o /tmp/fq_ab
// The old objects' namespace is renamed by the macro, so both sets link into one binary.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <cuda_bf16.h>

#include "tools/gpu/probe_check.cuh"
#include "kernels/cuda/affine_cuda_kernels.h"
#include "kernels/cuda/mx_cuda_kernels.h"

// The other revision's entry points (same declarations, namespace pt2q_ab).
namespace pt2q_ab::cuda {
enum class FloatType : uint8_t { kF32, kBF16, kF16 };
enum class Domain : uint8_t { kInt, kFloat, kNone };
struct Layout {
  int ndim;
  int64_t sizes[8], block[8], qstride[8];
};
struct Params {
  int64_t qmin, qmax;
  Domain domain;
};
struct MxLaunch {
  bool is_int = false;
  int32_t emin = 0, m = 0, emax = 0;
  float max_norm = 0;
  uint8_t rounding = 0, scale_mode = 0;
  bool flush_fp32_subnorms = false;
  uint32_t random_key = 0;
  int64_t outer = 1, len = 1, inner = 1, block = 1;
  int32_t code_bits = 8, ebits = 0;
};
cudaError_t fakeQuantizeAffine(const void* x, FloatType xt, void* y, bool* mask, int64_t n, const Layout& layout,
                               const float* scale, const float* zp, const Params& p, cudaStream_t stream);
cudaError_t mxFakeQuantize(const void* x, void* y, FloatType t, const MxLaunch& c, cudaStream_t stream);
}  // namespace pt2q_ab::cuda

namespace {

namespace cu = pt2q::cuda;
namespace ab = pt2q_ab::cuda;

float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Medians (ms) of `reps` calls of each, alternating.
std::pair<float, float> timeBoth(const std::function<void()>& a, const std::function<void()>& b, int reps = 40) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::vector<float> ta, tb;
  for (int i = 0; i < 5; ++i) a(), b();
  for (int r = 0; r < reps; ++r) {
    for (int w = 0; w < 2; ++w) {
      CK(cudaEventRecord(e0));
      (w == 0 ? a : b)();
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      float ms;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      (w == 0 ? ta : tb).push_back(ms);
    }
  }
  return {median(ta), median(tb)};
}

bool sameBytes(const void* a, const void* b, size_t n) {
  std::vector<char> ha(n), hb(n);
  CK(cudaMemcpy(ha.data(), a, n, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hb.data(), b, n, cudaMemcpyDeviceToHost));
  return std::memcmp(ha.data(), hb.data(), n) == 0;
}

__global__ void fillRandom(uint16_t* bf, float* f, int64_t n, uint32_t seed) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  uint32_t h = static_cast<uint32_t>(i) * 0x9E3779B1u ^ seed;
  h ^= h >> 15, h *= 0x2C1B3C6Du, h ^= h >> 12, h *= 0x297A2D39u, h ^= h >> 15;
  // Roughly normal-ish magnitudes over several binades, both signs; every 4097th element 0.
  const float u = (h >> 8) * (1.0f / 16777216.0f);
  float v = (u - 0.5f) * 6.0f * ((h & 7) == 0 ? 40.0f : 1.0f);
  if (i % 4097 == 0) v = 0.0f;
  f[i] = v;
  bf[i] = __bfloat16_as_ushort(__float2bfloat16_rn(v));
}

}  // namespace

int main() {
  const int64_t rows = 4096, cols = 16384, n = rows * cols;
  uint16_t *xb, *yb0, *yb1;
  float *xf, *yf0, *yf1, *scale, *zp;
  bool *m0, *m1;
  CK(cudaMalloc(&xb, n * 2));
  CK(cudaMalloc(&yb0, n * 2));
  CK(cudaMalloc(&yb1, n * 2));
  CK(cudaMalloc(&xf, n * 4));
  CK(cudaMalloc(&yf0, n * 4));
  CK(cudaMalloc(&yf1, n * 4));
  CK(cudaMalloc(&m0, n));
  CK(cudaMalloc(&m1, n));
  CK(cudaMalloc(&scale, rows * cols / 8 * 4));  // enough for every layout below
  CK(cudaMalloc(&zp, rows * cols / 8 * 4));
  fillRandom<<<static_cast<unsigned>((n + 255) / 256), 256>>>(xb, xf, n, 12345u);
  {
    std::vector<float> hs(rows * cols / 8), hz(rows * cols / 8);
    for (size_t i = 0; i < hs.size(); ++i) hs[i] = 0.01f + 0.05f * ((i * 2654435761u) % 1000) / 1000.0f;
    for (size_t i = 0; i < hz.size(); ++i) hz[i] = static_cast<float>(static_cast<int>((i * 40503u) % 21) - 10);
    CK(cudaMemcpy(scale, hs.data(), hs.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(zp, hz.data(), hz.size() * 4, cudaMemcpyHostToDevice));
  }
  CK(cudaDeviceSynchronize());

  const auto copy_ms = timeBoth([&] { CK(cudaMemcpyAsync(yf0, xf, n * 4, cudaMemcpyDeviceToDevice)); },
                                [&] { CK(cudaMemcpyAsync(yb0, xb, n * 2, cudaMemcpyDeviceToDevice)); });
  const double copy_gbs = 2.0 * n * 4 / (copy_ms.first * 1e6);
  std::printf("# copy probe: %.0f GB/s (fp32 %lld elements, read + write); bf16 copy %.0f GB/s\n", copy_gbs,
              static_cast<long long>(n), 2.0 * n * 2 / (copy_ms.second * 1e6));
  std::printf("| case | old ms | new ms | new %% BW | speed-up | bits |\n|---|---|---|---|---|---|\n");
  int failures = 0;
  auto report = [&](const std::string& name, std::pair<float, float> t, double bytes, bool same) {
    failures += !same;
    std::printf("| %s | %.3f | %.3f | %.1f | %.2fx | %s |\n", name.c_str(), t.first, t.second,
                100.0 * bytes / (t.second * 1e6) / copy_gbs, t.first / t.second, same ? "same" : "DIFFER");
  };

  // Affine: [4096, 16384], int8 codes, integer zero points.
  struct AffineCase {
    const char* name;
    int64_t block0, block1;
    bool mask;
  };
  for (const bool bf : {true, false}) {
    for (const AffineCase& a : {AffineCase{"per tensor", rows, cols, false}, AffineCase{"per channel axis 0", 1, cols, false},
                                AffineCase{"per channel last axis", rows, 1, false},
                                AffineCase{"groups of 128 last axis", 1, 128, false},
                                AffineCase{"cachemask per channel axis 0", 1, cols, true}}) {
      if (!bf && a.mask) continue;
      cu::Layout l{};
      l.ndim = 2;
      l.sizes[0] = rows, l.sizes[1] = cols, l.block[0] = a.block0, l.block[1] = a.block1;
      l.qstride[1] = 1, l.qstride[0] = (cols + a.block1 - 1) / a.block1;
      ab::Layout lo{};
      std::memcpy(&lo, &l, sizeof(lo));
      const cu::Params p{-128, 127, cu::Domain::kInt};
      const ab::Params po{-128, 127, ab::Domain::kInt};
      const auto ft = bf ? cu::FloatType::kBF16 : cu::FloatType::kF32;
      const void* x = bf ? static_cast<const void*>(xb) : xf;
      void* y0 = bf ? static_cast<void*>(yb0) : yf0;
      void* y1 = bf ? static_cast<void*>(yb1) : yf1;
      const auto t = timeBoth(
          [&] { CK(ab::fakeQuantizeAffine(x, static_cast<ab::FloatType>(ft), y0, a.mask ? m0 : nullptr, n, lo, scale, zp, po, nullptr)); },
          [&] { CK(cu::fakeQuantizeAffine(x, ft, y1, a.mask ? m1 : nullptr, n, l, scale, zp, p, nullptr)); });
      const size_t es = bf ? 2 : 4;
      const bool same = sameBytes(y0, y1, n * es) && (!a.mask || sameBytes(m0, m1, n));
      report(std::string("affine fake_quantize ") + (bf ? "bf16 " : "fp32 ") + a.name, t,
             2.0 * n * es + (a.mask ? n : 0), same);
    }
  }

  // MX: blocks of 32, floor scales.
  struct MxCase {
    const char* name;
    bool is_int;
    int emin, m, emax;
    float max_norm;
    int rounding;
    bool axis0;
  };
  for (const bool bf : {true, false}) {
    for (const MxCase& c : {MxCase{"int8 nearest last axis", true, 0, 6, 0, 1.984375f, 0, false},
                            MxCase{"int8 stochastic last axis", true, 0, 6, 0, 1.984375f, 3, false},
                            MxCase{"fp8_e4m3 nearest last axis", false, -6, 3, 8, 448.0f, 0, false},
                            MxCase{"fp4_e2m1 nearest last axis", false, 0, 1, 2, 6.0f, 0, false},
                            MxCase{"fp4_e2m1 stochastic last axis", false, 0, 1, 2, 6.0f, 3, false},
                            MxCase{"int8 nearest axis 0", true, 0, 6, 0, 1.984375f, 0, true},
                            MxCase{"fp8_e4m3 nearest axis 0", false, -6, 3, 8, 448.0f, 0, true},
                            MxCase{"fp4_e2m1 stochastic axis 0", false, 0, 1, 2, 6.0f, 3, true}}) {
      cu::MxLaunch k;
      k.is_int = c.is_int, k.emin = c.emin, k.m = c.m, k.emax = c.emax, k.max_norm = c.max_norm;
      k.rounding = static_cast<uint8_t>(c.rounding), k.random_key = 0x1234567u, k.block = 32;
      if (c.axis0) {
        k.outer = 1, k.len = rows, k.inner = cols;
      } else {
        k.outer = rows, k.len = cols, k.inner = 1;
      }
      ab::MxLaunch ko;
      ko.is_int = k.is_int, ko.emin = k.emin, ko.m = k.m, ko.emax = k.emax, ko.max_norm = k.max_norm;
      ko.rounding = k.rounding, ko.random_key = k.random_key, ko.block = k.block;
      ko.outer = k.outer, ko.len = k.len, ko.inner = k.inner;
      const auto ft = bf ? cu::FloatType::kBF16 : cu::FloatType::kF32;
      const void* x = bf ? static_cast<const void*>(xb) : xf;
      void* y0 = bf ? static_cast<void*>(yb0) : yf0;
      void* y1 = bf ? static_cast<void*>(yb1) : yf1;
      const auto t = timeBoth([&] { CK(ab::mxFakeQuantize(x, y0, static_cast<ab::FloatType>(ft), ko, nullptr)); },
                              [&] { CK(cu::mxFakeQuantize(x, y1, ft, k, nullptr)); });
      const size_t es = bf ? 2 : 4;
      report(std::string("mx_fake_quantize ") + (bf ? "bf16 " : "fp32 ") + c.name, t, 2.0 * n * es,
             sameBytes(y0, y1, n * es));
    }
  }
  std::printf(failures ? "BITS DIFFER in %d cases\n" : "all outputs identical (%d differences)\n", failures);
  return failures ? 1 : 0;
}
