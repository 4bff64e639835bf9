// Torch-free CUDA kernels of linear_w8a8 / linear_w4a8 (and linear_q8's int8 products): each row of
// x is quantized per token (int8, asymmetric; quantized_decomposed's choose_qparams_per_token_
// asymmetric + quantize_per_token, bit for bit), then an int8 tensor-core GEMV (few rows, decode)
// or GEMM (from dynGemmMinRows() rows) reads the CPU's packed weights ("n4k16" int8, "n4k32"
// int4; kernels/README.md). The glue is kernels/cuda/linear_dynamic_cuda.cpp.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "kernels/cuda/affine_cuda_kernels.h"

namespace pt2q::cuda {

/// The most x rows one call takes (the GEMV: 16 per slice of the grid, 65535 slices; it re-reads
/// the weight for each 16 rows, so from dynGemmMinRows() rows on the GEMM runs instead).
constexpr int64_t kDynGemvMaxRows = 16 * 65535;

struct TokenCodes {
  int8_t* codes = nullptr;   // [m, k], rows 16-byte aligned when k is a multiple of 16
  int32_t* zero_points = nullptr;  // [m]
  float* scales = nullptr;   // [m]: the fp64 scale rounded to fp32 (NaN for a row with NaN or Inf)
};

/// Per-token int8 codes of x ([m, k] in xt). A row holding NaN or Inf gets a NaN scale (so its
/// outputs are NaN) instead of the CPU's error: raising would need a host sync per call.
cudaError_t quantizeTokensInt8(const void* x, FloatType xt, int64_t m, int64_t k, const TokenCodes& out,
                               cudaStream_t stream);

/// linear_q8's output: the exact int32 sum of (q - zx) w of each output, then int8 codes
/// clamp(round(((s_w * sum) * sx + bias) * inv) + zo, lo, hi), in fp32 as the CPU kernel rounds.
/// conv2d_q8's residual (codes in the output's layout, one per output) joins the bias first:
/// bias + (r - rz) * rs.
struct Q8Requant {
  bool on = false;
  int32_t zx = 0;  // x's zero point (one per tensor; TokenCodes' zero points and scales are unused)
  float sx = 0.0f, inv = 0.0f, zo = 0.0f, lo = -128.0f, hi = 127.0f;
  const int8_t* residual = nullptr;
  float rs = 0.0f, rz = 0.0f;
};

struct DynGemv {
  const int8_t* packed = nullptr;  // pack_weight_int8 / pack_weight_int4's layout
  int bits = 8;
  int64_t n = 0, k = 0;  // k: a multiple of the chunk (16 or 32 values)
  int64_t groups = 1, group_size = 0;  // int8: group_size a multiple of 32 when groups > 1
  const float* scales = nullptr;  // [n, groups]
  const float* zero_points = nullptr;  // [n, groups] or null
  TokenCodes x;  // from quantizeTokensInt8
  int64_t m = 1;  // 1..kDynGemvMaxRows
  const float* bias = nullptr;  // [n] or null
  void* y = nullptr;  // [m, n] in yt (int8 codes with q8.on)
  FloatType yt = FloatType::kF32;
  Q8Requant q8;  // on: linear_q8 (int8 weight per channel, no weight zero points)
  int sm_count = 132;  // multiprocessors, to size the GEMM's weight tiles
  int32_t* row_sums = nullptr;  // workspace of n int32 for the Hopper GEMM (null: it does not run)
  int8_t* weight_rows = nullptr;  // optional workspace of n * k bytes: the Hopper GEMM's weight as rows
};

/// y = sx (sum_k (q - zx)(w - zw) s_w) + bias: int32 sums per span of a group on tensor cores
/// (exact), scaled in fp32 in a fixed order (deterministic). From dynGemmMinRows() rows of x on it
/// runs linearDynamicGemm.
cudaError_t linearDynamicGemv(const DynGemv& a, cudaStream_t stream);

/// Where the GEMM takes over from the GEMV. On the H100 the GEMV was faster at 64 rows on two of
/// the four benchmark shapes and the GEMM at 128 rows on all four (docs/perf_linear_cuda.md). The
/// environment variable PT2Q_CUDA_GEMM_MIN_ROWS overrides it (for benchmarks).
constexpr int64_t kDynGemmMinRows = 96;
int64_t dynGemmMinRows();

/// The same arithmetic as a GEMM (linear_dynamic_gemm_kernels.cu): each weight tile is read once
/// per 128 rows of x (the GEMV reads it once per 16). Any number of rows; x's code rows must be
/// 16-byte aligned, as for the GEMV.
cudaError_t linearDynamicGemm(const DynGemv& a, cudaStream_t stream);

/// The GEMM on Hopper's wgmma (linear_dynamic_wgmma_kernels.cu, sm_90a) for linear_w8a8 and
/// linear_q8 (q8.on: 128 weight rows per block whatever tile_rows says): int8 weights per channel
/// without zero points, from kDynWgmmaMinRows rows of x (kDynWgmmaWideMinRows past 4096 weight
/// rows; the environment variable PT2Q_CUDA_WGMMA_MIN_ROWS overrides both), on a compute
/// capability 9.0 device (linearDynamicWgmmaTakes: callers allocate the workspaces only then).
/// It needs the row_sums and weight_rows workspaces (hasWorkspace). tile_rows: weight rows per
/// block, 256 or 128. linearDynamicGemm runs it when it takes the call and has the workspaces. Below 256 rows the extra pass that
/// unpacks the weight to rows costs more than the wgmma gains on wide weights (H100, 128 rows:
/// 11008 x 4096 and 14336 x 4096 ran 0.53-0.54x bf16 F.linear against the mma.sync GEMM's
/// 0.61-0.74x; at 2048 rows 0.81-1.12x against 0.56-0.63x).
constexpr int64_t kDynWgmmaMinRows = 256;
constexpr int64_t kDynWgmmaWideMinRows = 512;
bool linearDynamicWgmmaTakes(const DynGemv& a);
bool hasWorkspace(const DynGemv& a);
cudaError_t linearDynamicWgmma(const DynGemv& a, int tile_rows, cudaStream_t stream);

/// Whether the GEMV takes this weight layout (int8 groups must be a multiple of 32). With q8.on:
/// int8 per channel only.
inline bool linearDynamicGemvTakes(int bits, int64_t groups, int64_t group_size) {
  return groups == 1 || bits == 4 || group_size % 32 == 0;
}

}  // namespace pt2q::cuda
