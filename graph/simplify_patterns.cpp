// simplify: value-preserving algebraic rewrites (a first pattern family; see rewrite.h).
#include "graph/pass.h"
#include "graph/rewrite.h"

namespace pt2q {
namespace {

// -(-x) is x bit for bit (two sign flips, NaN payloads included).
constexpr const char* kNegNeg = R"IR(graph @neg_neg(%x):
  %a = aten.neg(%x)
  %b = aten.neg(%a)
  return %b
)IR";
constexpr const char* kIdentity = R"IR(graph @identity(%x):
  return %x
)IR";

// relu(relu(x)) is relu(x).
constexpr const char* kReluRelu = R"IR(graph @relu_relu(%x):
  %a = aten.relu(%x)
  %b = aten.relu(%a)
  return %b
)IR";
constexpr const char* kRelu = R"IR(graph @relu(%x):
  %a = aten.relu(%x)
  return %a
)IR";

// Dropout in eval mode is the identity.
constexpr const char* kDropout = R"IR(graph @dropout(%x, %p, %train):
  %y = aten.dropout(%x, %p, %train)
  return %y
)IR";

std::string notTraining(const Match& m) {
  const Argument& train = m.argument("train");
  if (train.is<bool>() && !train.as<bool>()) return "";
  return "train is " + std::string(train.is<bool>() ? "true" : "not a constant");
}

class SimplifyPass final : public Pass {
 public:
  PassResult run(Graph& graph) override {
    RewritePatternSet patterns;
    populateSimplifyPatterns(patterns);
    const RewriteResult r = applyPatternsGreedily(graph, patterns);
    return {r.changed, r.num_rewrites};
  }
};

}  // namespace

void populateSimplifyPatterns(RewritePatternSet& patterns) {
  patterns.add({"neg-neg", kNegNeg, kIdentity, {}, 1});
  patterns.add({"relu-relu", kReluRelu, kRelu, {}, 1});
  patterns.add({"eval-dropout", kDropout, kIdentity, {notTraining}, 1});
}

std::unique_ptr<Pass> createSimplifyPass() { return std::make_unique<SimplifyPass>(); }

}  // namespace pt2q
