// Per-tensor quantize / dequantize nodes for the static lowerings (static_qdq.h).
#include "convert/static_qdq.h"

#include "convert/native_lowering.h"
#include "graph/pass.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <utility>

namespace pt2q {
namespace {

bool isInt(const Argument& a, int64_t v) { return a.is<int64_t>() && a.as<int64_t>() == v; }
bool isInt8(const Argument& a) { return a.is<c10::ScalarType>() && a.as<c10::ScalarType>() == c10::kChar; }
bool isUint8(const Argument& a) { return a.is<c10::ScalarType>() && a.as<c10::ScalarType>() == c10::kByte; }

std::optional<std::vector<int64_t>> intPair(const std::vector<Argument>& args, size_t i, int64_t dflt) {
  if (i >= args.size()) return std::vector<int64_t>{dflt, dflt};
  if (!args[i].is<ArgList>()) return std::nullopt;
  std::vector<int64_t> out;
  for (const Argument& x : args[i].as<ArgList>().items) {
    if (!x.is<int64_t>()) return std::nullopt;
    out.push_back(x.as<int64_t>());
  }
  if (out.size() == 1) out.push_back(out[0]);
  if (out.size() != 2) return std::nullopt;
  return out;
}

}  // namespace

std::optional<StaticWeight> staticWeight(const Graph& g, const Argument& dq) {
  if (auto pt = perTensorWeight(g, dq)) return StaticWeight{pt->codes, Argument(), std::move(pt->scales)};
  if (!dq.isNode() || dq.node()->target() != "quantized_decomposed.dequantize_per_channel") return std::nullopt;
  const auto& d = dq.node()->args();
  if (d.size() != 7 || !dq.node()->kwargs().empty() || !isInt(d[3], 0) || !isInt8(d[6])) return std::nullopt;
  const at::Tensor* w = constantOf(g, d[0]);
  const at::Tensor* s = constantOf(g, d[1]);
  const at::Tensor* z = constantOf(g, d[2]);
  if (w == nullptr || s == nullptr || z == nullptr || w->scalar_type() != c10::kChar ||
      !(w->device().is_cpu() || w->device().is_cuda()) || w->dim() == 0 || s->dim() != 1 ||
      s->size(0) != w->size(0) || z->numel() != s->numel() || z->ne(0).any().item<bool>()) {
    return std::nullopt;
  }
  return StaticWeight{w, d[1], std::nullopt};
}

std::pair<Node*, Argument> packStaticWeight(Graph& g, const std::set<std::string>& taken, const StaticWeight& w,
                                            Node* before) {
  const at::Tensor rows = w.codes->dim() == 4 ? w.codes->permute({0, 2, 3, 1}) : *w.codes;
  Node* packed = addPackedWeight(g, taken, packWeightConstant(rows.reshape({rows.size(0), -1}).contiguous(), 8), before);
  const Argument scales = w.new_scales ? Argument(addConstant(g, taken, "_packed_scale", *w.new_scales, before)) : w.scales;
  return {packed, scales};
}

ArgList intList(const std::vector<int64_t>& v) {
  ArgList l;
  for (int64_t x : v) l.items.emplace_back(x);
  return l;
}

std::optional<std::vector<Dim>> shapeOf(Node* n) {
  while (n != nullptr) {
    const auto& t = n->meta().types;
    if (t.size() == 1 && t[0].shape.has_value()) return t[0].shape;
    if (!t.empty() || (n->target() != kQuantizePerTensor && n->target() != kDequantizePerTensor) ||
        n->args().empty() || !n->args()[0].isNode()) {
      return std::nullopt;
    }
    n = n->args()[0].node();
  }
  return std::nullopt;
}

std::optional<ConvArgs> convArgs(const std::vector<Argument>& a) {
  auto st = intPair(a, 3, 1), pad = intPair(a, 4, 0), dil = intPair(a, 5, 1);
  const bool literal_groups = a.size() <= 6 || (a[6].is<int64_t>() && a[6].as<int64_t>() > 0);
  if (!st || !pad || !dil || !literal_groups || a.size() > 7) return std::nullopt;
  return ConvArgs{*st, *pad, *dil, a.size() > 6 ? a[6].as<int64_t>() : 1};
}

std::optional<PerTensor> perTensor(Node* n, const char* target) {
  if (n == nullptr || n->kind() != NodeKind::kCallFunction || n->target() != target || !n->kwargs().empty()) {
    return std::nullopt;
  }
  const auto& a = n->args();
  if (a.size() != 6 || !a[1].is<double>() || !a[2].is<int64_t>() || !a[3].is<int64_t>() || !a[4].is<int64_t>() ||
      !(isInt8(a[5]) || isUint8(a[5]))) {
    return std::nullopt;
  }
  return PerTensor{n, a[0], a[1].as<double>(), a[2].as<int64_t>(), a[3].as<int64_t>(), a[4].as<int64_t>(),
                   isUint8(a[5])};
}

std::optional<ClosingQuantize> closingQuantize(Node* qn) {
  auto q = perTensor(qn, kQuantizePerTensor);
  if (!q || !q->input.isNode()) return std::nullopt;
  Node* y = q->input.node();
  const auto& a = y->args();
  if (y->users().size() != 1 || !y->kwargs().empty() || a.empty() || !a[0].isNode()) {
    return ClosingQuantize{*q, y, false};
  }
  if ((y->target() == "aten.relu" || y->target() == "aten.relu_") && a.size() == 1) {
    return ClosingQuantize{*q, a[0].node(), true, 0.0f, std::numeric_limits<float>::infinity()};
  }
  if ((y->target() == "aten.hardtanh" || y->target() == "aten.hardtanh_") && a.size() <= 3) {
    // hardtanh(x, min_val=-1, max_val=1) clamps an fp32 x to its bounds cast to fp32
    auto bound = [&](size_t i, double d) -> std::optional<float> {
      if (i >= a.size()) return static_cast<float>(d);
      if (a[i].is<double>()) return static_cast<float>(a[i].as<double>());
      if (a[i].is<int64_t>()) return static_cast<float>(a[i].as<int64_t>());
      return std::nullopt;
    };
    const auto lo = bound(1, -1.0), hi = bound(2, 1.0);
    if (lo && hi && *lo <= *hi) return ClosingQuantize{*q, a[0].node(), true, *lo, *hi};
  }
  return ClosingQuantize{*q, y, false};
}

std::pair<int64_t, int64_t> clampCodes(const ClosingQuantize& c) {
  const int64_t qmin = c.q.qmin, qmax = c.q.qmax;
  if (!c.clamped) return {qmin, qmax};
  const float inv = static_cast<float>(1.0 / c.q.scale);
  auto code = [&](float v) {
    const float r = std::nearbyint(v * inv) + static_cast<float>(c.q.zero_point);
    return static_cast<int64_t>(std::clamp<double>(r, static_cast<double>(qmin), static_cast<double>(qmax)));
  };
  return {code(c.lo), code(c.hi)};
}

namespace {

bool isPureBinary(const Node* n, const std::string& op) {
  const bool in_place = n->target() == "aten." + op + "_.Tensor";
  if ((n->target() != "aten." + op + ".Tensor" && !in_place) || n->args().size() != 2 || !n->kwargs().empty() ||
      !n->args()[0].isNode() || !n->args()[1].isNode()) {
    return false;
  }
  return !in_place || n->args()[0].node()->users().size() == 1;
}

}  // namespace

bool isPureAdd(const Node* add) { return isPureBinary(add, "add"); }

bool isPureMul(const Node* mul) { return isPureBinary(mul, "mul"); }

std::optional<std::vector<Node*>> uint8Group(Node* qn) {
  auto q = perTensor(qn, kQuantizePerTensor);
  if (!q || !q->is_uint8 || q->qmin < 0 || q->qmax > 255) return std::nullopt;
  std::vector<Node*> group{qn};
  for (Node* u : qn->users()) {
    auto d = perTensor(u, kDequantizePerTensor);
    if (!d || !d->input.isNode() || d->input.node() != qn || d->scale != q->scale || d->zero_point != q->zero_point ||
        d->qmin != q->qmin || d->qmax != q->qmax || !d->is_uint8) {
      return std::nullopt;
    }
    group.push_back(u);
  }
  return group;
}

void shiftToInt8(const std::vector<Node*>& nodes) {
  std::set<Node*> done;
  for (Node* n : nodes) {
    if (!done.insert(n).second) continue;
    std::vector<Argument> a = n->args();
    a[2] = a[2].as<int64_t>() - 128;
    a[3] = a[3].as<int64_t>() - 128;
    a[4] = a[4].as<int64_t>() - 128;
    a[5] = c10::kChar;
    n->setArgs(std::move(a));
  }
}

void removeDeadCode(Graph& g) { createDeadCodeEliminationPass()->run(g); }

Node* replaceWithNative(Graph& g, Node* n, const std::string& op, std::vector<Argument> args) {
  Node* native = g.create(NodeKind::kCallFunction, "pt2q." + op, std::move(args), {}, g.uniqueName(op), n);
  native->meta() = n->meta();
  native->meta().annotation.clear();
  g.replaceAllUsesWith(n, native);
  g.erase(n);
  return native;
}

}  // namespace pt2q
