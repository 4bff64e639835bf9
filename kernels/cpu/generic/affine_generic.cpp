// The affine microkernel table for generic; this file alone is compiled with that ISA's flags.
#define PT2Q_CPU_ISA_NS generic

#include "kernels/cpu/affine_kernels_impl.h"

namespace pt2q::cpu {

const AffineKernels& affineKernelsGeneric() {
  static const AffineKernels table = generic::makeTable(Isa::kGeneric, "generic");
  return table;
}

}  // namespace pt2q::cpu
