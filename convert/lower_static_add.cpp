// lower-to-native, static adds and multiplies: XNNPACKQuantizer's add / add-relu pattern, a
// per-tensor dequantize on each input of aten.add, an optional relu, and a per-tensor quantize of
// the sum, becomes one pt2q.add_q8 on the input codes, and its mul / mul-relu pattern (a
// squeeze-excitation block's gate times its input) one pt2q.mul_q8: bit for bit the chain's codes (the op repeats torch's fp32
// steps), the relu folded into the clamp's lower end (relu(y) quantizes to max(code(y),
// zero_point)). Matched when the add has exactly two node operands, no alpha, and feeds only the
// relu or the quantize (the in-place forms too, `out += identity` and nn.ReLU(inplace=True) as in
// torchvision's ResNets, where the overwritten operand feeds nothing else: isPureAdd); every qparam a literal, each input's codes int8 over [-128, 127] (or uint8
// over [0, 255], moved to int8 with their quantize's other dequantizes, as the static chains are).
//
// Before:
//   %da = quantized_decomposed.dequantize_per_tensor(%qa, 0.02, -3, -128, 127, torch.int8)
//   %db = quantized_decomposed.dequantize_per_tensor(%qb, 0.05, 4, -128, 127, torch.int8)
//   %y = aten.add.Tensor(%da, %db)
//   %r = aten.relu(%y)
//   %q = quantized_decomposed.quantize_per_tensor(%r, 0.06, -10, -128, 127, torch.int8)
// After:
//   %q = pt2q.add_q8(%qa, 0.02, -3, %qb, 0.05, 4, 0.06, -10, -10, 127)
// (aten.mul.Tensor: pt2q.mul_q8 with the same arguments)
#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "convert/native_lowering.h"
#include "convert/static_qdq.h"

namespace pt2q {
namespace {

struct AddSite {
  Node* q;
  PerTensor a, b, out;
  std::pair<int64_t, int64_t> clamp;  // the output codes' range, an activation folded (clampCodes)
  std::vector<Node*> to_int8;
  bool mul = false;
};

std::optional<AddSite> match(Node* qn) {
  auto closing = closingQuantize(qn);
  if (!closing) return std::nullopt;
  const PerTensor* q = &closing->q;
  Node* y = closing->op;
  const bool mul = isPureMul(y);
  if (!(mul || isPureAdd(y)) || y->users().size() != 1) return std::nullopt;
  auto a = perTensor(y->args()[0].node(), kDequantizePerTensor);
  auto b = perTensor(y->args()[1].node(), kDequantizePerTensor);
  if (!a || !b || a->is_uint8 != q->is_uint8 || b->is_uint8 != q->is_uint8) return std::nullopt;
  const int64_t shift = q->is_uint8 ? 128 : 0;  // to the int8 codes the op reads and writes
  for (const PerTensor* in : {&*a, &*b}) {
    if (in->qmin - shift != -128 || in->qmax - shift != 127) return std::nullopt;
  }
  if (!(q->qmin - shift >= -128 && q->qmin <= q->qmax && q->qmax - shift <= 127)) return std::nullopt;
  AddSite site{qn, *a, *b, *q, clampCodes(*closing), {}, mul};
  if (q->is_uint8) {
    for (const PerTensor* in : {&*a, &*b}) {
      auto from = in->input.isNode() ? uint8Group(in->input.node()) : std::nullopt;
      if (!from) return std::nullopt;
      site.to_int8.insert(site.to_int8.end(), from->begin(), from->end());
    }
    auto to = uint8Group(qn);
    if (!to) return std::nullopt;
    site.to_int8.insert(site.to_int8.end(), to->begin(), to->end());
  }
  return site;
}

}  // namespace

int64_t lowerStaticAdds(Graph& g) {
  return lowerQuantizeSites(g, match, [](const AddSite& s) {
    const int64_t shift = s.out.is_uint8 ? 128 : 0;
    const int64_t zo = s.out.zero_point - shift;
    std::vector<Argument> args{s.a.node->args()[0], s.a.scale, s.a.zero_point - shift,
                               s.b.node->args()[0], s.b.scale, s.b.zero_point - shift,
                               s.out.scale,         zo,        s.clamp.first - shift,
                               s.clamp.second - shift};
    return std::make_pair(std::string(s.mul ? "mul_q8" : "add_q8"), std::move(args));
  });
}

}  // namespace pt2q
