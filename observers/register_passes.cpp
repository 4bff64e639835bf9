// The passes of observers/ in the pass registry (pt2q-opt, runPasses).
#include "graph/pass.h"

namespace pt2q {

std::unique_ptr<Pass> createFoldBatchNormPass();

void registerObserverPasses(PassRegistry& registry) {
  registry.add({"fold-batch-norm", "Fold eval BatchNorm into the conv/conv_transpose/linear before it (prepare_pt2e)",
                createFoldBatchNormPass});
}

}  // namespace pt2q
