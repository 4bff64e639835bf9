// The workspaces of the Hopper int8 GEMM (linear_dynamic_cuda_kernels.h: the weight's row sums
// and the weight unpacked to rows), allocated for one call by the glue of the ops that run it
// (linear_dynamic_cuda.cpp, linear_static_cuda.cpp). Torch side: the kernels stay torch-free.
#pragma once

#include <ATen/ATen.h>

#include "kernels/cuda/linear_dynamic_cuda_kernels.h"

namespace pt2q::cuda {

/// The tensors that hold the memory; keep them alive until the launch is queued (the caching
/// allocator then keeps it for the stream).
struct DynWgmmaWorkspace {
  at::Tensor row_sums, weight_rows;
};

/// Allocates both workspaces on `options`' device for a's n x k weight and points a at them.
inline DynWgmmaWorkspace allocDynWgmmaWorkspace(DynGemv& a, const at::TensorOptions& options) {
  DynWgmmaWorkspace w;
  w.row_sums = at::empty({a.n}, options.dtype(at::kInt));
  w.weight_rows = at::empty({a.n, a.k}, options.dtype(at::kChar));
  a.row_sums = w.row_sums.data_ptr<int32_t>();
  a.weight_rows = w.weight_rows.data_ptr<int8_t>();
  return w;
}

}  // namespace pt2q::cuda
