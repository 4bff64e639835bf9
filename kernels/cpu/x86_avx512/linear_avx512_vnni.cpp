// The linear microkernel table for avx512 with VNNI; this file alone is compiled with those flags.
#define PT2Q_CPU_ISA_NS linear_avx512_vnni
#define PT2Q_VEC_AVX512
#define PT2Q_VNNI
#include "kernels/cpu/linear_kernels_impl.h"

namespace pt2q::cpu {

const LinearKernels& linearKernelsAvx512Vnni() {
  static const LinearKernels table = linear_avx512_vnni::makeLinearTable(Isa::kAvx512, "avx512_vnni");
  return table;
}

}  // namespace pt2q::cpu
