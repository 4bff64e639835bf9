// The linear microkernel table for avx2; this file alone is compiled with that ISA's flags.
#define PT2Q_CPU_ISA_NS linear_avx2
#define PT2Q_VEC_AVX2
#include "kernels/cpu/linear_kernels_impl.h"

namespace pt2q::cpu {

const LinearKernels& linearKernelsAvx2() {
  static const LinearKernels table = linear_avx2::makeLinearTable(Isa::kAvx2, "avx2");
  return table;
}

}  // namespace pt2q::cpu
