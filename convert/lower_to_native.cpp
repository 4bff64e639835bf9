// lower-to-native: weight-only quantized linears become pt2q's native ops, the weight packed at
// convert time (convert_pt2e(..., lower_to_native=True)). Matched: an int8 per-channel
// dequantize along the output channels on constant codes, scales and zero points, feeding the
// weight of aten.linear. Anything else stays quantize/dequantize and still runs.
//
// Before:
//   %w = get_attr "_frozen_param0"                        // int8 [N, K]
//   %dq = quantized_decomposed.dequantize_per_channel(%w, %s, %zp, 0, -127, 127, torch.int8)
//   %y = aten.linear(%x, %dq, %bias)
// After:
//   %p = get_attr "_packed_weight0"                        // pack_weight_int8(w), "n4k16"
//   %y = pt2q.linear_w8a16(%x, %p, %s, %zp, %bias)
#include "convert/lower_to_native.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include "convert/qdq_ops.h"
#include "graph/pass.h"

namespace pt2q {
namespace {

const at::Tensor* constantOf(const Graph& g, const Argument& a) {
  if (!a.isNode() || a.node()->kind() != NodeKind::kGetAttr) return nullptr;
  auto it = g.constants().find(a.node()->target());
  return it == g.constants().end() ? nullptr : &it->second;
}

// The dequantize feeding `linear`'s weight when it is a weight-only int8 per-channel one.
Node* weightOnlyDequantize(const Graph& g, const Node* linear) {
  if (linear->target() != "aten.linear" || linear->args().size() < 2 || !linear->kwargs().empty()) return nullptr;
  const Argument& wa = linear->args()[1];
  if (!wa.isNode() || wa.node()->target() != "quantized_decomposed.dequantize_per_channel") return nullptr;
  Node* dq = wa.node();
  const auto& a = dq->args();
  if (a.size() != 7 || !dq->kwargs().empty() || !a[3].is<int64_t>() || a[3].as<int64_t>() != 0 ||
      !a[6].is<c10::ScalarType>() || a[6].as<c10::ScalarType>() != c10::kChar) {
    return nullptr;
  }
  const at::Tensor* w = constantOf(g, a[0]);
  const at::Tensor* s = constantOf(g, a[1]);
  const at::Tensor* z = constantOf(g, a[2]);
  if (w == nullptr || s == nullptr || z == nullptr || w->scalar_type() != c10::kChar || w->dim() != 2 ||
      s->dim() != 1 || s->size(0) != w->size(0) || z->sizes() != s->sizes() || !w->device().is_cpu()) {
    return nullptr;
  }
  return dq;
}

at::Tensor packInt8(const at::Tensor& w) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("pt2q::pack_weight_int8", "")
                             .typed<at::Tensor(const at::Tensor&)>();
  return op.call(w);
}

}  // namespace

int64_t lowerToNative(Graph& g, const std::set<std::string>& taken) {
  std::vector<std::pair<Node*, Node*>> sites;  // (linear, dequantize)
  for (Node* n : g.nodes()) {
    if (n->kind() != NodeKind::kCallFunction) continue;
    if (Node* dq = weightOnlyDequantize(g, n)) sites.emplace_back(n, dq);
  }
  std::vector<at::Tensor> packed;
  for (const auto& [linear, dq] : sites) packed.push_back(packInt8(*constantOf(g, dq->args()[0])));  // all first
  int64_t next = 0;
  for (size_t i = 0; i < sites.size(); ++i) {
    auto [linear, dq] = sites[i];
    std::string name;
    do {
      name = "_packed_weight" + std::to_string(next++);
    } while (taken.count(name) || g.constants().count(name) || g.subgraphs().count(name));
    g.constants()[name] = packed[i];
    Node* attr = g.create(NodeKind::kGetAttr, name, {}, {}, g.uniqueName(name), linear);
    const Argument bias = linear->args().size() > 2 ? linear->args()[2] : Argument();
    // Symmetric weights have all-zero zero points: the kernel then skips their correction.
    const bool zero = !constantOf(g, dq->args()[2])->ne(0).any().item<bool>();
    const Argument zp = zero ? Argument() : dq->args()[2];
    Node* native = g.create(NodeKind::kCallFunction, "pt2q.linear_w8a16",
                            {linear->args()[0], Argument(attr), dq->args()[1], zp, bias}, {},
                            g.uniqueName("linear_w8a16"), linear);
    native->meta() = linear->meta();
    native->meta().annotation.clear();
    g.replaceAllUsesWith(linear, native);
    g.erase(linear);
  }
  createDeadCodeEliminationPass()->run(g);
  for (Node* n : g.nodes()) {
    if (n->kind() == NodeKind::kGetAttr && n->users().empty()) g.erase(n);
  }
  return static_cast<int64_t>(sites.size());
}

}  // namespace pt2q
