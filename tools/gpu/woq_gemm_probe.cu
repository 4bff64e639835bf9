// Experiment driver for the GPU machine (not a test; tests/kernels/test_linear_woq_cuda.py is):
// the weight-only wgmma GEMM (linear_w8a16 / linear_w4a16 from 64 rows), or with --gemv the
// tensor-core GEMV (linear_woq_mma_kernels.cu, up to 63 rows), of this tree against another
// revision's, in one process. The two must agree bit for bit (the numerics are fixed:
// dequantWeight's rounded weight, fp32 sums in the kernel's order), on edge shapes, every scale
// layout, zero points, forced splits and scales that leave the fast decode (0, subnormal, huge,
// inf, NaN; huge zero points). Then both are timed alternately on the benchmark shapes (CUDA
// graphs of 8 to 32 calls rotating over weight copies, events around each replay; medians of 15).
//   mkdir -p /tmp/ab/kernels/cuda && for f in linear_woq_wgmma_kernels.cu woq_gemm.cuh wgmma.cuh; do
//     git show REV:kernels/cuda/$f > /tmp/ab/kernels/cuda/$f; done
//   nvcc -std=c++17 -I/tmp/ab -I. --fmad=false -gencode arch=compute_90a,code=sm_90a -c -Dpt2q=pt2q_ab \
//     /tmp/ab/kernels/cuda/linear_woq_wgmma_kernels.cu -o /tmp/ab_old.o
//   nvcc -std=c++17 -I. --fmad=false -gencode arch=compute_90a,code=sm_90a tools/gpu/woq_gemm_probe.cu \
//     kernels/cuda/linear_woq_wgmma_kernels.cu /tmp/ab_old.o -o /tmp/woq_gemm_probe
//   /tmp/woq_gemm_probe [--gemv] [--profile]   (--profile: one call of each version, for Nsight Compute)
// --gemv also needs linear_woq_mma_kernels.cu (mma_tiles.cuh) of both revisions: add the file to
// the first two lines, link kernels/cuda/linear_woq_mma_kernels.cu and /tmp/ab_mma.o as well
// (arch compute_90a is fine for it).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/linear_woq_cuda_kernels.h"
#include "tools/gpu/probe_check.cuh"

// The other revision's entry points (same declarations, namespace pt2q_ab).
namespace pt2q_ab::cuda {
enum class FloatType : uint8_t { kF32, kBF16, kF16 };
struct WoqGemv {
  const int8_t* packed = nullptr;
  int bits = 8;
  int64_t n = 0, k = 0;
  int64_t groups = 1, group_size = 0;
  const float* scales = nullptr;
  const float* zero_points = nullptr;
  const void* x = nullptr;
  FloatType xt = FloatType::kF32;
  int64_t m = 1;
  const float* bias = nullptr;
  void* y = nullptr;
  int sm_count = 132;
};
bool linearWeightOnlyWgmmaTakes(const WoqGemv& a);
int linearWeightOnlyWgmmaSplits(const WoqGemv& a);
cudaError_t linearWeightOnlyWgmma(const WoqGemv& a, int splits, cudaStream_t stream);
cudaError_t linearWeightOnlyMma(const WoqGemv& a, cudaStream_t stream);
}  // namespace pt2q_ab::cuda

namespace {

namespace cu = pt2q::cuda;
namespace ab = pt2q_ab::cuda;

bool gemv = false;  // --gemv: the GEMV (splits are its own; the case's are ignored)

bool takes(const cu::WoqGemv& a) {
  return gemv ? a.m <= 63 && a.k % (a.bits == 8 ? 16 : 32) == 0 : cu::linearWeightOnlyWgmmaTakes(a);
}
int splitsOf(const cu::WoqGemv& a, int forced) {
  return gemv ? 0 : forced ? forced : cu::linearWeightOnlyWgmmaSplits(a);
}
cudaError_t runNew(const cu::WoqGemv& a, int splits, cudaStream_t st = nullptr) {
  return gemv ? cu::linearWeightOnlyMma(a, st) : cu::linearWeightOnlyWgmma(a, splits, st);
}
cudaError_t runOld(const ab::WoqGemv& a, int splits, cudaStream_t st = nullptr) {
  return gemv ? ab::linearWeightOnlyMma(a, st) : ab::linearWeightOnlyWgmma(a, splits, st);
}

// The floor of a call under PROBE_SWEEP: a one-block kernel that does no more than a store.
__global__ void storeOnce(float* p) { p[threadIdx.x] += 1.0f; }

ab::WoqGemv asOld(const cu::WoqGemv& a) {
  ab::WoqGemv o;
  o.packed = a.packed, o.bits = a.bits, o.n = a.n, o.k = a.k, o.groups = a.groups, o.group_size = a.group_size;
  o.scales = a.scales, o.zero_points = a.zero_points, o.x = a.x, o.m = a.m, o.bias = a.bias, o.y = a.y;
  o.xt = static_cast<ab::FloatType>(a.xt);
  o.sm_count = a.sm_count;
  return o;
}

int64_t packedBytes(int bits, int64_t n, int64_t k) { return (n + 3) / 4 * 4 * k / (bits == 8 ? 1 : 2); }

struct Case {
  int bits;
  cu::FloatType xt;
  int64_t m, n, k, group_size;  // group_size 0: per channel
  bool zp;
  int splits;     // 0: the kernel's rule
  int odd = 0;    // 1: some scales 0 / subnormal / huge / inf / NaN, 2: huge zero points
};

struct Buffers {
  int8_t* packed;
  float *scales, *zp, *bias;
  void *x, *y_new, *y_old;
};

std::mt19937 rng(1234);

Buffers make(const Case& c, cu::WoqGemv* a, int copies = 1) {
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  const int64_t groups = c.group_size == 0 ? 1 : c.k / c.group_size;
  const int64_t pbytes = packedBytes(c.bits, c.n, c.k);
  std::vector<uint32_t> packed((pbytes + 3) / 4);
  for (auto& w : packed) w = static_cast<uint32_t>(rng());
  std::vector<float> scales(c.n * groups), zp(c.n * groups), bias(c.n);
  for (auto& s : scales) s = std::ldexp(1.0f + 0.5f * uni(rng), -6 - static_cast<int>(byte(rng) % 4));
  for (auto& z : zp) z = c.bits == 8 ? static_cast<float>(byte(rng) - 128) : static_cast<float>(byte(rng) % 16);
  for (auto& b : bias) b = uni(rng);
  if (c.odd == 1) {
    const float odd[] = {0.0f, 1e-40f, 3e-39f, 1e35f, 5e31f, INFINITY, NAN, -0.02f};
    for (size_t i = 0; i < scales.size(); i += 7) scales[i] = odd[(i / 7) % 8];
  } else if (c.odd == 2) {
    for (size_t i = 0; i < zp.size(); i += 5) zp[i] = (i % 2 ? 1.0f : -1.0f) * static_cast<float>(70000 + i);
  }
  const int esize = 2;
  std::vector<uint16_t> x(c.m * c.k);
  for (auto& v : x) {
    const float f = uni(rng);
    if (c.xt == cu::FloatType::kBF16) {
      const __nv_bfloat16 h = __float2bfloat16(f);
      std::memcpy(&v, &h, 2);
    } else {
      const __half h = __float2half(f);
      std::memcpy(&v, &h, 2);
    }
  }
  Buffers b;
  // one random copy, repeated (the copies only keep the weight out of the L2)
  CK(cudaMalloc(&b.packed, pbytes * copies + 16));
  CK(cudaMemcpy(b.packed, packed.data(), pbytes, cudaMemcpyHostToDevice));
  for (int i = 1; i < copies; ++i) CK(cudaMemcpy(b.packed + i * pbytes, b.packed, pbytes, cudaMemcpyDeviceToDevice));
  b.scales = upload(scales);
  b.zp = upload(zp);
  b.bias = upload(bias);
  b.x = upload(x);
  CK(cudaMalloc(&b.y_new, c.m * c.n * esize));
  CK(cudaMalloc(&b.y_old, c.m * c.n * esize));
  a->packed = b.packed;
  a->bits = c.bits;
  a->n = c.n, a->k = c.k, a->groups = groups, a->group_size = c.group_size == 0 ? c.k : c.group_size;
  a->scales = b.scales;
  a->zero_points = c.zp ? b.zp : nullptr;
  a->x = b.x;
  a->xt = c.xt;
  a->m = c.m;
  a->bias = b.bias;
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  a->sm_count = prop.multiProcessorCount;
  return b;
}

void release(Buffers& b) {
  CK(cudaFree(b.packed));
  CK(cudaFree(b.scales));
  CK(cudaFree(b.zp));
  CK(cudaFree(b.bias));
  CK(cudaFree(b.x));
  CK(cudaFree(b.y_new));
  CK(cudaFree(b.y_old));
}

std::string name(const Case& c) {
  char s[160];
  std::snprintf(s, sizeof s, "W%dA16 %s m=%lld n=%lld k=%lld %s%s splits=%d%s", c.bits,
                c.xt == cu::FloatType::kBF16 ? "bf16" : "fp16", (long long)c.m, (long long)c.n, (long long)c.k,
                c.group_size == 0 ? "per-channel" : ("g" + std::to_string(c.group_size)).c_str(), c.zp ? " zp" : "",
                c.splits, c.odd == 1 ? " odd-scales" : c.odd == 2 ? " huge-zp" : "");
  return s;
}

// PROBE_ONLY="a|b": time only the cases whose name holds one of the substrings; PROBE_NOCHECK set:
// skip the bit-for-bit comparisons (for timing kernel variants built to leave a part out).
bool selected(const Case& c) {
  const char* only = std::getenv("PROBE_ONLY");
  if (only == nullptr || *only == 0) return true;
  const std::string n = name(c), pats = only;
  for (size_t p = 0; p <= pats.size();) {
    const size_t e = std::min(pats.find('|', p), pats.size());
    if (e > p && n.find(pats.substr(p, e - p)) != std::string::npos) return true;
    p = e + 1;
  }
  return false;
}

// The bit-for-bit pass's line (under PROBE_NOCHECK, that it was skipped: compare() then passes
// every case without running it).
void reportBitExact(int total, int bad) {
  if (std::getenv("PROBE_NOCHECK") != nullptr) {
    std::printf("bit-exact against the other revision: not checked (PROBE_NOCHECK)\n");
    return;
  }
  std::printf("bit-exact against the other revision: %d of %d cases %s\n", total - bad, total,
              bad ? "(MISMATCHES above)" : "ok");
}

// Runs both versions on one case; returns whether the outputs are equal bit for bit.
bool compare(const Case& c) {
  if (std::getenv("PROBE_NOCHECK") != nullptr) return true;
  cu::WoqGemv a;
  Buffers b = make(c, &a);
  if (!takes(a)) {
    std::printf("SKIP (not taken) %s\n", name(c).c_str());
    release(b);
    return true;
  }
  const int splits = splitsOf(a, c.splits);
  const int64_t bytes = c.m * c.n * 2;
  CK(cudaMemset(b.y_new, 0xA5, bytes));
  CK(cudaMemset(b.y_old, 0x5A, bytes));
  a.y = b.y_new;
  CK(runNew(a, splits));
  ab::WoqGemv o = asOld(a);
  o.y = b.y_old;
  CK(runOld(o, splits));
  CK(cudaDeviceSynchronize());
  std::vector<uint16_t> yn(c.m * c.n), yo(c.m * c.n);
  CK(cudaMemcpy(yn.data(), b.y_new, bytes, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(yo.data(), b.y_old, bytes, cudaMemcpyDeviceToHost));
  int64_t diff = 0, first = -1;
  for (int64_t i = 0; i < c.m * c.n; ++i) {
    if (yn[i] != yo[i]) {
      if (first < 0) first = i;
      ++diff;
    }
  }
  if (diff) {
    std::printf("MISMATCH %s: %lld of %lld differ, first at (%lld, %lld): new 0x%04x old 0x%04x\n", name(c).c_str(),
                (long long)diff, (long long)(c.m * c.n), (long long)(first / c.n), (long long)(first % c.n), yn[first],
                yo[first]);
  }
  release(b);
  return diff == 0;
}

float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Times both versions on one case (weights rotated over copies past the 50 MB L2).
void timeCase(const Case& c, bool profile) {
  if (!profile && !selected(c)) return;
  const int64_t pbytes = packedBytes(c.bits, c.n, c.k);
  const int copies = profile ? 1 : static_cast<int>(std::max<int64_t>(2, (160 << 20) / pbytes + 1));
  cu::WoqGemv a;
  Buffers b = make(c, &a, copies);
  a.y = b.y_new;
  const int splits = splitsOf(a, c.splits);
  ab::WoqGemv o = asOld(a);
  o.y = b.y_old;
  if (profile) {
    CK(runNew(a, splits));
    CK(runOld(o, splits));
    CK(cudaDeviceSynchronize());
    release(b);
    return;
  }
  // Each version as a CUDA graph of kCalls calls (the host's launch work, tensor maps included,
  // is out of the time, as in the benchmark), rotating over the weight copies.
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  // 8 to 32 calls over the copies, each at least once where there are at most 32: past the 50 MB
  // L2 for the benchmark shapes' weights (8 MiB and up), so that every call streams its weight.
  const int kCalls = std::max(8, std::min(copies, 32));
  CK(runNew(a, splits, st));  // first calls (shared-memory attributes) outside the capture
  CK(runOld(o, splits, st));
  cudaGraphExec_t exec[2];
  for (int which = 0; which < 2; ++which) {
    cudaGraph_t graph;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    for (int j = 0; j < kCalls; ++j) {
      a.packed = o.packed = b.packed + (j % copies) * pbytes;
      CK(which == 0 ? runNew(a, splits, st) : runOld(o, splits, st));
    }
    CK(cudaStreamEndCapture(st, &graph));
    CK(cudaGraphInstantiate(&exec[which], graph, 0));
    CK(cudaGraphDestroy(graph));
  }
  std::vector<float> tn, to;
  for (int rep = 0; rep < 18; ++rep) {
    for (int which = 0; which < 2; ++which) {
      CK(cudaEventRecord(e0, st));
      CK(cudaGraphLaunch(exec[which], st));
      CK(cudaEventRecord(e1, st));
      CK(cudaEventSynchronize(e1));
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      if (rep >= 3) (which == 0 ? tn : to).push_back(ms * 1000.0f / kCalls);
    }
  }
  CK(cudaGraphExecDestroy(exec[0]));
  CK(cudaGraphExecDestroy(exec[1]));
  CK(cudaStreamDestroy(st));
  const float n = median(tn), old = median(to);
  const double gbs = (pbytes + c.n * (c.group_size ? c.k / c.group_size : 1) * 4.0) / (n * 1e3);
  std::printf("%-62s new %8.1f us  old %8.1f us  old/new %.2fx  new %6.0f GB/s (weight + scales)\n",
              name(c).c_str(), n, old, old / n, gbs);
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  release(b);
}

}  // namespace

// The GEMV: bit for bit on edge shapes (rows 1..63, partial tiles and spans, short K that puts
// several tiles in a block, every span width), then timed at 1, 4 and 16 rows.
int mainGemv(bool profile) {
  const cu::FloatType bf = cu::FloatType::kBF16, hf = cu::FloatType::kF16;
  const int64_t bench[][2] = {{4096, 4096}, {11008, 4096}, {4096, 11008}, {14336, 4096}};
  if (profile) {
    for (int64_t m : {1, 16}) {
      timeCase({4, bf, m, 14336, 4096, 128, false, 0}, true);
      timeCase({8, bf, m, 14336, 4096, 0, false, 0}, true);
    }
    std::printf("profile calls done\n");
    return 0;
  }
  int bad = 0, total = 0;
  const int64_t gsizes[] = {0, 16, 32, 64, 128, 256};  // 16: int8 only (int4 groups are whole chunks)
  const int64_t shapes[][3] = {{1, 136, 256}, {2, 520, 1280}, {7, 1000, 4096 + 768}, {9, 264, 2304},
                               {16, 4100, 4096}, {33, 1000, 1024}, {63, 40, 512}, {1, 17, 96}};
  for (int bits : {4, 8}) {
    for (cu::FloatType xt : {bf, hf}) {
      for (int64_t gsz : gsizes) {
        for (bool zp : {false, true}) {
          for (const auto& sh : shapes) {
            if ((gsz != 0 && sh[2] % gsz != 0) || (bits == 4 && gsz == 16)) continue;
            ++total;
            bad += !compare({bits, xt, sh[0], sh[1], sh[2], gsz, zp, 0});
          }
        }
        if (bits == 4 && gsz == 16) continue;
        ++total;
        bad += !compare({bits, xt, 5, 520, 1280, gsz, true, 0, 1});
      }
    }
  }
  reportBitExact(total, bad);
  if (std::getenv("PROBE_SWEEP") != nullptr) {  // time against n: the slope is the bandwidth, the intercept the fixed cost
    {  // the floor: a graph of 32 one-block kernels that do nothing but one store
      cudaStream_t st;
      CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
      float* buf = nullptr;
      CK(cudaMalloc(&buf, 32 * sizeof(float)));
      cudaGraph_t graph;
      cudaGraphExec_t exec;
      CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
      for (int j = 0; j < 32; ++j) storeOnce<<<1, 32, 0, st>>>(buf);
      CK(cudaStreamEndCapture(st, &graph));
      CK(cudaGraphInstantiate(&exec, graph, 0));
      cudaEvent_t e0, e1;
      CK(cudaEventCreate(&e0));
      CK(cudaEventCreate(&e1));
      std::vector<float> t;
      for (int rep = 0; rep < 18; ++rep) {
        CK(cudaEventRecord(e0, st));
        CK(cudaGraphLaunch(exec, st));
        CK(cudaEventRecord(e1, st));
        CK(cudaEventSynchronize(e1));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (rep >= 3) t.push_back(ms * 1000.0f / 32);
      }
      std::printf("graph of 32 one-block kernels: %.2f us per kernel\n", median(t));
      CK(cudaGraphExecDestroy(exec));
      CK(cudaGraphDestroy(graph));
      CK(cudaEventDestroy(e0));
      CK(cudaEventDestroy(e1));
      CK(cudaStreamDestroy(st));
      CK(cudaFree(buf));
    }
    for (int64_t n : {16, 256, 1024, 2048, 4096, 8192, 16384, 32768}) {
      timeCase({4, bf, 1, n, 4096, 128, false, 0}, false);
      timeCase({8, bf, 1, n, 4096, 0, false, 0}, false);
    }
    return bad ? 1 : 0;
  }
  for (int64_t m : {1, 4, 16}) {
    for (const auto& s : bench) {
      timeCase({4, bf, m, s[0], s[1], 128, false, 0}, false);
      timeCase({8, bf, m, s[0], s[1], 0, false, 0}, false);
    }
  }
  timeCase({4, bf, 1, 4096, 4096, 128, true, 0}, false);
  timeCase({4, bf, 1, 4096, 4096, 32, false, 0}, false);
  timeCase({8, bf, 1, 4096, 4096, 128, true, 0}, false);
  timeCase({4, bf, 8, 14336, 4096, 128, false, 0}, false);
  timeCase({4, bf, 32, 14336, 4096, 128, false, 0}, false);
  return bad ? 1 : 0;
}

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IONBF, 0);  // what was printed survives a time limit
  bool profile = false;
  for (int i = 1; i < argc; ++i) {
    profile |= std::strcmp(argv[i], "--profile") == 0;
    gemv |= std::strcmp(argv[i], "--gemv") == 0;
  }
  if (gemv) return mainGemv(profile);
  const cu::FloatType bf = cu::FloatType::kBF16, hf = cu::FloatType::kF16;
  if (profile) {
    timeCase({4, bf, 128, 4096, 4096, 128, false, 0}, true);
    timeCase({4, bf, 128, 14336, 4096, 128, false, 0}, true);
    timeCase({8, bf, 128, 14336, 4096, 0, false, 0}, true);
    std::printf("profile calls done\n");
    return 0;
  }
  int bad = 0, total = 0;
  const int64_t gsizes[] = {0, 16, 32, 48, 64, 128, 256};
  const int64_t shapes[][3] = {{64, 136, 256}, {200, 520, 1280}, {256, 1000, 4096 + 768}, {129, 264, 2304}};
  for (int bits : {4, 8}) {
    for (cu::FloatType xt : {bf, hf}) {
      for (int64_t gsz : gsizes) {
        for (bool zp : {false, true}) {
          for (const auto& sh : shapes) {
            if (gsz != 0 && sh[2] % gsz != 0) continue;
            for (int splits : {0, 1, 3}) {
              ++total;
              bad += !compare({bits, xt, sh[0], sh[1], sh[2], gsz, zp, splits});
            }
          }
        }
        for (int odd : {1, 2}) {
          ++total;
          bad += !compare({bits, xt, 200, 520, 1280, gsz == 48 ? 64 : gsz, true, 0, odd});
          ++total;
          bad += !compare({bits, xt, 200, 520, 1280, gsz == 48 ? 64 : gsz, odd == 2, 2, odd});
        }
      }
    }
  }
  reportBitExact(total, bad);
  const int64_t bench[][2] = {{4096, 4096}, {11008, 4096}, {4096, 11008}, {14336, 4096}};
  for (int64_t m : {128, 256}) {
    for (const auto& s : bench) {
      timeCase({4, bf, m, s[0], s[1], 128, false, 0}, false);
      timeCase({8, bf, m, s[0], s[1], 0, false, 0}, false);
    }
  }
  for (int bits : {4, 8}) {
    for (const auto& s : bench) {
      for (int splits : {1, 2, 4, 8}) timeCase({bits, bf, 128, s[0], s[1], bits == 4 ? 128 : 0, false, splits}, false);
    }
  }
  timeCase({4, bf, 128, 4096, 4096, 128, true, 0}, false);
  timeCase({4, bf, 128, 4096, 4096, 32, false, 0}, false);
  timeCase({8, bf, 128, 4096, 4096, 128, true, 0}, false);
  return bad ? 1 : 0;
}
