// Torch-free CUDA kernels of the MX / BFP ops (mx_fake_quantize, mx_quantize, mx_dequantize):
// raw device pointers, sizes and a stream. The numerics are kernels/mx/mx_numerics.h and
// kernels/cpu/simd/float_bits.h compiled for the device, so the results are the CPU kernels'
// bit for bit (stochastic rounding included: its random bits are a hash of the seed and the
// element's index). Built wherever nvcc exists; the torch glue is kernels/cuda/mx_cuda.cpp.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "kernels/cuda/affine_cuda_kernels.h"

namespace pt2q::cuda {

/// One call's format, modes and layout: a contiguous tensor seen as [outer, len, inner] with
/// blocks of `block` along len (the last one ragged), as the CPU's MxCall.
struct MxLaunch {
  bool is_int = false;
  int32_t emin = 0;
  int32_t m = 0;      // stored mantissa bits
  int32_t emax = 0;
  float max_norm = 0;
  uint8_t rounding = 0;    // 0 nearest, 1 even, 2 floor, 3 stochastic
  uint8_t scale_mode = 0;  // 0 floor, 1 ceil, 2 even, 3 rceil
  bool flush_fp32_subnorms = false;
  uint32_t random_key = 0;
  int64_t outer = 1, len = 1, inner = 1, block = 1;
  int32_t code_bits = 8;  // mx_quantize: element code width (codes are 1 byte up to 8 bits, else 2)
  int32_t ebits = 0;
};

/// The value of each code of at most 8 bits before its block scale (mx::codeTable).
struct MxCodeTable {
  float v[256];
};

/// How codes pack along the last dimension (mx::CodeLayout): `per_group` codes of `bits` bits,
/// low bits first, in `group_bytes` bytes.
struct MxPacking {
  int bits = 8;
  int per_group = 1;
  int group_bytes = 1;
};

cudaError_t mxFakeQuantize(const void* x, void* y, FloatType t, const MxLaunch& c, cudaStream_t stream);

/// codes: one per element (uint8, or int16 above 8 bits); scales: [outer, blocks, inner] bytes.
cudaError_t mxQuantize(const void* x, FloatType t, void* codes, uint8_t* scales, const MxLaunch& c,
                       cudaStream_t stream);

/// Whether mxQuantizePacked takes this call: blocks along the innermost axis, every row a whole
/// number of blocks of 16-byte multiples (at most 32 per block), x 16-byte aligned. It writes the
/// codes in their final layout (packed along the last dimension per `p`; 2 bytes per code above
/// 8 bits) in one pass.
bool mxQuantizePackedApplies(const void* x, FloatType t, const MxLaunch& c, const MxPacking& p);
cudaError_t mxQuantizePacked(const void* x, FloatType t, uint8_t* codes, uint8_t* scales, const MxLaunch& c,
                             const MxPacking& p, cudaStream_t stream);

/// Whether mxQuantizeColumnsPacked takes this call: blocks along an earlier axis (inner > 1),
/// codes of at most 8 bits packed 2 or 4 to a group, the last dimension (`last` elements) a
/// multiple of the group. It writes the packed codes directly (no one-byte-per-code pass).
bool mxQuantizeColumnsPackedApplies(const MxLaunch& c, const MxPacking& p, int64_t last);
cudaError_t mxQuantizeColumnsPacked(const void* x, FloatType t, uint8_t* codes, uint8_t* scales, const MxLaunch& c,
                                    const MxPacking& p, int64_t last, cudaStream_t stream);

/// Packs one-byte codes [rows, len] into [rows, ceil(len / per_group) * group_bytes].
cudaError_t mxPackCodes(const uint8_t* in, uint8_t* out, int64_t rows, int64_t len, const MxPacking& p,
                        cudaStream_t stream);

/// y = value(code) * 2^(s - 127) over the [outer, len, inner] layout of y, blocks of `block`
/// along len; codes are `code_bytes` wide per element when p.per_group == 1 (int16: BFP wider
/// than 8 bits, value = code * 2^-m), else packed along y's last dimension (`last` elements).
cudaError_t mxDequantize(const void* codes, const uint8_t* scales, void* y, FloatType t, const MxLaunch& c,
                         const MxPacking& p, int code_bytes, int64_t last, const MxCodeTable& table,
                         cudaStream_t stream);

}  // namespace pt2q::cuda
