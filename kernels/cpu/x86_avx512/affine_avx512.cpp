// The affine microkernel table for avx512; this file alone is compiled with that ISA's flags.
#define PT2Q_CPU_ISA_NS avx512
#define PT2Q_VEC_AVX512
#include "kernels/cpu/affine_kernels_impl.h"

namespace pt2q::cpu {

const AffineKernels& affineKernelsAvx512() {
  static const AffineKernels table = avx512::makeTable(Isa::kAvx512, "avx512");
  return table;
}

}  // namespace pt2q::cpu
