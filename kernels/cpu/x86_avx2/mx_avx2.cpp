// The MX / BFP kernel table for avx2; this file alone is compiled with that ISA's flags.
#define PT2Q_CPU_ISA_NS avx2
#define PT2Q_VEC_AVX2
#include "kernels/cpu/mx_kernels_impl.h"

namespace pt2q::cpu {

const MxKernels& mxKernelsAvx2() {
  static const MxKernels table = avx2::mxk::makeMxTable("avx2");
  return table;
}

}  // namespace pt2q::cpu
