// The driver's tensor-map encoder (cuTensorMapEncodeTiled), which the copy engine's 2-D boxes
// (cp.async.bulk.tensor) are described with, reached through the runtime: pt2q links no libcuda.
// Host code, shared by the wgmma GEMMs, as is the test of whether their sm_90a code runs here.
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

// Whether the current device runs Kernel, code built for sm_90a only: it can be loaded, and the
// device is of compute capability 9.0 (the callers keep another GEMM otherwise).
template <auto Kernel>
bool runsHere() {
  static const bool loadable = [] {
    cudaFuncAttributes attr;
    const bool ok = cudaFuncGetAttributes(&attr, Kernel) == cudaSuccess;
    (void)cudaGetLastError();
    return ok;
  }();
  int dev = 0, major = 0, minor = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return loadable && major == 9 && minor == 0;
}

// x [m, k] of 16-bit floats as wgmma's K-major B tiles: boxes of box_k values x box_rows rows,
// 128-byte swizzled, zeros out of bounds.
inline bool encodeHalfRows(EncodeTiled encode, CUtensorMap* map, const void* x, int64_t k, int64_t m, uint32_t box_k,
                           uint32_t box_rows) {
  const cuuint32_t ones[2] = {1, 1};
  const cuuint64_t dim[2] = {static_cast<cuuint64_t>(k), static_cast<cuuint64_t>(m)};
  const cuuint64_t stride[1] = {static_cast<cuuint64_t>(k) * 2};
  const cuuint32_t box[2] = {box_k, box_rows};
  return encode(map, CU_TENSOR_MAP_DATA_TYPE_UINT16, 2, const_cast<void*>(x), dim, stride, box, ones,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

}  // namespace pt2q::cuda::wgmma
