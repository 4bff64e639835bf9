// Torch-free choose_qparams_affine on CUDA for layouts whose qparam blocks are contiguous runs of the
// (contiguous) input: per tensor, per token, groups along the last dimension, per channel along the
// first. Two kernels: per-block min / max (in pieces for long blocks), then the qparams of each
// block from its pieces, op for op as the shared qparamsFromMinMax (kernels/affine_params.cpp)
// computes them on CPU, so they match bit for bit. The glue is choose_qparams_cuda.cpp.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "kernels/cuda/affine_cuda_kernels.h"

namespace pt2q::cuda {

struct RunMinMax {
  const void* x = nullptr;
  FloatType xt = FloatType::kF32;
  int64_t runs = 0;    // qparam blocks
  int64_t len = 0;     // elements per block, consecutive in x
  int64_t splits = 1;  // pieces per block, reduced by separate lanes (the glue folds them)
  float* mn = nullptr;  // [runs, splits]: NaN where a piece has one
  float* mx = nullptr;
};

/// Pieces a block of `len` elements is cut into, so that a per-tensor reduction still fills the GPU.
int64_t runMinMaxSplits(int64_t len);

cudaError_t runMinMax(const RunMinMax& a, cudaStream_t stream);

enum class Mapping : uint8_t { kSymmetric, kSymmetricNoClippingErr, kAsymmetric };

/// qparamsFromMinMax's inputs, its double constants already rounded to fp32 as ATen rounds them.
struct QParamsFromPieces {
  const float* mn = nullptr;  // runMinMax's [runs, splits]
  const float* mx = nullptr;
  int64_t runs = 0, splits = 1;
  Mapping mapping = Mapping::kAsymmetric;
  Domain domain = Domain::kInt;
  float range = 255.0f;       // qmax - qmin
  float half_range = 127.5f;  // (qmax - qmin) / 2
  float mid = 0.0f;           // (qmax + qmin + 1) / 2
  float qmin_f = -128.0f, qmax_f = 127.0f;
  float eps = 0.0f;
  int32_t qmin = -128, qmax = 127;
  int32_t zp_value = 0;  // the symmetric mappings' zero point
  float* scale = nullptr;  // [runs]
  int32_t* zp_int = nullptr;  // [runs] (domains int and none)
  float* zp_float = nullptr;  // [runs] (domain float)
  unsigned long long* first_bad = nullptr;  // set to ~0 before; the lowest block with NaN or Inf
};

cudaError_t qparamsFromPieces(const QParamsFromPieces& a, cudaStream_t stream);

}  // namespace pt2q::cuda
