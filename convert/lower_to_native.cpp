// lower-to-native: quantized linears become pt2q's native ops, the weight packed at convert time
// (convert_pt2e(..., lower_to_native=True)). A match needs a dequantized constant weight on
// aten.linear: int8 codes per output channel (dequantize_per_channel, axis 0), per tensor
// (dequantize_per_tensor, symmetric: XNNPACK's default config; the scale becomes a constant of one
// fp32 value per output channel) or per group (dequantize_per_channel_group; codes in [-8, 7] with
// groups of a multiple of 32 take the int4 kernels). The linear's input picks the activation side: a per-token dynamic chain on x
// (choose_qparams_per_token_asymmetric -> quantize/dequantize_per_token) gives
// linear_w8a8 / linear_w4a8 on x, XNNPACK's per-tensor one (choose_qparams.tensor ->
// quantize/dequantize_per_tensor.tensor) the same with per_tensor_eps, anything else the
// weight-only linear_w8a16 / linear_w4a16.
// Anything else stays quantize/dequantize and still runs. Static chains (dq -> linear / conv2d
// [-> relu] -> q) are matched first, in lower_static_to_native.cpp, then static adds
// (lower_static_add.cpp) and max pooling (lower_static_pool.cpp), and MX weights
// (mx_dequantize -> linear) in lower_mx_to_native.cpp.
//
// Before (weight-only, per channel):
//   %w = get_attr "_frozen_param0"                        // int8 [N, K]
//   %dq = quantized_decomposed.dequantize_per_channel(%w, %s, %zp, 0, -127, 127, torch.int8)
//   %y = aten.linear(%x, %dq, %bias)
// After:
//   %p = get_attr "_packed_weight0"                        // pack_weight_int8(w), "n4k16"
//   %y = pt2q.linear_w8a16(%x, %p, %s, %zp, %bias)
//
// Before (dynamic per-token activations, int4 groups of 32):
//   %cq = quantized_decomposed.choose_qparams_per_token_asymmetric(%x, torch.int8)
//   %sx = _operator.getitem(%cq, 0)
//   %zx = _operator.getitem(%cq, 1)
//   %qx = quantized_decomposed.quantize_per_token(%x, %sx, %zx, -128, 127, torch.int8)
//   %dqx = quantized_decomposed.dequantize_per_token(%qx, %sx, %zx, -128, 127, torch.int8, torch.float32)
//   %dq = quantized_decomposed.dequantize_per_channel_group(%w, %s, %zp, -8, 7, torch.int8, 32, torch.float32)
//   %y = aten.linear(%dqx, %dq)
// After:
//   %p = get_attr "_packed_weight0"                        // pack_weight_int4(w), "n4k32"
//   %y = pt2q.linear_w4a8(%x, %p, %s, None, None)
#include "convert/lower_to_native.h"

#include <ATen/ATen.h>

#include <optional>
#include <utility>
#include <ATen/core/dispatch/Dispatcher.h>

#include "convert/native_lowering.h"
#include "convert/qdq_ops.h"
#include "graph/aliasing.h"
#include "graph/pass.h"

namespace pt2q {
namespace {

bool isInt(const Argument& a, int64_t v) { return a.is<int64_t>() && a.as<int64_t>() == v; }
bool isInt8(const Argument& a) { return a.is<c10::ScalarType>() && a.as<c10::ScalarType>() == c10::kChar; }

// A lowerable weight: the dequantize, its codes / scales / zero points, and the kernel width.
struct Weight {
  Node* dq = nullptr;
  const at::Tensor* codes = nullptr;
  Argument scales, zero_points;
  int bits = 8;
  std::optional<at::Tensor> new_scales;  // a per-tensor weight's, one per output channel (no zero points)
};

// dequantize_per_channel(w, s, zp, 0, qmin, qmax, int8) or
// dequantize_per_channel_group(w, s, zp, qmin, qmax, int8, group_size, out_dtype) on constants, or
// a symmetric per-tensor weight (perTensorWeight).
std::optional<Weight> lowerableWeight(const Graph& g, const Argument& wa) {
  if (!wa.isNode()) return std::nullopt;
  if (auto pt = perTensorWeight(g, wa); pt && pt->codes->dim() == 2) {
    return Weight{wa.node(), pt->codes, Argument(), Argument(), 8, std::move(pt->scales)};
  }
  Node* dq = wa.node();
  const auto& a = dq->args();
  // A bf16 / fp16 model's dequantize carries out_dtype: the native ops compute in fp32 and return
  // the input's dtype, as the dequantize-then-linear in that dtype does (up to its roundings).
  for (const auto& [key, value] : dq->kwargs()) {
    if (key != "out_dtype" || !value.is<c10::ScalarType>()) return std::nullopt;
  }
  const bool per_channel = dq->target() == "quantized_decomposed.dequantize_per_channel" && a.size() == 7 &&
                           isInt(a[3], 0) && isInt8(a[6]);
  const bool per_group = dq->target() == "quantized_decomposed.dequantize_per_channel_group" && a.size() == 8 &&
                         isInt8(a[5]) && a[3].is<int64_t>() && a[4].is<int64_t>() && a[6].is<int64_t>();
  if (!per_channel && !per_group) return std::nullopt;
  const at::Tensor* w = constantOf(g, a[0]);
  const at::Tensor* s = constantOf(g, a[1]);
  const at::Tensor* z = constantOf(g, a[2]);
  // CPU and CUDA have kernels for these ops (and pack the same bytes); other devices keep q/dq.
  if (w == nullptr || s == nullptr || z == nullptr || w->scalar_type() != c10::kChar || w->dim() != 2 ||
      !(w->device().is_cpu() || w->device().is_cuda()) || s->size(0) != w->size(0) || z->numel() != s->numel()) {
    return std::nullopt;
  }
  Weight out{dq, w, a[1], a[2], 8};
  if (per_channel) {
    if (s->dim() != 1) return std::nullopt;
  } else {
    const int64_t gs = a[6].as<int64_t>(), k = w->size(1);
    if (s->dim() != 2 || gs <= 0 || k % gs != 0 || s->size(1) != k / gs) return std::nullopt;
    const bool int4 = a[3].as<int64_t>() >= -8 && a[4].as<int64_t>() <= 7;
    if (int4 && gs % 32 == 0) {
      out.bits = 4;
    } else if (gs % 16 != 0) {
      return std::nullopt;
    }
    if (out.bits == 4 && (w->lt(-8).any().item<bool>() || w->gt(7).any().item<bool>())) return std::nullopt;
  }
  return out;
}

// The x of a per-token dynamic chain feeding `input`, or nullptr.
Node* perTokenSource(const Argument& input) {
  if (!input.isNode()) return nullptr;
  Node* dq = input.node();
  const auto& d = dq->args();
  if (dq->target() != "quantized_decomposed.dequantize_per_token" || d.size() < 6 || !d[0].isNode()) return nullptr;
  Node* q = d[0].node();
  const auto& qa = q->args();
  if (q->target() != "quantized_decomposed.quantize_per_token" || qa.size() != 6 || !qa[0].isNode()) return nullptr;
  Node* x = qa[0].node();
  for (const auto* args : {&qa, &d}) {
    if (!isInt((*args)[3], -128) || !isInt((*args)[4], 127) || !isInt8((*args)[5])) return nullptr;
  }
  // s and zp: getitem 0 / 1 of choose_qparams_per_token_asymmetric(x, int8), the same for q and dq.
  for (int i = 0; i < 2; ++i) {
    if (!(qa[1 + i] == d[1 + i]) || !qa[1 + i].isNode()) return nullptr;
    Node* gi = qa[1 + i].node();
    if (gi->target() != "_operator.getitem" || gi->args().size() != 2 || !isInt(gi->args()[1], i) ||
        !gi->args()[0].isNode()) {
      return nullptr;
    }
    Node* cq = gi->args()[0].node();
    if (cq->target() != "quantized_decomposed.choose_qparams_per_token_asymmetric" || cq->args().size() != 2 ||
        !(cq->args()[0] == Argument(x)) || !isInt8(cq->args()[1])) {
      return nullptr;
    }
  }
  return x;
}

// The x and eps of XNNPACK's per-tensor dynamic chain feeding `input`:
// choose_qparams.tensor(x, -128, 127, eps, int8) -> getitem 0/1 -> quantize_per_tensor.tensor ->
// dequantize_per_tensor.tensor (out_dtype allowed), the same scale and zero point for both; or
// X86InductorQuantizer's, the same over [0, 255] in uint8.
std::optional<std::pair<Node*, double>> perTensorDynamicSource(const Argument& input) {
  if (!input.isNode()) return std::nullopt;
  Node* dq = input.node();
  const auto& d = dq->args();
  if (dq->target() != "quantized_decomposed.dequantize_per_tensor.tensor" || d.size() != 6 || !d[0].isNode()) {
    return std::nullopt;
  }
  for (const auto& [key, value] : dq->kwargs()) {
    if (key != "out_dtype") return std::nullopt;
  }
  Node* q = d[0].node();
  const auto& qa = q->args();
  if (q->target() != "quantized_decomposed.quantize_per_tensor.tensor" || qa.size() != 6 || !qa[0].isNode() ||
      !q->kwargs().empty()) {
    return std::nullopt;
  }
  Node* x = qa[0].node();
  // int8 codes, or X86's uint8 ones: choose_qparams.tensor's scale for [0, 255] is its scale for
  // [-128, 127] and its zero point 128 higher (both ranges span 255; the zero point is qmin minus a
  // rounded quotient, then clamped), so the dequantized x, all the op sees, is the same.
  const bool u8 = isInt(qa[3], 0);
  auto range = [&](const Argument& lo, const Argument& hi, const Argument& dt) {
    return u8 ? isInt(lo, 0) && isInt(hi, 255) && dt.is<c10::ScalarType>() && dt.as<c10::ScalarType>() == c10::kByte
              : isInt(lo, -128) && isInt(hi, 127) && isInt8(dt);
  };
  for (const auto* args : {&qa, &d}) {
    if (!range((*args)[3], (*args)[4], (*args)[5])) return std::nullopt;
  }
  std::optional<double> eps;
  for (int i = 0; i < 2; ++i) {
    if (!(qa[1 + i] == d[1 + i]) || !qa[1 + i].isNode()) return std::nullopt;
    Node* gi = qa[1 + i].node();
    if (gi->target() != "_operator.getitem" || gi->args().size() != 2 || !isInt(gi->args()[1], i) ||
        !gi->args()[0].isNode()) {
      return std::nullopt;
    }
    Node* cq = gi->args()[0].node();
    const auto& c = cq->args();
    if (cq->target() != "quantized_decomposed.choose_qparams.tensor" || c.size() != 5 || !(c[0] == Argument(x)) ||
        !range(c[1], c[2], c[4]) || !c[3].is<double>()) {
      return std::nullopt;
    }
    eps = c[3].as<double>();
  }
  return std::make_pair(x, *eps);
}

struct Site {
  Node* linear;
  Weight weight;
  Node* dynamic_x;                       // the float input of a dynamic chain, or nullptr
  std::optional<double> per_tensor_eps;  // set when that chain is per-tensor
};

}  // namespace

const at::Tensor* constantOf(const Graph& g, const Argument& a) {
  if (!a.isNode() || a.node()->kind() != NodeKind::kGetAttr) return nullptr;
  auto it = g.constants().find(a.node()->target());
  // A buffer the graph writes changes between calls: packing it now would freeze it.
  return it == g.constants().end() || isMutatedConstant(g, it->first) ? nullptr : &it->second;
}

at::Tensor packWeightConstant(const at::Tensor& w, int bits) {
  static const auto op8 = c10::Dispatcher::singleton()
                              .findSchemaOrThrow("pt2q::pack_weight_int8", "")
                              .typed<at::Tensor(const at::Tensor&)>();
  static const auto op4 = c10::Dispatcher::singleton()
                              .findSchemaOrThrow("pt2q::pack_weight_int4", "")
                              .typed<at::Tensor(const at::Tensor&)>();
  return bits == 4 ? op4.call(w) : op8.call(w);
}

std::optional<c10::Device> constantsDevice(const Graph& g) {
  std::optional<c10::Device> device;
  for (const auto& [name, t] : g.constants()) {
    if (device && t.device() != *device) return std::nullopt;
    device = t.device();
  }
  return device;
}

Node* addConstant(Graph& g, const std::set<std::string>& taken, const std::string& prefix, at::Tensor value,
                  Node* before) {
  std::string name;
  for (int64_t i = 0;; ++i) {
    name = prefix + std::to_string(i);
    if (!taken.count(name) && !g.constants().count(name) && !g.subgraphs().count(name)) break;
  }
  g.constants()[name] = std::move(value);
  return g.create(NodeKind::kGetAttr, name, {}, {}, g.uniqueName(name), before);
}

Node* addPackedWeight(Graph& g, const std::set<std::string>& taken, at::Tensor packed, Node* before) {
  return addConstant(g, taken, "_packed_weight", std::move(packed), before);
}

std::optional<PerTensorWeight> perTensorWeight(const Graph& g, const Argument& wa) {
  if (!wa.isNode()) return std::nullopt;
  Node* dq = wa.node();
  const auto& a = dq->args();
  for (const auto& [key, value] : dq->kwargs()) {
    if (key != "out_dtype" || !value.is<c10::ScalarType>()) return std::nullopt;
  }
  if (dq->target() != "quantized_decomposed.dequantize_per_tensor" || a.size() != 6 || !a[1].is<double>() ||
      !isInt(a[2], 0) || !isInt8(a[5])) {
    return std::nullopt;
  }
  const at::Tensor* w = constantOf(g, a[0]);
  if (w == nullptr || w->scalar_type() != c10::kChar || (w->dim() != 2 && w->dim() != 4) ||
      !(w->device().is_cpu() || w->device().is_cuda())) {
    return std::nullopt;
  }
  // The dequantize multiplies fp32 codes by the scale cast to fp32 (a Python float against an fp32
  // tensor), so the per-channel scales are that fp32 value.
  const auto scale = static_cast<float>(a[1].as<double>());
  return PerTensorWeight{w, at::full({w->size(0)}, scale, w->options().dtype(at::kFloat))};
}

int64_t lowerToNative(Graph& g, const std::set<std::string>& taken) {
  // Static chains first: their weight dequantize would also match the weight-only pattern.
  const int64_t lowered_static =
      lowerStaticChains(g, taken) + lowerStaticAdds(g) + lowerStaticPools(g) + lowerStaticUnaries(g, taken) +
      lowerStaticFloatOutputs(g, taken) + lowerMxLinears(g);
  std::vector<Site> sites;
  for (Node* n : g.nodes()) {
    if (n->kind() != NodeKind::kCallFunction || n->target() != "aten.linear" || n->args().size() < 2 ||
        !n->kwargs().empty()) {
      continue;
    }
    if (auto w = lowerableWeight(g, n->args()[1])) {
      if (auto pt = perTensorDynamicSource(n->args()[0])) {
        sites.push_back({n, *w, pt->first, pt->second});
      } else {
        sites.push_back({n, *w, perTokenSource(n->args()[0]), std::nullopt});
      }
    }
  }
  std::vector<at::Tensor> packed;
  for (const Site& s : sites) packed.push_back(packWeightConstant(*s.weight.codes, s.weight.bits));  // all first
  for (size_t i = 0; i < sites.size(); ++i) {
    const Site& site = sites[i];
    Node* linear = site.linear;
    Node* attr = addPackedWeight(g, taken, packed[i], linear);
    const Argument bias = linear->args().size() > 2 ? linear->args()[2] : Argument();
    // Symmetric weights have all-zero zero points: the kernels then skip their correction.
    const bool zero = site.weight.new_scales || !constantOf(g, site.weight.zero_points)->ne(0).any().item<bool>();
    const Argument zp = zero ? Argument() : site.weight.zero_points;
    const Argument scales = site.weight.new_scales
                                ? Argument(addConstant(g, taken, "_packed_scale", *site.weight.new_scales, linear))
                                : site.weight.scales;
    const std::string op = "linear_w" + std::to_string(site.weight.bits) + (site.dynamic_x ? "a8" : "a16");
    const Argument x = site.dynamic_x ? Argument(site.dynamic_x) : linear->args()[0];
    std::vector<std::pair<std::string, Argument>> kwargs;
    if (site.per_tensor_eps) kwargs.emplace_back("per_tensor_eps", *site.per_tensor_eps);
    Node* native = g.create(NodeKind::kCallFunction, "pt2q." + op, {x, Argument(attr), scales, zp, bias},
                            std::move(kwargs), g.uniqueName(op), linear);
    native->meta() = linear->meta();
    native->meta().annotation.clear();
    g.replaceAllUsesWith(linear, native);
    g.erase(linear);
  }
  createDeadCodeEliminationPass()->run(g);
  for (Node* n : g.nodes()) {
    if (n->kind() == NodeKind::kGetAttr && n->users().empty()) g.erase(n);
  }
  // Last: the quantizes the lowerings above read (and moved to int8) are settled.
  const int64_t quantizes = lowerStaticQuantizes(g, taken);
  return lowered_static + static_cast<int64_t>(sites.size()) + quantizes;
}

}  // namespace pt2q
