// lower-to-native, static linears and convolutions whose output nothing quantizes: aten.linear or a
// plain aten.conv2d (groups 1) of a per-tensor dequantize of int8 codes (or uint8, moved to int8
// with its quantize's other dequantizes, as the static chains are) and a static weight
// (staticWeight) becomes pt2q.linear_q8_float / conv2d_q8_float on the input codes: the fp32 output
// the chain's op gives, the integer sum exact, on the int8 kernels. X86InductorQuantizer leaves
// such ops wherever the next op is not one it quantizes (every linear of a transformer block, whose
// outputs feed adds, softmax or layer norms; a residual block's sum feeding a float mean). This
// runs after the chains, adds and pools, so it takes only what they left, and before the
// weight-only lowering, which would otherwise take these linears with their input dequantized.
//
// Before:
//   %dqx = quantized_decomposed.dequantize_per_tensor(%qx, 0.02, -3, -128, 127, torch.int8)
//   %dqw = quantized_decomposed.dequantize_per_channel(%w, %s, %zp, 0, -128, 127, torch.int8)
//   %y = aten.conv2d(%dqx, %dqw, %b, [1, 1], [1, 1])
//   %s = aten.add.Tensor(%y, %dqr)
// After:
//   %p = get_attr "_packed_weight0"          // as conv2d_q8's
//   %y = pt2q.conv2d_q8_float(%qx, 0.02, -3, %p, %s, %b, [3, 3], [1, 1], [1, 1], [1, 1])
//   %s = aten.add.Tensor(%y, %dqr)
// (a linear: pt2q.linear_q8_float(%qx, 0.02, -3, %p, %s, %b)).
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "convert/native_lowering.h"
#include "convert/static_qdq.h"

namespace pt2q {
namespace {

struct FloatSite {
  Node* op;  // aten.linear / aten.conv2d
  PerTensor in;
  StaticWeight weight;
  std::optional<ConvArgs> geometry;  // conv2d's
  std::vector<Node*> to_int8;
};

std::optional<FloatSite> match(const Graph& g, Node* op) {
  const bool linear = op->target() == "aten.linear", conv = op->target() == "aten.conv2d";
  if ((!linear && !conv) || !op->kwargs().empty() || op->args().size() < 2) return std::nullopt;
  const auto& a = op->args();
  auto in = a[0].isNode() ? perTensor(a[0].node(), kDequantizePerTensor) : std::nullopt;
  if (!in) return std::nullopt;
  const int64_t shift = in->is_uint8 ? 128 : 0;
  if (in->qmin - shift != -128 || in->qmax - shift != 127) return std::nullopt;
  auto weight = staticWeight(g, a[1]);
  if (!weight) return std::nullopt;
  std::optional<ConvArgs> geometry;
  if (linear) {
    if (weight->codes->dim() != 2 || a.size() > 3) return std::nullopt;
  } else {
    geometry = convArgs(a);
    if (!geometry || weight->codes->dim() != 4 || geometry->groups != 1) return std::nullopt;
  }
  FloatSite site{op, *in, std::move(*weight), std::move(geometry), {}};
  if (in->is_uint8) {
    Node* qx = in->input.isNode() ? in->input.node() : nullptr;
    auto group = qx != nullptr ? uint8Group(qx) : std::nullopt;
    if (!group) return std::nullopt;
    site.to_int8 = std::move(*group);
  }
  return site;
}

}  // namespace

int64_t lowerStaticFloatOutputs(Graph& g, const std::set<std::string>& taken) {
  std::vector<FloatSite> sites;
  for (Node* n : g.nodes()) {
    if (auto s = match(g, n)) sites.push_back(std::move(*s));
  }
  std::vector<Node*> to_int8;
  for (const FloatSite& s : sites) to_int8.insert(to_int8.end(), s.to_int8.begin(), s.to_int8.end());
  shiftToInt8(to_int8);
  for (const FloatSite& s : sites) {
    const at::Tensor& w = *s.weight.codes;
    auto [attr, scales] = packStaticWeight(g, taken, s.weight, s.op);
    const PerTensor in = *perTensor(s.in.node, kDequantizePerTensor);  // its qparams after the move to int8
    std::vector<Argument> args{in.node->args()[0], in.scale, in.zero_point, Argument(attr), scales,
                               s.op->args().size() > 2 ? s.op->args()[2] : Argument()};
    if (s.geometry) {
      for (const auto& v : {std::vector<int64_t>{w.size(2), w.size(3)}, s.geometry->stride, s.geometry->padding,
                            s.geometry->dilation}) {
        args.emplace_back(intList(v));
      }
    }
    replaceWithNative(g, s.op, s.geometry ? "conv2d_q8_float" : "linear_q8_float", std::move(args));
  }
  removeDeadCode(g);
  return static_cast<int64_t>(sites.size());
}

}  // namespace pt2q
