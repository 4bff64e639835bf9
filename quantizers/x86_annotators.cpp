// X86InductorQuantizer's recipe (torchao's x86_inductor_quantizer.py) on the IR: conv2d and
// linear fusion patterns with their inputs quantized and outputs left to the next op
// (pytorch/pytorch#112140), mul, matmul, then propagation through int8-in-int8-out ops. torchao
// finds the patterns through source_fn_stack, which torch.export no longer records (so on
// current torch it quantizes almost nothing, pytorch/pytorch#160095); pt2q matches operators.
// torchao's patterns name module types (nn.ReLU, nn.ReLU6, nn.Hardswish, nn.SiLU, nn.LeakyReLU),
// whose inplace=True forms (torchvision's models use them throughout) export as aten.relu_,
// hardtanh_, hardswish_, silu_, leaky_relu_: those are matched too, and `x += y` (aten.add_.Tensor)
// as an add, which torchao's equivalent types make of operator.iadd and "add_".
#include <c10/util/Exception.h>

#include <set>

#include "quantizers/annotators.h"

namespace pt2q {
namespace {

const std::set<std::string> kInt8InInt8Out = {"aten.max_pool2d", "aten.cat", "aten.avg_pool2d",
                                              "aten.adaptive_avg_pool2d", "aten.flatten.using_ints"};
const std::set<std::string> kDefaultQuantizable = {"aten.max_pool2d", "aten.cat", "aten.avg_pool2d",
                                                   "aten.adaptive_avg_pool2d", "aten.flatten.using_ints",
                                                   "aten.conv1d", "aten.conv2d", "aten.linear", "aten.mul.Tensor"};
const std::set<std::string> kQuantizable = {"aten.max_pool2d", "aten.cat", "aten.avg_pool2d",
                                            "aten.adaptive_avg_pool2d", "aten.flatten.using_ints", "aten.conv1d",
                                            "aten.conv2d", "aten.linear", "aten.mul.Tensor", "aten.matmul"};

bool is(const Node* n, const char* target) { return n->kind() == NodeKind::kCallFunction && n->target() == target; }

Node* arg(const Node* n, size_t i) {
  return i < n->args().size() && n->args()[i].isNode() ? n->args()[i].node() : nullptr;
}

bool annotated(const Node* n) { return !n->meta().annotation.empty() && annotationOf(n).annotated; }

// _skip_annotate: skip if any node is claimed or the filter rejects the pattern.
bool skip(const AnnotatorContext& c, const std::vector<Node*>& nodes) {
  for (const Node* n : nodes) {
    if (annotated(n)) return true;
  }
  if (c.pattern_filter.empty()) {
    for (const Node* n : nodes) {
      if (!c.allows(n)) return true;
    }
    return false;
  }
  int matches = 0;
  for (const Node* n : nodes) {
    matches += c.pattern_filter == "global" ? static_cast<int>(kDefaultQuantizable.count(n->target()))
                                            : static_cast<int>(n->target() == c.pattern_filter);
  }
  TORCH_CHECK(matches <= 1, "X86InductorQuantizer: several nodes of one pattern (at %", nodes.front()->name(),
              ") match the config's ", c.pattern_filter == "global" ? "default quantizable operators" : c.pattern_filter);
  return matches != 1;
}

void claim(Node* n, bool quantized_output = false) {
  Annotation a;
  a.annotated = true;
  a.quantized_output = quantized_output;
  setAnnotation(n, a);
}

// conv/linear: activation, weight and bias inputs.
void weighted(const AnnotatorContext& c, Node* op, bool quantized_output) {
  if (c.config_is_none) {
    claim(op);
    return;
  }
  Annotation a;
  a.inputs.emplace_back(arg(op, 0)->name(), c.roles.input_activation);
  a.inputs.emplace_back(arg(op, 1)->name(), c.roles.weight);
  if (Node* b = arg(op, 2)) a.inputs.emplace_back(b->name(), c.roles.bias);
  a.annotated = true;
  a.quantized_output = quantized_output;
  setAnnotation(op, a);
}

bool weightedShape(const Node* op) { return arg(op, 0) != nullptr && arg(op, 1) != nullptr; }

// add(op, other) or add(other, op): the other input, or null.
Node* otherAddend(const Node* add, const Node* op) {
  if (arg(add, 0) == op) return arg(add, 1);
  if (arg(add, 1) == op) return arg(add, 0);
  return nullptr;
}

Node* onlyUser(const Node* n) { return n->users().size() == 1 ? n->users().front() : nullptr; }

// op -> add [-> relu]: conv2d's and linear's binary(-unary) fusions.
void binaryFusion(AnnotatorContext& c, const char* op_target, bool with_relu, bool quantize_extra) {
  for (Node* op : c.graph.nodes()) {
    if (!is(op, op_target) || !weightedShape(op)) continue;
    Node* add = onlyUser(op);
    if (add == nullptr || !(is(add, "aten.add.Tensor") || is(add, "aten.add_.Tensor"))) continue;
    Node* extra = otherAddend(add, op);
    if (extra == nullptr) continue;
    Node* relu = nullptr;
    if (with_relu) {
      for (Node* u : add->users()) {
        if (is(u, "aten.relu") || is(u, "aten.relu_")) relu = u;
      }
      if (relu == nullptr) continue;
    }
    std::vector<Node*> nodes{op, add};
    if (relu) nodes.insert(nodes.begin(), relu);
    if (skip(c, nodes)) continue;
    if (c.config_is_none) {
      for (Node* n : nodes) claim(n);
      continue;
    }
    weighted(c, op, false);
    Annotation b;
    if (quantize_extra) b.inputs.emplace_back(extra->name(), c.roles.input_activation);
    b.annotated = true;
    b.quantized_output = relu == nullptr;
    setAnnotation(add, b);
    if (relu) claim(relu, true);
  }
}

// op -> unary: the unary's output is the pattern's.
void unaryFusion(AnnotatorContext& c, std::initializer_list<const char*> ops, std::initializer_list<const char*> unaries) {
  for (Node* u : c.graph.nodes()) {
    bool unary = false;
    for (const char* t : unaries) unary = unary || is(u, t);
    if (!unary) continue;
    Node* op = arg(u, 0);
    if (op == nullptr || !weightedShape(op)) continue;
    bool match = false;
    for (const char* t : ops) match = match || is(op, t);
    if (!match || skip(c, {u, op})) continue;
    if (c.config_is_none) {
      claim(op);
      claim(u);
      continue;
    }
    weighted(c, op, false);
    claim(u, true);
  }
}

void single(AnnotatorContext& c, const char* target) {
  for (Node* op : c.graph.nodes()) {
    if (!is(op, target) || !weightedShape(op) || skip(c, {op})) continue;
    weighted(c, op, true);
  }
}

void conv2dFusions(AnnotatorContext& c) {
  binaryFusion(c, "aten.conv2d", true, true);
  binaryFusion(c, "aten.conv2d", false, true);
  unaryFusion(c, {"aten.conv2d"}, {"aten.relu", "aten.relu_", "aten.hardtanh", "aten.hardtanh_", "aten.hardswish",
                                    "aten.hardswish_", "aten.silu", "aten.silu_"});
  unaryFusion(c, {"aten.conv1d"}, {"aten.relu", "aten.relu_"});
  single(c, "aten.conv2d");
}

void linearFusions(AnnotatorContext& c) {
  binaryFusion(c, "aten.linear", true, false);
  binaryFusion(c, "aten.linear", false, false);
  unaryFusion(c, {"aten.linear"}, {"aten.relu", "aten.relu_", "aten.leaky_relu", "aten.leaky_relu_", "aten.tanh",
                                    "aten.gelu"});
  single(c, "aten.linear");
}

bool tensorOfShape(const Node* n, const Node* like) {
  const auto& a = n->meta().types;
  const auto& b = like->meta().types;
  return a.size() == 1 && b.size() == 1 && a[0].kind == ValueType::Kind::kTensor &&
         b[0].kind == ValueType::Kind::kTensor && a[0].shape && a[0].shape == b[0].shape;
}

void mulOrMatmul(AnnotatorContext& c, const char* target, bool same_shape) {
  for (Node* n : c.graph.nodes()) {
    if (!is(n, target) || skip(c, {n})) continue;
    if (c.config_is_none) {
      claim(n);
      continue;
    }
    Node* x = arg(n, 0);
    Node* y = arg(n, 1);
    if (x == nullptr || y == nullptr || (same_shape && !tensorOfShape(x, y))) continue;
    Annotation a;
    a.inputs.emplace_back(x->name(), c.roles.input_activation);
    if (y != x) a.inputs.emplace_back(y->name(), c.roles.input_activation);
    a.annotated = true;
    a.quantized_output = true;
    setAnnotation(n, a);
  }
}

bool quantizedOp(const Node* n) {
  if (n->meta().annotation.empty()) return false;
  const Annotation a = annotationOf(n);
  return a.annotated && a.quantized_output;
}

void propagation(AnnotatorContext& c) {
  for (Node* n : c.graph.nodes()) {
    if (n->kind() != NodeKind::kCallFunction || !kInt8InInt8Out.count(n->target()) || annotated(n)) continue;
    if (skip(c, {n})) continue;
    if (c.config_is_none) {
      claim(n);
      continue;
    }
    const std::vector<Node*> ins = n->inputs();
    if (ins.empty()) continue;
    if (n->target() == "aten.cat") {
      bool all = true;
      for (Node* i : ins) all = all && quantizedOp(i);
      if (!all || !n->args()[0].is<ArgList>()) continue;
      const auto& items = n->args()[0].as<ArgList>().items;
      Annotation a;
      a.inputs.emplace_back(items[0].node()->name(), c.roles.input_activation);
      QSpecRef shared;
      shared.kind = QSpecRef::Kind::kShared;
      shared.shared = {items[0].node()->name(), n->name()};
      for (size_t i = 1; i < items.size(); ++i) {
        bool seen = false;
        for (const auto& kv : a.inputs) seen = seen || kv.first == items[i].node()->name();
        if (!seen) a.inputs.emplace_back(items[i].node()->name(), shared);
      }
      a.annotated = true;
      a.quantized_output = true;
      setAnnotation(n, a);
      continue;
    }
    if (n->target() == "aten.flatten.using_ints" && !n->users().empty()) {
      bool feeds_quantizable = false;
      for (Node* u : n->users()) feeds_quantizable = feeds_quantizable || kQuantizable.count(u->target()) > 0;
      if (!feeds_quantizable) continue;
    }
    if (!quantizedOp(ins[0])) continue;
    Annotation a;
    a.inputs.emplace_back(ins[0]->name(), c.roles.input_activation);
    a.annotated = true;
    a.quantized_output = true;
    setAnnotation(n, a);
  }
}

}  // namespace

void annotateX86Int8Outputs(Graph& g) {
  for (Node* n : g.nodes()) {
    if (n->kind() != NodeKind::kCallFunction || !kInt8InInt8Out.count(n->target()) || !annotated(n)) continue;
    Annotation a = annotationOf(n);
    const std::vector<Node*> ins = n->inputs();
    if (!a.quantized_output || ins.empty()) continue;
    Node* in = n->target() == "aten.max_pool2d" ? arg(n, 0) : ins[0];
    if (in == nullptr) continue;
    a.output.kind = QSpecRef::Kind::kShared;
    a.output.shared = {in->name(), n->name()};
    setAnnotation(n, a);
  }
}

void registerX86Annotators(AnnotatorRegistry& r) {
  r.add("x86_conv2d_fusions", conv2dFusions);
  r.add("x86_linear_fusions", linearFusions);
  r.add("x86_matmul", [](AnnotatorContext& c) { mulOrMatmul(c, "aten.matmul", false); });
  r.add("x86_mul", [](AnnotatorContext& c) { mulOrMatmul(c, "aten.mul.Tensor", true); });
  r.add("x86_propagation", propagation);
}

}  // namespace pt2q
