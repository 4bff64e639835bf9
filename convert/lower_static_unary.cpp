// lower-to-native, elementwise unary chains: a per-tensor dequantize, then one or more elementwise
// unary ops with literal arguments (hardtanh, hardswish, silu, sigmoid, gelu, ...; see unaryOps()),
// then a per-tensor quantize, becomes pt2q.lookup_q8 on the codes. Each input code gives exactly
// one output code, so the chain is a 256-entry table, computed here by running the chain's own
// steps on the 256 codes: dequantize_per_tensor's fp32 arithmetic, the ops themselves through the
// dispatcher (graph/interpreter.h) on the graph's device, then quantize_per_tensor's (a NaN gives
// qmin, as pt2q's quantize does: kernels/README.md, Note [NaN codes]). One pass over bytes instead
// of three over fp32 (dequantize, the op, quantize): XNNPACKQuantizer leaves ReLU6, Hardswish and
// SiLU unfused between convolutions (35 such chains in torchvision's mobilenet_v2).
//
// Matched after the static chains, adds and pools (a relu or hardtanh that closes a conv's chain
// folds into its clamp there). Each op of the chain feeds only the next; an in-place op
// (nn.ReLU6(inplace=True) exports as aten.hardtanh_) also needs its input to feed nothing else, as it
// overwrites it. The table lives on the device of the graph's constants; a graph with constants on
// several devices, or none, keeps its chains.
//
// The codes match the q/dq chain's wherever the op computes the same fp32 value for an element
// wherever it sits in the tensor. That is exact arithmetic for relu, hardtanh, clamp, hardswish,
// hardsigmoid, neg, abs and the scalar mul / add / sub / div; for exp-based ops (sigmoid, silu,
// tanh, gelu, elu) ATen's CPU kernels run the tail of a tensor through a scalar path that can round
// differently from the vector path by an ulp, which changes a code only where the value lies on a
// rounding boundary (tests/pt2e/test_lower_unary.py compares whole models).
//
// Before:
//   %d = quantized_decomposed.dequantize_per_tensor(%c, 0.04, -10, -128, 127, torch.int8)
//   %h = aten.hardtanh_(%d, 0.0, 6.0)
//   %q = quantized_decomposed.quantize_per_tensor(%h, 0.02, -128, -128, 127, torch.int8)
// After:
//   %t = get_attr "_lookup_table0"         // int8 [256]: entry i is the chain's code for int8 code i
//   %q = pt2q.lookup_q8(%c, %t)
#include <ATen/ATen.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "convert/native_lowering.h"
#include "convert/static_qdq.h"
#include "graph/interpreter.h"

namespace pt2q {
namespace {

// Elementwise ops of one tensor whose other arguments are literals: target -> writes its input.
const std::map<std::string, bool>& unaryOps() {
  static const std::map<std::string, bool> ops = {
      {"aten.relu", false},         {"aten.relu_", true},         {"aten.hardtanh", false},
      {"aten.hardtanh_", true},     {"aten.hardswish", false},    {"aten.hardswish_", true},
      {"aten.hardsigmoid", false},  {"aten.hardsigmoid_", true},  {"aten.sigmoid", false},
      {"aten.sigmoid_", true},      {"aten.silu", false},         {"aten.silu_", true},
      {"aten.tanh", false},         {"aten.tanh_", true},         {"aten.gelu", false},
      {"aten.gelu_", true},         {"aten.leaky_relu", false},   {"aten.leaky_relu_", true},
      {"aten.elu", false},          {"aten.elu_", true},          {"aten.clamp", false},
      {"aten.clamp_", true},        {"aten.clamp_min", false},    {"aten.clamp_max", false},
      {"aten.neg", false},          {"aten.abs", false},          {"aten.mul.Scalar", false},
      {"aten.add.Scalar", false},   {"aten.sub.Scalar", false},   {"aten.div.Scalar", false},
  };
  return ops;
}

bool literal(const Argument& a) {
  bool any = false;
  forEachNode(a, [&](Node*) { any = true; });
  return !any;
}

struct UnarySite {
  Node* q;
  PerTensor in, out;
  std::vector<Node*> chain;  // first op first
  std::vector<Node*> to_int8;  // none: the codes keep their dtypes (lowerQuantizeSites' field)
};

std::optional<UnarySite> match(Node* qn) {
  auto q = perTensor(qn, kQuantizePerTensor);
  if (!q || !q->input.isNode()) return std::nullopt;
  std::vector<Node*> chain;
  Node* y = q->input.node();
  for (auto it = unaryOps().find(y->target()); y->kind() == NodeKind::kCallFunction && it != unaryOps().end();
       it = unaryOps().find(y->target())) {
    const auto& a = y->args();
    if (y->users().size() != 1 || a.empty() || !a[0].isNode()) return std::nullopt;
    for (size_t i = 1; i < a.size(); ++i) {
      if (!literal(a[i])) return std::nullopt;
    }
    for (const auto& [name, v] : y->kwargs()) {
      if (!literal(v)) return std::nullopt;
    }
    // Removing an in-place op must not change what another user of its input would have read.
    if (it->second && a[0].node()->users().size() != 1) return std::nullopt;
    chain.insert(chain.begin(), y);
    y = a[0].node();
  }
  if (chain.empty()) return std::nullopt;
  auto in = perTensor(y, kDequantizePerTensor);
  if (!in || !in->input.isNode()) return std::nullopt;
  return UnarySite{qn, *in, *q, std::move(chain), {}};
}

// The q/dq chain's output code for each of the 256 input codes, entry i for code i as an unsigned
// byte, in the graph's own arithmetic (the file comment).
at::Tensor lookupTable(const UnarySite& s, c10::Device device) {
  const auto on = at::TensorOptions().device(device);
  at::Tensor codes = at::arange(256, on.dtype(at::kInt)).to(at::kByte);
  if (!s.in.is_uint8) codes = codes.view(at::kChar);
  const at::Tensor x = at::mul(at::sub(codes.to(at::kFloat), s.in.zero_point), s.in.scale);

  Graph chain;
  Node* prev = chain.addPlaceholder("x");
  for (Node* n : s.chain) {
    std::vector<Argument> args = n->args();
    args[0] = Argument(prev);
    prev = chain.create(NodeKind::kCallFunction, n->target(), std::move(args), n->kwargs());
  }
  chain.setOutput(Argument(prev));
  const at::Tensor y = Interpreter(chain).run({c10::IValue(x)}).toTensor();

  const at::Tensor r = at::add(at::round(at::mul(y, 1.0 / s.out.scale)), s.out.zero_point);
  const at::Tensor clamped = at::where(at::isnan(r), at::scalar_tensor(static_cast<double>(s.out.qmin), r.options()), r)
                                 .clamp(static_cast<double>(s.out.qmin), static_cast<double>(s.out.qmax));
  return clamped.to(s.out.is_uint8 ? at::kByte : at::kChar);
}

}  // namespace

int64_t lowerStaticUnaries(Graph& g, const std::set<std::string>& taken) {
  const auto device = constantsDevice(g);
  if (!device) return 0;
  return lowerQuantizeSites(g, match, [&](const UnarySite& s) {
    Node* table = addConstant(g, taken, "_lookup_table", lookupTable(s, *device), s.q);
    return std::make_pair(std::string("lookup_q8"), std::vector<Argument>{s.in.input, Argument(table)});
  });
}

}  // namespace pt2q
