// A kernel that takes more than 48 KiB of dynamic shared memory must first be allowed it, once per
// kernel and device; the kernels that stage operands in shared memory share this.
#pragma once

#include <cuda_runtime.h>

namespace pt2q::cuda {

/// Allows Kernel `bytes` of dynamic shared memory on the current device (a no-op after its first
/// success there). A template on the kernel itself, not its type: kernels of one signature must
/// not share the flag. `whole` also asks for all of L1 as shared memory, where two blocks of a
/// kernel must fit on a multiprocessor (the driver may otherwise pick a split that holds one).
template <auto Kernel>
cudaError_t allowSharedMemory(int bytes, bool whole = false) {
  constexpr int kMaxDevices = 64;
  static bool allowed[kMaxDevices] = {};  // a benign race: setting it twice does no harm
  int dev = 0;
  if (const cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) return e;
  if (dev >= kMaxDevices) return cudaErrorInvalidDevice;
  if (!allowed[dev]) {
    cudaError_t e = cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    if (e == cudaSuccess && whole) {
      e = cudaFuncSetAttribute(Kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared);
    }
    if (e != cudaSuccess) return e;
    allowed[dev] = true;
  }
  return cudaSuccess;
}

}  // namespace pt2q::cuda
