// lower-to-native, static chains: a quantized linear or conv2d between a per-tensor dequantize of
// its input and a per-tensor quantize of its output (what XNNPACKQuantizer / X86InductorQuantizer
// produce) becomes one int8-in, int8-out native op on the input codes; a relu between the op and
// the quantize folds into the output clamp (output_quant_min = zero point), in place or not, and so
// does a hardtanh (ReLU6; X86's conv -> hardtanh fusion): the clamp becomes [quantize(lo),
// quantize(hi)] (static_qdq.h's clampCodes). Matched only when the
// weight is a constant int8 symmetric dequantize, per channel (axis 0) or per tensor (XNNPACK's
// default config: its scale becomes a constant of one fp32 value per output channel), conv2d's
// groups is a literal 1, that of a depthwise convolution (one input channel per group) or of a
// grouped one that conv2d_q8 runs directly (groupedConvRunsDirect: 4, 8, ... channels per group, as
// ResNeXt's), passed on as conv2d_q8's last argument, the linear / relu feed nothing else, and
// every qparam is a literal.
//
// uint8 activations (X86InductorQuantizer's) lower too: codes u with zero point z hold the values of
// int8 codes u - 128 with zero point z - 128, and quantize_per_tensor's uint8 codes for (z, qmin,
// qmax) are exactly 128 above its int8 codes for (z - 128, qmin - 128, qmax - 128) (the rounding and
// the clamp commute with the shift). So the quantize that feeds the op's input and the one the op
// replaces, each with all its dequantizes, move to int8 first, which changes no value; a quantize
// whose users are not all dequantizes of its own qparams keeps the site unlowered.
//
// Before:
//   %dqx = quantized_decomposed.dequantize_per_tensor(%qx, 0.02, -3, -128, 127, torch.int8)
//   %w = get_attr "_frozen_param0"
//   %dqw = quantized_decomposed.dequantize_per_channel(%w, %s, %zp, 0, -127, 127, torch.int8)
//   %y = aten.conv2d(%dqx, %dqw, %b, [1, 1], [1, 1])
//   %r = aten.relu(%y)
//   %q = quantized_decomposed.quantize_per_tensor(%r, 0.05, -128, -128, 127, torch.int8)
// After:
//   %p = get_attr "_packed_weight0"          // pack_weight_int8(w.permute(0, 2, 3, 1).reshape(OC, -1))
//   %q = pt2q.conv2d_q8(%qx, 0.02, -3, %p, %s, %b, [3, 3], [1, 1], [1, 1], [1, 1], 0.05, -128, -128, 127)
// (a depthwise conv2d of 32 channels: the weight [32, 1, 3, 3] packed the same way, and 32 as a
// last argument, groups).
//
// X86InductorQuantizer fuses conv -> add [-> relu] and leaves the conv's output float: the add of a
// dequantized residual of the conv's shape (a plain conv, groups 1) becomes conv2d_q8's residual,
// added before the rounding and the relu's clamp.
// Before:
//   %y = aten.conv2d(%dqx, %dqw, %b, [1, 1], [1, 1])
//   %dqr = quantized_decomposed.dequantize_per_tensor(%qr, 0.04, 2, -128, 127, torch.int8)
//   %s = aten.add.Tensor(%y, %dqr)
//   %r = aten.relu(%s)
//   %q = quantized_decomposed.quantize_per_tensor(%r, 0.05, -128, -128, 127, torch.int8)
// After:
//   %q = pt2q.conv2d_q8(%qx, 0.02, -3, %p, %s, %b, [3, 3], [1, 1], [1, 1], [1, 1], 0.05, -128, -128, 127,
//                       1, %qr, 0.04, 2)
//
// Before (uint8, a per-tensor weight):
//   %qx = quantized_decomposed.quantize_per_tensor(%x, 0.02, 125, 0, 255, torch.uint8)
//   %dqx = quantized_decomposed.dequantize_per_tensor(%qx, 0.02, 125, 0, 255, torch.uint8)
//   %dqw = quantized_decomposed.dequantize_per_tensor(%w, 0.003, 0, -127, 127, torch.int8)
//   %y = aten.linear(%dqx, %dqw, %b)
//   %q = quantized_decomposed.quantize_per_tensor(%y, 0.05, 130, 0, 255, torch.uint8)
//   %dq = quantized_decomposed.dequantize_per_tensor(%q, 0.05, 130, 0, 255, torch.uint8)
// After:
//   %qx = quantized_decomposed.quantize_per_tensor(%x, 0.02, -3, -128, 127, torch.int8)
//   %p = get_attr "_packed_weight0"
//   %s = get_attr "_packed_scale0"          // [N] fp32, all 0.003f
//   %q = pt2q.linear_q8(%qx, 0.02, -3, %p, %s, %b, 0.05, 2, -128, 127)
//   %dq = quantized_decomposed.dequantize_per_tensor(%q, 0.05, 2, -128, 127, torch.int8)
#include <ATen/ATen.h>

#include <algorithm>
#include <optional>
#include <set>
#include <vector>

#include "convert/native_lowering.h"
#include "convert/static_qdq.h"
#include "kernels/linear_static.h"

namespace pt2q {
namespace {

struct StaticSite {
  Node* q;       // the output quantize (replaced)
  Node* op;      // aten.linear / aten.conv2d
  PerTensor in;  // the input dequantize
  PerTensor out;
  std::pair<int64_t, int64_t> clamp;  // the output codes' range, an activation folded (clampCodes)
  std::optional<PerTensor> residual;  // X86's conv -> add: the other addend's dequantize
  StaticWeight weight;
  Argument bias;
  std::vector<Node*> to_int8;            // uint8 quantizes and dequantizes that move to int8
  std::vector<int64_t> stride, padding, dilation;  // conv2d
  int64_t groups = 1;
};

bool sameKnownShape(Node* a, Node* b) {
  const auto sa = shapeOf(a);
  return sa.has_value() && sa == shapeOf(b);
}

// X86InductorQuantizer's conv -> add [-> relu] fusion: aten.add.Tensor(conv2d, dequantize) (either
// order, no alpha; or its in-place form under isPureAdd's condition) whose conv feeds only the add
// and whose addend has the conv's shape (conv2d_q8's residual does not broadcast).
std::optional<std::pair<Node*, PerTensor>> residualAdd(Node* add) {
  const auto& a = add->args();
  if (!isPureAdd(add) || add->users().size() != 1) return std::nullopt;
  for (int i = 0; i < 2; ++i) {
    Node* conv = a[i].node();
    auto dq = perTensor(a[1 - i].node(), kDequantizePerTensor);
    if (conv->target() == "aten.conv2d" && conv->users().size() == 1 && dq && sameKnownShape(conv, dq->node) &&
        sameKnownShape(conv, add)) {
      return std::make_pair(conv, *dq);
    }
  }
  return std::nullopt;
}

std::optional<StaticSite> match(const Graph& g, Node* qn) {
  auto closing = closingQuantize(qn);
  if (!closing) return std::nullopt;
  const PerTensor* q = &closing->q;
  Node* y = closing->op;
  std::optional<PerTensor> residual;
  if (y->target() == "aten.add.Tensor" || y->target() == "aten.add_.Tensor") {
    auto r = residualAdd(y);
    if (!r) return std::nullopt;
    y = r->first;
    residual = r->second;
  }
  const bool linear = y->target() == "aten.linear", conv = y->target() == "aten.conv2d";
  if ((!linear && !conv) || y->users().size() != 1 || !y->kwargs().empty() || y->args().size() < 2) {
    return std::nullopt;
  }
  const auto& a = y->args();
  auto in = a[0].isNode() ? perTensor(a[0].node(), kDequantizePerTensor) : std::nullopt;
  if (!in || in->is_uint8 != q->is_uint8) return std::nullopt;
  const int64_t shift = q->is_uint8 ? 128 : 0;  // to the int8 codes the op reads and writes
  if (in->qmin - shift != -128 || in->qmax - shift != 127) return std::nullopt;
  if (!(q->qmin - shift >= -128 && q->qmin <= q->qmax && q->qmax - shift <= 127)) return std::nullopt;
  if (residual && (residual->is_uint8 != q->is_uint8 || residual->zero_point - shift < -128 ||
                   residual->zero_point - shift > 127)) {
    return std::nullopt;
  }
  auto weight = staticWeight(g, a[1]);
  if (!weight) return std::nullopt;
  StaticSite site{qn, y, *in, *q, clampCodes(*closing), residual, std::move(*weight), a.size() > 2 ? a[2] : Argument(), {}, {}, {},
                  {}};
  const at::Tensor* w = site.weight.codes;
  if (linear) {
    if (w->dim() != 2 || a.size() > 3) return std::nullopt;
  } else {
    auto ca = convArgs(a);
    if (w->dim() != 4 || !ca) return std::nullopt;
    site.stride = ca->stride, site.padding = ca->padding, site.dilation = ca->dilation;
    site.groups = ca->groups;
    // conv2d_q8 adds a residual in its GEMM epilogue: grouped convolutions would leave the direct
    // kernels for a GEMM per group (and X86's residual convs are plain ones).
    if (residual && site.groups != 1) return std::nullopt;
    // Grouped convolutions with several input channels per group lower where the VNNI direct
    // kernel takes them (2.3-15.9x the chain on ResNeXt-style 3x3 layers, 2-core Zen 5 VM; the AVX2
    // one takes nearly all of those too, 1.4-5.0x); the others stay q/dq: conv2d_q8 runs those group
    // by group, as slow as the chain or slower.
    if (site.groups != 1 && w->size(1) != 1 &&
        !groupedConvRunsDirect(w->size(1), w->size(0) / site.groups, w->size(0), w->size(2) * w->size(3))) {
      return std::nullopt;
    }
  }
  if (q->is_uint8) {
    // The input's quantize and the output quantize, each with all its dequantizes.
    Node* qx = in->input.isNode() ? in->input.node() : nullptr;
    auto from = qx != nullptr ? uint8Group(qx) : std::nullopt;
    auto to = uint8Group(qn);
    if (!from || !to) return std::nullopt;
    site.to_int8 = std::move(*from);
    site.to_int8.insert(site.to_int8.end(), to->begin(), to->end());
    if (residual) {
      Node* qr = residual->input.isNode() ? residual->input.node() : nullptr;
      auto res = qr != nullptr ? uint8Group(qr) : std::nullopt;
      if (!res) return std::nullopt;
      site.to_int8.insert(site.to_int8.end(), res->begin(), res->end());
    }
  }
  return site;
}

}  // namespace

int64_t lowerStaticChains(Graph& g, const std::set<std::string>& taken) {
  return lowerQuantizeSites(g, [&](Node* n) { return match(g, n); }, [&](const StaticSite& s) {
    const int64_t shift = s.out.is_uint8 ? 128 : 0;
    const int64_t in_zp = s.in.zero_point - shift, out_zp = s.out.zero_point - shift;
    auto [attr, scales] = packStaticWeight(g, taken, s.weight, s.q);
    const int64_t qmin = s.clamp.first - shift, qmax = s.clamp.second - shift;
    std::vector<Argument> args{s.in.node->args()[0], s.in.scale, in_zp, Argument(attr), scales, s.bias};
    const bool conv = s.op->target() == "aten.conv2d";
    if (conv) {
      for (const auto& v : {std::vector<int64_t>{s.weight.codes->size(2), s.weight.codes->size(3)}, s.stride,
                            s.padding, s.dilation}) {
        args.emplace_back(intList(v));
      }
    }
    for (const Argument& x : {Argument(s.out.scale), Argument(out_zp), Argument(qmin), Argument(qmax)}) {
      args.push_back(x);
    }
    if (conv && (s.groups != 1 || s.residual)) args.emplace_back(s.groups);
    if (s.residual) {
      args.push_back(s.residual->node->args()[0]);
      args.emplace_back(s.residual->scale);
      args.emplace_back(s.residual->zero_point - shift);
    }
    return std::make_pair(std::string(conv ? "conv2d_q8" : "linear_q8"), std::move(args));
  });
}

}  // namespace pt2q
