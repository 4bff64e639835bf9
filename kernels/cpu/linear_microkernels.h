// Torch-free microkernels of the quantized linear ops: raw pointers and sizes only, one table
// per instruction set, picked at run time like the affine kernels (same PT2Q_CPU_ISA cap).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cpu/affine_microkernels.h"

namespace pt2q::cpu {

/// One block of 4 weight rows in the "n4k16" layout (kernels/README.md) against `x_rows` (1 or
/// 2) rows of x, fp32 and zero-padded to chunks * 16 values, `x_stride` apart:
///   out[m * 4 + r] = sum_g scales[r * s_stride + g] * sum_{k in group g} w[r][k] * x[m][k]
/// with groups of `group_chunks` chunks (the whole row when per channel). Products accumulate in
/// fp32 (16 or 8 lanes, then a tree sum).
using LinearW8Block4Fn = void (*)(const int8_t* w, const float* x, int64_t x_stride, int64_t x_rows, int64_t chunks,
                                  int64_t group_chunks, const float* scales, int64_t s_stride, float* out);

/// The same for 4-bit weights in the "n4k32" layout: chunks of 32 k-values, nibbles holding
/// u = v + 8, and out = sum_g s * sum u * x (the caller subtracts s * (8 + zp) * sum x).
using LinearW4Block4Fn = LinearW8Block4Fn;

struct LinearKernels {
  Isa isa;
  const char* name;
  LinearW8Block4Fn w8_block4;
  LinearW4Block4Fn w4_block4;
};

/// The table for this CPU (the affine kernels' ISA).
const LinearKernels& linearKernels();
/// Every table this CPU can run (tests compare them).
std::vector<const LinearKernels*> availableLinearKernels();

const LinearKernels& linearKernelsGeneric();
#if defined(__x86_64__) || defined(_M_X64)
const LinearKernels& linearKernelsAvx2();
const LinearKernels& linearKernelsAvx512();
#endif

}  // namespace pt2q::cpu
