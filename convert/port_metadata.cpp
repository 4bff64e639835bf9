// port-qdq-metadata: quantize/dequantize/choose_qparams nodes take the stack trace and the
// quantization_tag of the node whose annotation asked for them (torchao's PortNodeMetaForQDQ):
// the dequantize on an input takes its consumer's, the quantize on an output its producer's, a
// weight's quantize (and the view ops before it) the weight's, and a dynamic chain its consumer's.
//
// Before:  %q = quantize_per_tensor(%conv, ...)        {}   (no stack trace)
// After:   %q = quantize_per_tensor(%conv, ...)        {stack_trace = <%conv's>, "quantization_tag" = <%conv's>}
#include <algorithm>
#include <deque>
#include <set>

#include "convert/observers_to_qdq.h"
#include "convert/qdq_ops.h"
#include "quantizers/annotation.h"

namespace pt2q {
namespace {

constexpr const char* kQuantizationTag = "quantization_tag";
const std::set<std::string>& kQ = quantizeTargets();
const std::set<std::string> kDQ = [] {
  std::set<std::string> s = dequantizeTargets();
  s.insert("torchao.dequantize_affine");
  return s;
}();
const std::set<std::string> kChoose = {"torchao.choose_qparams_affine", "quantized_decomposed.choose_qparams.tensor",
                                       "quantized_decomposed.choose_qparams_symmetric.tensor",
                                       "quantized_decomposed.choose_qparams_per_token_asymmetric"};
const std::set<std::string> kViews = {"aten.flatten.using_ints", "aten.permute", "aten.permute_copy",
                                      "aten.slice_copy.Tensor", "aten.squeeze.dim", "aten.squeeze_copy.dim",
                                      "aten.transpose.int", "aten.transpose_", "aten.view_copy", "aten.view",
                                      "aten._mkldnn_transpose"};

bool in(const Node* n, const std::set<std::string>& s) { return callsOneOf(n, s); }

// torchao's _METADATA_TO_PORT: stack_trace, and the user key quantization_tag (node meta
// `extra`), each copied only when the source has it.
void port(Node* to, const Node* from) {
  if (!from->meta().stack_trace.empty()) to->meta().stack_trace = from->meta().stack_trace;
  for (const auto& [key, value] : from->meta().extra) {
    if (key != kQuantizationTag) continue;
    auto& extra = to->meta().extra;
    auto it = std::find_if(extra.begin(), extra.end(), [](const auto& kv) { return kv.first == kQuantizationTag; });
    if (it != extra.end()) {
      it->second = value;
    } else {
      extra.emplace_back(key, value);
    }
  }
}

std::vector<Node*> realUsers(const Node* n) {
  std::vector<Node*> out;
  for (Node* u : n->users()) {
    if (u->target() != "aten.sym_size.int" && u->target() != "aten.sym_numel") out.push_back(u);
  }
  return out;
}

Node* firstNodeArg(const Node* n) {
  return !n->args().empty() && n->args()[0].isNode() ? n->args()[0].node() : nullptr;
}

// Only quantization nodes between source and dest.
bool connected(const Node* source, const Node* dest) {
  while (dest != nullptr && (in(dest, kQ) || in(dest, kDQ) || dest->target() == "quantized_decomposed.choose_qparams.tensor")) {
    dest = firstNodeArg(dest);
  }
  return dest == source;
}

void portInput(Node* producer, Node* user, const QSpecRef& spec) {
  if (spec.kind == QSpecRef::Kind::kNone) return;
  if (spec.kind == QSpecRef::Kind::kSpec && spec.attr("is_dynamic") == std::optional<std::string>("True")) {
    // Breadth first over the users, each node once: the graph below is a DAG whose paths can
    // multiply with every layer.
    std::deque<Node*> queue(producer->users().begin(), producer->users().end());
    std::set<const Node*> seen(queue.begin(), queue.end());
    Node* choose = nullptr;
    while (!queue.empty() && choose == nullptr) {
      Node* n = queue.front();
      queue.pop_front();
      if (n->kind() == NodeKind::kOutput) continue;
      if (in(n, kChoose)) {
        choose = n;
        break;
      }
      for (Node* u : n->users()) {
        if (seen.insert(u).second) queue.push_back(u);
      }
    }
    if (choose == nullptr) return;
    std::vector<Node*> items = realUsers(choose);
    if (items.size() != 2 || items.back()->users().empty()) return;
    Node* q = items.back()->users().front();
    std::vector<Node*> q_users = realUsers(q);
    if (q_users.size() != 1) return;
    port(choose, user);
    port(q, user);
    port(q_users.front(), user);
    return;
  }
  Node* dq = nullptr;
  for (const Argument& a : user->args()) {
    if (a.isNode() && in(a.node(), kDQ) && connected(producer, a.node())) {
      dq = a.node();
      break;
    }
  }
  if (dq == nullptr) return;
  Node* q = firstNodeArg(dq);
  if (q == nullptr || !in(q, kQ)) return;
  std::vector<Node*> chain{q};
  Node* src = firstNodeArg(q);
  while (src != nullptr && src->kind() == NodeKind::kCallFunction && kViews.count(src->target())) {
    chain.push_back(src);
    src = firstNodeArg(src);
  }
  if (src != nullptr && src->kind() == NodeKind::kGetAttr) {
    for (Node* n : chain) port(n, src);
  }
  port(dq, user);
}

void portOutput(Node* producer, const QSpecRef& spec) {
  if (spec.kind == QSpecRef::Kind::kNone || producer->users().empty()) return;
  std::vector<Node*> users = realUsers(producer);
  if (users.empty()) return;
  Node* q = users.back();
  if (in(q, kQ)) port(q, producer);
}

}  // namespace

void portQDQMetadata(Graph& g) {
  for (Node* n : g.nodes()) {
    if (n->meta().annotation.empty()) continue;
    const Annotation a = annotationOf(n);
    if (!a.valid()) continue;
    for (const auto& [name, spec] : a.inputs) {
      if (Node* producer = g.findNode(name)) portInput(producer, n, spec);
    }
    portOutput(n, a.output);
  }
}

}  // namespace pt2q
