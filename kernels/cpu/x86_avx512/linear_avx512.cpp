// The linear microkernel table for avx512; this file alone is compiled with that ISA's flags.
#define PT2Q_CPU_ISA_NS linear_avx512
#define PT2Q_VEC_AVX512
#include "kernels/cpu/linear_kernels_impl.h"

namespace pt2q::cpu {

const LinearKernels& linearKernelsAvx512() {
  static const LinearKernels table = linear_avx512::makeLinearTable(Isa::kAvx512, "avx512");
  return table;
}

}  // namespace pt2q::cpu
