// The MX / BFP kernel table for generic; this file alone is compiled with that ISA's flags.
#define PT2Q_CPU_ISA_NS generic
#include "kernels/cpu/mx_kernels_impl.h"

namespace pt2q::cpu {

const MxKernels& mxKernelsGeneric() {
  static const MxKernels table = generic::mxk::makeMxTable("generic");
  return table;
}

}  // namespace pt2q::cpu
