// Experiment driver for the GPU machine (not a test; tests/kernels/test_linear_*_cuda.py are): the
// Hopper wgmma GEMM of linear_w8a8 / linear_q8 against the mma.sync GEMM, bit for bit on random
// and edge shapes, then both timed (CUDA events, 20 calls after 3).
//   nvcc -std=c++17 -I. --fmad=false -gencode arch=compute_90a,code=sm_90a tools/gpu/wgmma_probe.cu \
//     kernels/cuda/linear_dynamic_wgmma_kernels.cu kernels/cuda/linear_dynamic_gemm_kernels.cu \
//     kernels/cuda/linear_dynamic_cuda_kernels.cu -o /tmp/wgmma_probe && /tmp/wgmma_probe
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "tools/gpu/probe_check.cuh"
#include "kernels/cuda/linear_dynamic_cuda_kernels.h"

using namespace pt2q::cuda;

struct Problem {
  int64_t m, n, k;
  int8_t *codes, *packed;
  int32_t *zp, *row_sums;
  int8_t* rows;  // the wgmma GEMM's workspace: the weight unpacked to rows
  float *xs, *scales, *bias;
  void *y0, *y1;
  size_t ybytes;
};

Problem make(int64_t m, int64_t n, int64_t k, std::mt19937& rng) {
  Problem p{m, n, k};
  std::uniform_int_distribution<int> byte(-128, 127);
  std::uniform_real_distribution<float> u(0.001f, 0.01f), b(-1.0f, 1.0f);
  std::vector<int8_t> codes(m * k), packed(((n + 3) / 4) * k * 4);
  for (auto& c : codes) c = static_cast<int8_t>(byte(rng));
  for (auto& c : packed) c = static_cast<int8_t>(byte(rng));
  std::vector<int32_t> zp(m);
  for (auto& z : zp) z = byte(rng);
  std::vector<float> xs(m), scales(n), bias(n);
  for (auto& v : xs) v = u(rng);
  for (auto& v : scales) v = u(rng);
  for (auto& v : bias) v = b(rng);
  p.codes = upload(codes), p.packed = upload(packed), p.zp = upload(zp);
  p.xs = upload(xs), p.scales = upload(scales), p.bias = upload(bias);
  CK(cudaMalloc(&p.row_sums, n * 4));
  CK(cudaMalloc(&p.rows, n * k + 16));
  p.ybytes = m * n * 4;
  CK(cudaMalloc(&p.y0, p.ybytes));
  CK(cudaMalloc(&p.y1, p.ybytes));
  return p;
}

void release(Problem& p) {
  for (void* q : {static_cast<void*>(p.codes), static_cast<void*>(p.packed), static_cast<void*>(p.zp),
                  static_cast<void*>(p.row_sums), static_cast<void*>(p.rows), static_cast<void*>(p.xs), static_cast<void*>(p.scales),
                  static_cast<void*>(p.bias), p.y0, p.y1}) {
    CK(cudaFree(q));
  }
}

DynGemv args(const Problem& p, bool q8, FloatType yt, int sms) {
  DynGemv a;
  a.weight_rows = p.rows;
  a.packed = p.packed, a.bits = 8, a.n = p.n, a.k = p.k, a.scales = p.scales;
  a.x.codes = p.codes, a.x.zero_points = p.zp, a.x.scales = p.xs;
  a.m = p.m, a.bias = p.bias, a.yt = yt, a.sm_count = sms;
  if (q8) {
    a.q8.on = true, a.q8.zx = 5, a.q8.sx = 0.02f, a.q8.inv = 1.0f / 0.7f, a.q8.zo = -3.0f;
  }
  return a;
}

int main(int argc, char** argv) {
  // --profile: one call of each GEMM at 2048 x 4096 x 4096 (for Nsight Compute), nothing else.
  const bool profile = argc > 1 && std::strcmp(argv[1], "--profile") == 0;
  setenv("PT2Q_CUDA_WGMMA_MIN_ROWS", "256", 1);  // time the wgmma GEMM where the ops would not take it
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("# %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  std::mt19937 rng(0);
  int failures = 0;
  struct C {
    int64_t m, n, k;
    bool q8;
    FloatType yt;
  };
  // m >= kDynWgmmaMinRows (the wgmma GEMM takes no fewer); weight rows not a multiple of 4 (the
  // packed layout's zero rows), K not a whole stage; linear_q8 (q8) at 128 weight rows a block.
  const C cases[] = {{256, 256, 128, false, FloatType::kF32},    {300, 298, 400, false, FloatType::kF32},
                     {257, 1000, 4112, false, FloatType::kBF16}, {257, 522, 2064, false, FloatType::kF16},
                     {2048, 4096, 4096, false, FloatType::kF32}, {384, 11008, 4096, false, FloatType::kBF16},
                     {256, 259, 1040, true, FloatType::kF32},    {600, 4100, 2064, true, FloatType::kF32}};
  if (profile) {
    Problem p = make(2048, 4096, 4096, rng);
    DynGemv a = args(p, false, FloatType::kBF16, prop.multiProcessorCount);
    a.y = p.y0;
    CK(linearDynamicGemm(a, 0));
    a.row_sums = p.row_sums;
    CK(linearDynamicWgmma(a, 256, 0));
    CK(cudaDeviceSynchronize());
    release(p);
    return 0;
  }
  for (const C& c : cases) {
    Problem p = make(c.m, c.n, c.k, rng);
    DynGemv a = args(p, c.q8, c.yt, prop.multiProcessorCount);
    const size_t bytes = c.q8 ? c.m * c.n : c.m * c.n * (c.yt == FloatType::kF32 ? 4 : 2);
    a.y = p.y0;
    CK(linearDynamicGemm(a, 0));  // row_sums null: the mma.sync GEMM
    CK(cudaDeviceSynchronize());
    std::vector<uint8_t> ref(bytes), got(bytes);
    CK(cudaMemcpy(ref.data(), p.y0, bytes, cudaMemcpyDeviceToHost));
    for (int tile : {256, 128}) {
      a.y = p.y1, a.row_sums = p.row_sums;
      CK(cudaMemset(p.y1, 0x7F, bytes));
      CK(linearDynamicWgmma(a, tile, 0));
      CK(cudaDeviceSynchronize());
      CK(cudaMemcpy(got.data(), p.y1, bytes, cudaMemcpyDeviceToHost));
      size_t bad = 0, first = 0;
      for (size_t i = 0; i < bytes; ++i) {
        if (ref[i] != got[i] && bad++ == 0) first = i;
      }
      if (bad) ++failures;
      std::printf("check m=%lld n=%lld k=%lld q8=%d yt=%d tile=%d: %s (%zu bytes differ, first at %zu)\n",
                  (long long)c.m, (long long)c.n, (long long)c.k, c.q8, int(c.yt), tile, bad ? "MISMATCH" : "ok",
                  bad, first);
      a.row_sums = nullptr;
    }
    release(p);
  }
  std::printf("| m | n x k | mma.sync GEMM us | wgmma 256 us | wgmma 128 us | best T op/s |\n");
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  const int64_t shapes[4][2] = {{4096, 4096}, {11008, 4096}, {4096, 11008}, {14336, 4096}};
  for (int64_t m : {256, 512, 2048}) {
    for (const auto& s : shapes) {
      Problem p = make(m, s[0], s[1], rng);
      DynGemv a = args(p, false, FloatType::kBF16, prop.multiProcessorCount);
      a.y = p.y0;
      float us[3];
      for (int v = 0; v < 3; ++v) {
        a.row_sums = v == 0 ? nullptr : p.row_sums;
        auto run = [&] { CK(v == 0 ? linearDynamicGemm(a, 0) : linearDynamicWgmma(a, v == 1 ? 256 : 128, 0)); };
        for (int i = 0; i < 3; ++i) run();
        CK(cudaEventRecord(e0));
        for (int i = 0; i < 20; ++i) run();
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        us[v] = ms * 1000.0f / 20;
      }
      const float best = std::min(us[1], us[2]);
      std::printf("| %lld | %lldx%lld | %.1f | %.1f | %.1f | %.0f |\n", (long long)m, (long long)s[0],
                  (long long)s[1], us[0], us[1], us[2], 2.0 * m * s[0] * s[1] / best / 1e6);
      release(p);
    }
  }
  std::printf("%s\n", failures ? "FAILED" : "all checks ok");
  return failures ? 1 : 0;
}
