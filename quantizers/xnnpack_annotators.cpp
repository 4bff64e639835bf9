// XNNPACK's annotators (torchao's _xnnpack_quantizer_utils / ExecuTorch's xnnpack_quantizer_utils),
// one function per pattern, on the IR. Differences, all where torchao does nothing useful on
// current torch: cat, adaptive_avg_pool2d and GRU are found by operator rather than by
// source_fn_stack (torch.export no longer records it); module filters skip parameter and input
// nodes (which carry no module path); conv_transpose weights are per-channel along axis 1.
#include <c10/util/Exception.h>

#include <cmath>

#include "quantizers/annotators.h"

namespace pt2q {
namespace {

bool isCall(const Node* n, std::initializer_list<const char*> targets) {
  if (n->kind() != NodeKind::kCallFunction) return false;
  for (const char* t : targets) {
    if (n->target() == t) return true;
  }
  return false;
}

Node* argNode(const Node* n, size_t i) {
  return i < n->args().size() && n->args()[i].isNode() ? n->args()[i].node() : nullptr;
}

bool isAnnotated(std::initializer_list<const Node*> nodes) {
  for (const Node* n : nodes) {
    if (n != nullptr && !n->meta().annotation.empty() && annotationOf(n).annotated) return true;
  }
  return false;
}

void markAnnotated(std::initializer_list<Node*> nodes) {
  for (Node* n : nodes) {
    if (n == nullptr) continue;
    Annotation a = annotationOf(n);
    a.annotated = true;
    setAnnotation(n, a);
  }
}

// A module filter applies to the nodes of the pattern that carry a module path (not parameters
// and inputs).
bool allowed(const AnnotatorContext& c, std::initializer_list<const Node*> nodes) {
  for (const Node* n : nodes) {
    if (n == nullptr || n->kind() == NodeKind::kGetAttr || n->kind() == NodeKind::kPlaceholder) continue;
    if (!c.allows(n)) return false;
  }
  return true;
}

void setInput(Annotation& a, const Node* arg, const QSpecRef& ref) {
  for (auto& [name, r] : a.inputs) {
    if (name == arg->name()) {
      r = ref;
      return;
    }
  }
  a.inputs.emplace_back(arg->name(), ref);
}

// input act, weight and (if present) bias of a conv/linear-like node.
Annotation weightedInputs(const Node* op, const RoleSpecs& r, const QSpecRef& weight) {
  Annotation a;
  setInput(a, argNode(op, 0), r.input_activation);
  setInput(a, argNode(op, 1), weight);
  if (Node* b = argNode(op, 2)) setInput(a, b, r.bias);
  return a;
}

bool weightedShape(const Node* op) { return argNode(op, 0) != nullptr && argNode(op, 1) != nullptr; }

// Claims a pattern: `inputs` on the op, the output spec on the op or, when a relu is fused
// after it, on the relu.
void claim(AnnotatorContext& c, Node* op, Node* relu, Annotation inputs) {
  inputs.annotated = true;
  if (relu == nullptr) inputs.output = c.roles.output_activation;
  setAnnotation(op, inputs);
  if (relu != nullptr) {
    Annotation out;
    out.output = c.roles.output_activation;
    out.annotated = true;
    setAnnotation(relu, out);
  }
}

// A conv/linear-like op: activation, weight and bias inputs.
void annotateWeighted(AnnotatorContext& c, Node* op, Node* relu, const QSpecRef& weight) {
  claim(c, op, relu, weightedInputs(op, c.roles, weight));
  markAnnotated({argNode(op, 1), argNode(op, 2)});
}

const std::initializer_list<const char*> kRelu = {"aten.relu", "aten.relu_"};
const std::initializer_list<const char*> kConv = {"aten.conv1d", "aten.conv1d.padding", "aten.conv2d",
                                                  "aten.conv2d.padding", "aten.conv3d", "aten.conv3d.padding"};
const std::initializer_list<const char*> kConvT = {"aten.conv_transpose1d", "aten.conv_transpose2d.input",
                                                   "aten.conv_transpose3d.input"};

// Per-channel transposed-conv weights are quantized along axis 1 (output channels) only when
// groups == 1; grouped ones are left float rather than quantized along the wrong axis.
bool transposedWeightOk(const Node* conv, const QSpecRef& weight) {
  const auto axis = weight.attr("ch_axis");
  if (!axis || *axis == "None") return true;
  const Argument g = conv->args().size() > 6 ? conv->args()[6] : Argument(int64_t{1});
  return g.is<int64_t>() && g.as<int64_t>() == 1;
}

void linear(AnnotatorContext& c) {
  for (Node* n : c.graph.nodes()) {
    if (!isCall(n, {"aten.linear"}) || !weightedShape(n) || !allowed(c, {n})) continue;
    if (isAnnotated({n})) continue;
    annotateWeighted(c, n, nullptr, c.roles.weight);
  }
}

// relu(op(...)) with op's only user the relu: op gets the inputs, relu the output.
void fusedRelu(AnnotatorContext& c, std::initializer_list<const char*> ops, bool transposed) {
  for (Node* relu : c.graph.nodes()) {
    if (!isCall(relu, kRelu)) continue;
    Node* op = argNode(relu, 0);
    if (op == nullptr || !isCall(op, ops) || op->users().size() > 1 || !weightedShape(op)) continue;
    const QSpecRef& w = transposed ? c.roles.transposed_weight : c.roles.weight;
    if (transposed && !transposedWeightOk(op, w)) continue;
    if (isAnnotated({relu, op, argNode(op, 1), argNode(op, 2)})) continue;
    if (!allowed(c, {relu, op})) continue;
    annotateWeighted(c, op, relu, w);
  }
}

void linearRelu(AnnotatorContext& c) { fusedRelu(c, {"aten.linear"}, false); }
void convRelu(AnnotatorContext& c) { fusedRelu(c, kConv, false); }
void convTransposeRelu(AnnotatorContext& c) { fusedRelu(c, kConvT, true); }

void conv(AnnotatorContext& c) {
  for (Node* n : c.graph.nodes()) {
    if (!isCall(n, {"aten.conv1d", "aten.conv2d"}) || !weightedShape(n)) continue;
    if (isAnnotated({n, argNode(n, 1), argNode(n, 2)}) || !allowed(c, {n})) continue;
    annotateWeighted(c, n, nullptr, c.roles.weight);
  }
}

void convTranspose(AnnotatorContext& c) {
  for (Node* n : c.graph.nodes()) {
    if (!isCall(n, kConvT) || !weightedShape(n) || !transposedWeightOk(n, c.roles.transposed_weight)) continue;
    if (isAnnotated({n, argNode(n, 1), argNode(n, 2)}) || !allowed(c, {n})) continue;
    annotateWeighted(c, n, nullptr, c.roles.transposed_weight);
  }
}

// torch.histc (HistogramObserver) cannot take a scalar beyond 3.4e15; observers need fp32.
bool skipsInput(const Graph& g, const Node* x) {
  if (x->kind() == NodeKind::kGetAttr) {
    auto it = g.constants().find(x->target());
    if (it != g.constants().end() && it->second.numel() == 1 &&
        std::fabs(it->second.item<double>()) > 3.4028235e15) {
      return true;
    }
  }
  const auto& t = x->meta().types;
  return x->meta().tuple_output || t.size() != 1 || t[0].kind != ValueType::Kind::kTensor || !t[0].dtype ||
         *t[0].dtype != c10::kFloat;
}

// add/mul[-relu]: both tensor inputs and the output (on the relu when fused).
void binary(AnnotatorContext& c, std::initializer_list<const char*> ops, bool with_relu) {
  for (Node* n : c.graph.nodes()) {
    Node* op = n;
    Node* relu = nullptr;
    if (with_relu) {
      if (!isCall(n, kRelu)) continue;
      relu = n;
      op = argNode(n, 0);
      if (op == nullptr || !isCall(op, ops) || op->users().size() > 1) continue;
    } else if (!isCall(n, ops)) {
      continue;
    }
    if (isAnnotated({relu, op}) || !allowed(c, {relu, op})) continue;
    Annotation a;
    bool skip = false;
    for (size_t i = 0; i < 2; ++i) {
      Node* x = argNode(op, i);
      if (x == nullptr) continue;
      if (skipsInput(c.graph, x)) {
        skip = true;
        break;
      }
      setInput(a, x, c.roles.input_activation);
    }
    if (!skip) claim(c, op, relu, a);
  }
}

QSpecRef sharedWith(const Node* node, const Node* user = nullptr) {
  QSpecRef r;
  r.kind = QSpecRef::Kind::kShared;
  r.shared = {node->name(), user ? user->name() : ""};
  return r;
}

// cat: the first input gets the input spec; every other input and the output share it.
void cat(AnnotatorContext& c) {
  for (Node* n : c.graph.nodes()) {
    if (!isCall(n, {"aten.cat"}) || n->args().empty() || !n->args()[0].is<ArgList>()) continue;
    if (isAnnotated({n}) || !allowed(c, {n})) continue;
    const auto& items = n->args()[0].as<ArgList>().items;
    if (items.empty() || !items[0].isNode()) continue;
    Node* first = items[0].node();
    Annotation a;
    setInput(a, first, c.roles.input_activation);
    const QSpecRef shared = sharedWith(first, n);
    for (size_t i = 1; i < items.size(); ++i) {
      if (!items[i].isNode()) continue;
      bool seen = false;
      for (const auto& kv : a.inputs) seen = seen || kv.first == items[i].node()->name();
      if (!seen) setInput(a, items[i].node(), shared);
    }
    a.output = shared;
    a.annotated = true;
    setAnnotation(n, a);
  }
}

// adaptive_avg_pool2d: input shares its producer's output spec if it has one, else gets the
// input spec; the output shares the input edge.
void adaptiveAvgPool2d(AnnotatorContext& c) {
  for (Node* n : c.graph.nodes()) {
    if (!isCall(n, {"aten.adaptive_avg_pool2d"}) || argNode(n, 0) == nullptr) continue;
    if (isAnnotated({n}) || !allowed(c, {n})) continue;
    Node* in = argNode(n, 0);
    const Annotation prev = annotationOf(in);
    Annotation a;
    setInput(a, in, prev.annotated && prev.output.kind != QSpecRef::Kind::kNone ? sharedWith(in)
                                                                                : c.roles.input_activation);
    a.output = sharedWith(in, n);
    a.annotated = true;
    setAnnotation(n, a);
  }
}

// GRU: only its inputs and outputs are quantized; the cell computes in float.
void gruIoOnly(AnnotatorContext& c) {
  for (Node* n : c.graph.nodes()) {
    if (!isCall(n, {"aten.gru.input"}) || argNode(n, 0) == nullptr || argNode(n, 1) == nullptr) continue;
    std::vector<Node*> outputs;
    for (Node* u : n->users()) {
      if (u->target() == "_operator.getitem") outputs.push_back(u);
    }
    Node* x = argNode(n, 0);
    Node* h = argNode(n, 1);
    if (outputs.size() != 2 || isAnnotated({n, outputs[0], outputs[1]}) || !allowed(c, {n})) continue;
    for (Node* in : {x, h}) {
      Node* user = in->users().front();
      Annotation a;
      setInput(a, in, c.roles.input_activation);
      a.annotated = true;
      setAnnotation(user, a);
    }
    for (Node* o : outputs) {
      Annotation a;
      a.output = c.roles.output_activation;
      a.annotated = true;
      setAnnotation(o, a);
    }
    markAnnotated({n});
  }
}

}  // namespace

void propagateAnnotation(Graph& g) {
  static const std::set<std::string> kShareOps = {
      "aten.relu", "aten.hardtanh", "aten.hardtanh_", "aten.max_pool2d", "aten.mean", "aten.mean.dim",
      "aten.permute", "aten.permute_copy", "aten.squeeze.dim", "aten.squeeze_copy.dim", "aten.adaptive_avg_pool2d",
      "aten.view_copy", "aten.view", "aten.slice_copy.Tensor", "aten.flatten.using_ints"};
  for (Node* n : g.nodes()) {
    if (n->kind() != NodeKind::kCallFunction || !kShareOps.count(n->target())) continue;
    Node* prev = argNode(n, 0);
    if (prev == nullptr || prev->meta().annotation.empty()) continue;
    if (annotationOf(prev).output.kind == QSpecRef::Kind::kNone) continue;
    if (!n->meta().annotation.empty() && annotationOf(n).annotated) continue;
    Annotation a;
    setInput(a, prev, sharedWith(prev));
    a.output = sharedWith(prev);
    a.annotated = true;
    setAnnotation(n, a);
  }
}

void registerXnnpackAnnotators(AnnotatorRegistry& r) {
  r.add("linear", linear);
  r.add("linear_relu", linearRelu);
  r.add("conv", conv);
  r.add("conv_relu", convRelu);
  r.add("conv_transpose", convTranspose);
  r.add("conv_transpose_relu", convTransposeRelu);
  r.add("adaptive_avg_pool2d", adaptiveAvgPool2d);
  r.add("gru_io_only", gruIoOnly);
  r.add("add", [](AnnotatorContext& c) { binary(c, {"aten.add.Tensor", "aten.add_.Tensor"}, false); });
  r.add("add_relu", [](AnnotatorContext& c) { binary(c, {"aten.add.Tensor", "aten.add_.Tensor"}, true); });
  r.add("mul", [](AnnotatorContext& c) { binary(c, {"aten.mul.Tensor", "aten.mul_.Tensor"}, false); });
  r.add("mul_relu", [](AnnotatorContext& c) { binary(c, {"aten.mul.Tensor", "aten.mul_.Tensor"}, true); });
  r.add("cat", cat);
}

}  // namespace pt2q
