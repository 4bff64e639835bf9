// The MX / BFP kernel table for AVX-512 with AVX512_BF16 (Zen 4+, Sapphire Rapids+, Cooper Lake):
// the avx512 kernels with bf16 narrowed by vcvtne2ps2bf16, one instruction per 32 values instead
// of eleven. This file alone is compiled with -mavx512bf16.
#define PT2Q_CPU_ISA_NS avx512bf16
#define PT2Q_VEC_AVX512
#define PT2Q_VEC_AVX512_BF16
#include "kernels/cpu/mx_kernels_impl.h"

namespace pt2q::cpu {

const MxKernels& mxKernelsAvx512Bf16() {
  static const MxKernels table = avx512bf16::mxk::makeMxTable("avx512_bf16");
  return table;
}

}  // namespace pt2q::cpu
