// The linear microkernel table for generic; this file alone is compiled with that ISA's flags.
#define PT2Q_CPU_ISA_NS linear_generic

#include "kernels/cpu/linear_kernels_impl.h"

namespace pt2q::cpu {

const LinearKernels& linearKernelsGeneric() {
  static const LinearKernels table = linear_generic::makeLinearTable(Isa::kGeneric, "generic");
  return table;
}

}  // namespace pt2q::cpu
