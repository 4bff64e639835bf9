// Torch-free CPU kernels of MX / BFP fake-quantization, one table per ISA (as the affine
// microkernels, see affine_microkernels.h).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cpu/affine_microkernels.h"

namespace pt2q::cpu {

/// Everything one MX call needs besides the data.
struct MxCall {
  // element format
  bool is_int;
  int32_t emin;
  int32_t m;
  int32_t emax;
  float max_norm;
  // modes
  uint8_t rounding;    // 0 nearest, 1 even, 2 floor, 3 stochastic
  uint8_t scale_mode;  // 0 floor, 1 ceil, 2 even, 3 rceil
  bool flush_fp32_subnorms;
  uint32_t random_key;  // stochastic rounding stream (see mx_numerics.h)
  // layout of the contiguous tensor: [outer, len, inner], blocks of `block` along len
  int64_t len;
  int64_t inner;
  int64_t block;
  // Write the output with streaming stores (outputs much larger than the last-level cache).
  bool stream_stores = false;
  // mx_quantize: element code width and exponent bits (codes are 1 byte up to 8 bits, else 2)
  int32_t code_bits = 8;
  int32_t ebits = 0;
  // Sub-byte codes written packed straight from the kernel ("MX code layout" of
  // kernels/README.md): 4 (two per byte), 2 (four per byte) or 6 (four per three bytes); 0: one
  // code per element (the caller packs). Only when no packing group straddles a row or, along
  // the last axis, a block.
  int32_t pack_bits = 0;
};

/// Fake-quantizes the blocks of rows [block_row_begin, block_row_end) of a contiguous tensor,
/// where block row r = (outer index o, block index j along len). x and y point at element 0.
using MxFakeQuantizeFn = void (*)(const void* x, void* y, int64_t block_row_begin, int64_t block_row_end,
                                  const MxCall& c);

/// Quantizes the same block rows to element codes (one uint8, or uint16 when code_bits > 8,
/// per element, at the element's position) and E8M0 scale bytes (at (o, j, inner) of the
/// [outer, blocks, inner] scale tensor).
using MxQuantizeFn = void (*)(const void* x, void* codes, uint8_t* scales, int64_t block_row_begin,
                              int64_t block_row_end, const MxCall& c);

struct MxKernels {
  const char* name;
  MxFakeQuantizeFn fake_quantize[kNumFloatKinds];
  MxQuantizeFn quantize[kNumFloatKinds];
};

const MxKernels& mxKernels();
const MxKernels& mxKernelsGeneric();
const MxKernels& mxKernelsAvx2();
const MxKernels& mxKernelsAvx512();
const MxKernels& mxKernelsAvx512Bf16();
/// The MX tables this CPU can run (generic first).
std::vector<const MxKernels*> availableMxKernels();

}  // namespace pt2q::cpu
