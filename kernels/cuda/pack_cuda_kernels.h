// Torch-free CUDA kernels of the packing ops: pack_int4 / unpack_int4 (pairs of 4-bit values along
// the last dimension, either nibble first) and pack_weight_int8 / pack_weight_int4 (the "n4k16" /
// "n4k32" block layouts of kernels/README.md, the same bytes as on CPU), and the dequantization
// of a packed weight for the linears' many-row path. Values out of the 4-bit
// range are reported through `first_bad`, which the caller sets to INT64_MAX before the launch:
// the kernels leave there the smallest flat input index of such a value (atomicMin), so the glue
// reads one number to raise the CPU op's error. The glue is pack_cuda.cpp.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "kernels/cuda/affine_cuda_kernels.h"

namespace pt2q::cuda {

/// out[i] = the values in[2i], in[2i + 1] as nibbles (in[2i] high when high_first), i < out_bytes;
/// int8 inputs must lie in [-8, 7] (stored as two's complement nibbles), uint8 in [0, 15].
cudaError_t packInt4(const uint8_t* in, uint8_t* out, int64_t out_bytes, bool high_first, bool is_signed,
                     unsigned long long* first_bad, cudaStream_t stream);

/// The inverse: out[2i], out[2i + 1] from in[i] (sign-extended nibbles when is_signed).
cudaError_t unpackInt4(const uint8_t* in, uint8_t* out, int64_t in_bytes, bool high_first, bool is_signed,
                       cudaStream_t stream);

/// w [n, k] int8 (row-major) into pack_weight_int{bits}'s layout at out (16-byte aligned, of
/// packedWeightShape(n, k, bits)): rows padded to a multiple of 4 and k to whole chunks with zero
/// codes; int4 nibbles hold v + 8 and w must lie in [-8, 7].
cudaError_t packWeight(const int8_t* w, int64_t n, int64_t k, int bits, int8_t* out, unsigned long long* first_bad,
                       cudaStream_t stream);

/// The inverse, dequantized for a GEMM: rows [0, n) of a pack_weight_int{bits} weight as
/// out[r, j] = (v - zp) * s (fp32, then rounded to nearest even to out_t), j < k, with the
/// group's scale s = scales[r * groups + j / group_size] and zero point (zero_points may be null).
cudaError_t dequantWeight(const int8_t* packed, int64_t n, int64_t k, int bits, int64_t groups, int64_t group_size,
                          const float* scales, const float* zero_points, void* out, FloatType out_t,
                          cudaStream_t stream);

}  // namespace pt2q::cuda
