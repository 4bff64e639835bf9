// The MX numerics (kernels/mx/mx_numerics.h, on simd/float_bits.h) compiled for the device, in
// pt2q::cuda::mxd: the same source as the CPU kernels, so shared scales, element rounding and
// E8M0 values are theirs bit for bit. Used by mx_cuda_kernels.cu and the linear_mx GEMVs.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace pt2q::cuda::mxd {
#define PT2Q_NUMERIC __host__ __device__ __forceinline__
#include "kernels/cpu/simd/float_bits.h"
#include "kernels/mx/mx_numerics.h"
#undef PT2Q_NUMERIC
}  // namespace pt2q::cuda::mxd
