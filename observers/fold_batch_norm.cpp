// fold-batch-norm: eval-mode BatchNorm folded into the conv, conv_transpose or linear that feeds
// it (prepare_pt2e step 2-3, torchao's _fuse_conv_bn_ / _fuse_linear_bn_), with
// torch.nn.utils.fusion's arithmetic op for op so that folded weights match bit for bit.
//
// Before:
//   %conv = aten.conv2d.default(%x, %w, %b)
//   %bn = aten.batch_norm.default(%conv, %g, %beta, %mean, %var, false, 0.1, 1e-05, false)
//   %y = aten.relu.default(%bn)
// After (constants w and b replaced by the folded ones; a conv without bias gets "<w>_bias"):
//   %conv = aten.conv2d.default(%x, %w, %b)
//   %y = aten.relu.default(%conv)
#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "graph/pass.h"

namespace pt2q {
namespace {

bool isConv(const Node* n) {
  static const std::set<std::string> kConv = {"aten.conv1d", "aten.conv1d.padding", "aten.conv2d",
                                              "aten.conv2d.padding", "aten.conv3d", "aten.conv3d.padding"};
  return n->kind() == NodeKind::kCallFunction && kConv.count(n->target());
}

bool isConvTranspose(const Node* n) {
  static const std::set<std::string> kConvT = {"aten.conv_transpose1d", "aten.conv_transpose2d.input",
                                               "aten.conv_transpose3d.input"};
  return n->kind() == NodeKind::kCallFunction && kConvT.count(n->target());
}

bool isLinear(const Node* n) { return n->kind() == NodeKind::kCallFunction && n->target() == "aten.linear"; }

bool isBatchNorm(const Node* n) {
  return n->kind() == NodeKind::kCallFunction && (n->target() == "aten.batch_norm" ||
                                                  n->target() == "aten._native_batch_norm_legit_no_training");
}

// The positional argument `i` of a call, or its keyword `name`, or None.
Argument argOf(const Node* n, size_t i, const std::string& name) {
  if (i < n->args().size()) return n->args()[i];
  for (const auto& [k, v] : n->kwargs()) {
    if (k == name) return v;
  }
  return Argument();
}

struct Folder {
  Graph& g;
  std::set<std::string> folded_weights;  // constant paths

  at::Tensor constantOf(const Argument& a, const Node* bn, const char* what) {
    if (a.isNone()) return at::Tensor();
    TORCH_CHECK(a.isNode() && a.node()->kind() == NodeKind::kGetAttr, "fold-batch-norm: %", bn->name(), ": its ",
                what, " is not a constant (a get_attr node)");
    auto it = g.constants().find(a.node()->target());
    TORCH_CHECK(it != g.constants().end(), "fold-batch-norm: %", bn->name(), ": constant \"", a.node()->target(),
                "\" is missing");
    return it->second;
  }

  // Folds `bn` into `op` (conv/linear) whose weight is args[1] and bias args[2] (may be absent).
  // fake: the weight was folded before (shared by two convs): keep the weights, drop the BN.
  void fold(Node* op, Node* bn, bool linear) {
    const bool legit = bn->target() == "aten._native_batch_norm_legit_no_training";
    const at::Tensor bn_w = constantOf(argOf(bn, 1, "weight"), bn, "weight");
    const at::Tensor bn_b = constantOf(argOf(bn, 2, "bias"), bn, "bias");
    const at::Tensor rm = constantOf(argOf(bn, 3, "running_mean"), bn, "running mean");
    const at::Tensor rv = constantOf(argOf(bn, 4, "running_var"), bn, "running variance");
    const Argument eps_arg = argOf(bn, legit ? 6 : 7, "eps");
    TORCH_CHECK(eps_arg.is<double>(), "fold-batch-norm: %", bn->name(), ": eps is not a number");
    const double eps = eps_arg.as<double>();
    Node* w_node = op->args()[1].node();
    const Argument b_arg = op->args().size() > 2 ? op->args()[2] : Argument();
    const at::Tensor w = constantOf(op->args()[1], bn, "conv/linear weight");
    const at::Tensor b = constantOf(b_arg, bn, "conv/linear bias");
    const bool fake = !folded_weights.insert(w_node->target()).second;

    at::Tensor fused_w = w, fused_b;
    const at::Tensor rm_like_zero = at::zeros_like(rm);
    if (fake) {
      fused_b = b.defined() ? b : rm_like_zero;
    } else {
      const at::Tensor bias = b.defined() ? b : rm_like_zero;
      const at::Tensor gamma = bn_w.defined() ? bn_w : at::ones_like(rm);
      const at::Tensor beta = bn_b.defined() ? bn_b : rm_like_zero;
      const c10::ScalarType bias_dtype = b.defined() ? b.scalar_type() : w.scalar_type();
      if (linear) {  // fuse_linear_bn_weights
        const at::Tensor scale = gamma * at::rsqrt(rv + eps);
        fused_w = w * scale.unsqueeze(-1).to(w.scalar_type());
        fused_b = ((bias - rm) * scale + beta).to(bias_dtype);
      } else {  // fuse_conv_bn_weights
        const at::Tensor var_rsqrt = at::rsqrt(rv + eps);
        std::vector<int64_t> shape(static_cast<size_t>(w.dim()), 1);
        shape[isConvTranspose(op) ? 1 : 0] = -1;
        fused_w = (w * (gamma * var_rsqrt).reshape(shape)).to(w.scalar_type());
        fused_b = ((bias - rm) * var_rsqrt * gamma + beta).to(bias_dtype);
      }
    }
    g.constants()[w_node->target()] = fused_w.detach().requires_grad_(w.requires_grad());
    std::vector<Argument> args = op->args();
    if (args.size() == 2) args.emplace_back();
    if (b_arg.isNode()) {
      g.constants()[b_arg.node()->target()] = fused_b.detach().requires_grad_(b.requires_grad());
    } else {
      // A weight folded before already has its folded bias here (one BatchNorm for all its convs).
      const std::string path = w_node->target() + "_bias";
      if (!fake) g.constants()[path] = fused_b.detach();
      args[2] = Argument(g.create(NodeKind::kGetAttr, path, {}, {}, g.uniqueName(w_node->name() + "_bias"), op));
    }
    op->setArgs(std::move(args), op->kwargs());
    if (!legit) {
      g.replaceAllUsesWith(bn, op);
    } else {
      for (Node* u : std::vector<Node*>(bn->users())) {
        if (u->target() == "_operator.getitem" && u->args().size() == 2 && u->args()[1].is<int64_t>() &&
            u->args()[1].as<int64_t>() == 0) {
          g.replaceAllUsesWith(u, op);
        }
      }
    }
  }

  // Why the convs (or linears) in `group`, which share one weight, cannot take their
  // BatchNorms, or "" when they can. Folding rewrites the weight (and bias) constants and the op's
  // value, so every other reader of those would change: torchao folds anyway, giving wrong
  // prepared models (pytorch/ao's shared-weight test uses a BatchNorm with zero mean and shift,
  // where a lost bias does not show).
  std::string whyNotFoldable(const std::vector<std::pair<Node*, Node*>>& group) {
    std::set<const Node*> ops;
    for (const auto& [op, bn] : group) ops.insert(op);
    auto usedOnlyBy = [&](const std::string& path, size_t index) -> std::string {
      for (Node* n : g.nodes()) {
        if (n->kind() != NodeKind::kGetAttr || n->target() != path) continue;
        for (Node* u : n->users()) {
          const bool ok = ops.count(u) && u->args().size() > index && u->args()[index].isNode() &&
                          u->args()[index].node() == n;
          if (!ok) return "\"" + path + "\" is also used by %" + u->name();
        }
      }
      return "";
    };
    const auto& [op0, bn0] = group.front();
    for (const auto& [op, bn] : group) {
      for (Node* u : op->users()) {
        if (u != bn) return "the output of %" + op->name() + " is also used by %" + u->name();
      }
    }
    if (std::string why = usedOnlyBy(op0->args()[1].node()->target(), 1); !why.empty()) return why;
    auto biasPath = [](const Node* op) -> std::string {
      return op->args().size() > 2 && op->args()[2].isNode() ? op->args()[2].node()->target() : "";
    };
    for (const auto& [op, bn] : group) {
      if (biasPath(op) != biasPath(op0)) {
        return "%" + op0->name() + " and %" + op->name() + " share a weight but not a bias";
      }
    }
    if (!biasPath(op0).empty()) {
      if (std::string why = usedOnlyBy(biasPath(op0), 2); !why.empty()) return why;
    }
    const bool legit = bn0->target() == "aten._native_batch_norm_legit_no_training";
    for (const auto& [op, bn] : group) {
      bool same = bn->target() == bn0->target() && argOf(bn, legit ? 6 : 7, "eps") == argOf(bn0, legit ? 6 : 7, "eps");
      const char* names[] = {"weight", "bias", "running_mean", "running_var"};
      for (size_t i = 0; i < 4 && same; ++i) {
        const at::Tensor a = constantOf(argOf(bn, i + 1, names[i]), bn, names[i]);
        const at::Tensor b = constantOf(argOf(bn0, i + 1, names[i]), bn0, names[i]);
        same = a.defined() == b.defined() && (!a.defined() || (a.sizes() == b.sizes() && at::equal(a, b)));
      }
      if (!same) {
        return "%" + op0->name() + " and %" + op->name() + " share a weight but feed different BatchNorms (%" +
               bn0->name() + ", %" + bn->name() + ")";
      }
    }
    return "";
  }

  void run(bool linear) {
    std::vector<std::pair<Node*, Node*>> pairs;
    for (Node* bn : g.nodes()) {
      if (!isBatchNorm(bn) || bn->args().empty() || !bn->args()[0].isNode()) continue;
      Node* op = bn->args()[0].node();
      if (linear ? !isLinear(op) : !(isConv(op) || isConvTranspose(op))) continue;
      if (op->args().size() < 2 || !op->args()[1].isNode()) continue;
      if (linear && op->args()[0].isNode()) {
        // Linear acts on the last dim, BatchNorm on dim 1: the same only for 2-d input (pytorch/ao#4116).
        const NodeMeta& m = op->args()[0].node()->meta();
        if (m.types.size() == 1 && m.types[0].shape && m.types[0].shape->size() > 2) {
          TORCH_WARN("Not fusing linear+bn for node '", op->name(), "': the linear input is ",
                     m.types[0].shape->size(), "-D so Linear and BatchNorm operate on different dimensions");
          continue;
        }
      }
      pairs.emplace_back(op, bn);
    }
    // Ops sharing a weight fold together or not at all (the first folds, the rest reuse it). The
    // pairs are all found before any fold, so a second BatchNorm after a folded one is not
    // folded into the already folded weight as a repeat of the first (torchao drops it so).
    // A weight that is not a constant keeps a group of its own (fold names it in its error).
    auto weightKey = [](const Node* op) {
      const Node* w = op->args()[1].node();
      return w->kind() == NodeKind::kGetAttr ? "attr " + w->target() : "node " + w->name();
    };
    std::map<std::string, std::vector<std::pair<Node*, Node*>>> by_weight;
    for (const auto& p : pairs) by_weight[weightKey(p.first)].push_back(p);
    std::set<std::string> skipped;
    for (const auto& [key, group] : by_weight) {
      const std::string why = whyNotFoldable(group);
      if (why.empty()) continue;
      skipped.insert(key);
      TORCH_WARN("fold-batch-norm: not folding the BatchNorm after %", group.front().first->name(), ": ", why);
    }
    for (const auto& [op, bn] : pairs) {
      if (!skipped.count(weightKey(op))) fold(op, bn, linear);
    }
  }
};

bool hasBatchNorm(const Graph& g) {
  for (Node* n : g.nodes()) {
    if (isBatchNorm(n)) return true;
  }
  return false;
}

class FoldBatchNormPass final : public Pass {
 public:
  PassResult run(Graph& graph) override {
    PassResult r;
    if (!hasBatchNorm(graph)) return r;
    Folder f{graph, {}};
    f.run(false);
    PassResult dce = createDeadCodeEliminationPass()->run(graph);
    f.folded_weights.clear();
    f.run(true);
    dce = createDeadCodeEliminationPass()->run(graph);
    // torchao erases a BatchNorm left without users even in train mode, where it would be kept
    // as a mutating op.
    for (Node* n : graph.nodes()) {
      if (isBatchNorm(n) && n->users().empty()) {
        graph.erase(n);
        ++r.num_rewrites;
      }
    }
    createDeadCodeEliminationPass()->run(graph);
    r.changed = true;
    return r;
  }
};

}  // namespace

std::unique_ptr<Pass> createFoldBatchNormPass() { return std::make_unique<FoldBatchNormPass>(); }

}  // namespace pt2q
