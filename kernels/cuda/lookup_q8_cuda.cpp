// CUDA glue of lookup_q8: the shared checks and output, then lookup_q8_cuda_kernels.h on the codes'
// storage run (dense codes and the output share their strides).
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "kernels/cuda/glue.h"
#include "kernels/cuda/lookup_q8_cuda_kernels.h"
#include "kernels/lookup_q8.h"

namespace pt2q {
namespace {

at::Tensor lookupQ8Cuda(const at::Tensor& codes, const at::Tensor& table) {
  checkLookupQ8(codes, table);
  const c10::cuda::CUDAGuard guard(codes.device());
  const at::Tensor x = codes.is_non_overlapping_and_dense() ? codes : codes.contiguous();
  const at::Tensor t = table.contiguous();
  at::Tensor out = lookupQ8Output(x, table);
  cuda::checkLaunch(cuda::lookupQ8(static_cast<const uint8_t*>(x.const_data_ptr()), static_cast<uint8_t*>(out.data_ptr()),
                                   static_cast<const uint8_t*>(t.const_data_ptr()), x.numel(),
                                   at::cuda::getCurrentCUDAStream()),
                    "lookup_q8");
  return out;
}

}  // namespace
}  // namespace pt2q

TORCH_LIBRARY_IMPL(pt2q, CUDA, m) { m.impl("lookup_q8", &pt2q::lookupQ8Cuda); }
