// Torch-free CUDA kernels of the affine ops: raw device pointers, sizes and a stream. Built
// as a static library wherever nvcc exists, so CPU-only CI still compiles them; the torch glue
// (affine_cuda.cpp) is built only against a CUDA build of torch.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace pt2q::cuda {

enum class FloatType : uint8_t { kF32, kBF16, kF16 };
enum class CodeType : uint8_t { kI8, kU8, kI16, kU16, kI32 };
enum class Domain : uint8_t { kInt, kFloat, kNone };

constexpr int kMaxDims = 8;

/// Block layout of a contiguous tensor: the qparam of element (i_0..i_{n-1}) is at
/// sum_d (i_d / block[d]) * qstride[d] (see BlockLayout in kernels/affine_params.h).
struct Layout {
  int ndim;
  int64_t sizes[kMaxDims];
  int64_t block[kMaxDims];
  int64_t qstride[kMaxDims];
};

struct Params {
  int64_t qmin;
  int64_t qmax;
  Domain domain;
};

// Each returns the launch error (cudaSuccess when queued). zp may be null.
cudaError_t quantizeAffine(const void* x, FloatType xt, void* q, CodeType qt, int64_t n, const Layout& layout,
                           const float* scale, const float* zp, const Params& p, cudaStream_t stream);
cudaError_t dequantizeAffine(const void* q, CodeType qt, void* y, FloatType yt, int64_t n, const Layout& layout,
                             const float* scale, const float* zp, const Params& p, cudaStream_t stream);
/// mask may be null.
cudaError_t fakeQuantizeAffine(const void* x, FloatType xt, void* y, bool* mask, int64_t n, const Layout& layout,
                               const float* scale, const float* zp, const Params& p, cudaStream_t stream);

}  // namespace pt2q::cuda
