// lower-to-native, last: a per-tensor int8 quantize of fp32 values with literal qparams (what
// the static lowerings leave in front of their native ops, and around the ops they do not lower)
// becomes pt2q.quantize_affine with one block, the whole tensor: one vectorized pass instead of
// the five ATen passes of quantized_decomposed.quantize_per_tensor (mul, round, add, clamp, cast;
// 3.4-12x on a transformer's activations on the 2-core Zen 5 VM). The codes are the same: both
// compute clamp(round_half_even(x * fp32(1 / s)) + z) in fp32 (kernels/README.md), and the
// lowering requires a scale exact in fp32 (observers' scales are fp32 values), so that pt2q's fp32
// reciprocal of it is torch's double reciprocal rounded to fp32. NaN, whose code torch leaves to an
// undefined cast, becomes qmin (kernels/README.md, Note [NaN codes]). Quantizes of other dtypes,
// or of inputs whose shape is not known and static (quantize_affine's block is the shape), stay; so
// does every quantize of a graph whose constants are on several devices, or none (the new scale
// and zero point go on the constants' device, the input's).
//
// Before:
//   %q = quantized_decomposed.quantize_per_tensor(%x, 0.05, -3, -128, 127, torch.int8)   // x: f32[4, 64, 256]
// After:
//   %s = get_attr "_quant_scale0"            // 0-d fp32 0.05
//   %z = get_attr "_quant_zero_point0"       // 0-d int64 -3
//   %q = pt2q.quantize_affine(%x, [4, 64, 256], %s, %z, torch.int8, -128, 127)
#include <ATen/ATen.h>

#include <optional>
#include <variant>
#include <vector>

#include "convert/native_lowering.h"
#include "convert/static_qdq.h"

namespace pt2q {
namespace {

// The input's static shape when it is a known fp32 tensor of concrete sizes.
std::optional<std::vector<int64_t>> staticFloatShape(const PerTensor& q) {
  if (!q.input.isNode()) return std::nullopt;
  Node* x = q.input.node();
  const auto& t = x->meta().types;
  if (t.size() != 1 || t[0].dtype != c10::kFloat) return std::nullopt;
  auto shape = shapeOf(x);
  if (!shape) return std::nullopt;
  std::vector<int64_t> out;
  for (const Dim& d : *shape) {
    const int64_t* v = std::get_if<int64_t>(&d);
    if (v == nullptr) return std::nullopt;
    out.push_back(*v);
  }
  return out;
}

}  // namespace

int64_t lowerStaticQuantizes(Graph& g, const std::set<std::string>& taken) {
  const auto device = constantsDevice(g);
  if (!device) return 0;
  const auto on = [&](at::ScalarType dtype) { return at::TensorOptions().dtype(dtype).device(*device); };
  std::vector<std::pair<PerTensor, std::vector<int64_t>>> sites;
  for (Node* n : g.nodes()) {
    auto q = perTensor(n, kQuantizePerTensor);
    if (!q || q->is_uint8 || static_cast<double>(static_cast<float>(q->scale)) != q->scale) continue;
    if (auto shape = staticFloatShape(*q)) sites.emplace_back(*q, std::move(*shape));
  }
  for (auto& [q, shape] : sites) {
    Node* s = addConstant(g, taken, "_quant_scale", at::scalar_tensor(q.scale, on(at::kFloat)), q.node);
    Node* z = addConstant(g, taken, "_quant_zero_point", at::scalar_tensor(q.zero_point, on(at::kLong)), q.node);
    ArgList block;
    for (int64_t d : shape) block.items.emplace_back(d);
    replaceWithNative(g, q.node, "quantize_affine",
                      {q.input, Argument(std::move(block)), Argument(s), Argument(z), Argument(c10::kChar),
                       Argument(q.qmin), Argument(q.qmax)});
  }
  return static_cast<int64_t>(sites.size());
}

}  // namespace pt2q
