// The MX / BFP kernel table for avx512; this file alone is compiled with that ISA's flags.
#define PT2Q_CPU_ISA_NS avx512
#define PT2Q_VEC_AVX512
#include "kernels/cpu/mx_kernels_impl.h"

namespace pt2q::cpu {

const MxKernels& mxKernelsAvx512() {
  static const MxKernels table = avx512::mxk::makeMxTable("avx512");
  return table;
}

}  // namespace pt2q::cpu
