// The affine microkernel table for avx2; this file alone is compiled with that ISA's flags.
#define PT2Q_CPU_ISA_NS avx2
#define PT2Q_VEC_AVX2
#include "kernels/cpu/affine_kernels_impl.h"

namespace pt2q::cpu {

const AffineKernels& affineKernelsAvx2() {
  static const AffineKernels table = avx2::makeTable(Isa::kAvx2, "avx2");
  return table;
}

}  // namespace pt2q::cpu
