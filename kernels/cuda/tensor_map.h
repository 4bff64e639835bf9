// The driver's tensor-map encoder (cuTensorMapEncodeTiled), which the copy engine's 2-D boxes
// (cp.async.bulk.tensor) are described with, reached through the runtime: pt2q links no libcuda.
// Host code, shared by the wgmma GEMMs.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

namespace pt2q::cuda::wgmma {

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                  const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                  CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// The driver's cuTensorMapEncodeTiled through the runtime (pt2q links no libcuda); null if absent.
inline EncodeTiled encodeTiled() {
  static const EncodeTiled fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      return static_cast<EncodeTiled>(nullptr);
    }
    return reinterpret_cast<EncodeTiled>(p);
  }();
  return fn;
}

}  // namespace pt2q::cuda::wgmma
