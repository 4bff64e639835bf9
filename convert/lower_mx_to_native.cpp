// lower-to-native, MX part: aten.linear on an MX weight (mx_dequantize of constant codes and
// scales, blocked along K) becomes pt2q.linear_mx, which decodes the codes in its kernel and never
// builds the float weight; an MX fake-quantized input along K (mx_fake_quantize, deterministic
// rounding) moves into the op.
//
// Before:
//   %c = get_attr "_frozen_param0"                       // packed fp4 codes [N, K / 2]
//   %s = get_attr "_frozen_param1"                       // E8M0 scales [N, K / 32]
//   %w = pt2q.mx_dequantize(%c, %s, "fp4_e2m1", 32, -1, K, torch.float32)
//   %xq = pt2q.mx_fake_quantize(%x, "int8", 32, -1, "nearest", "floor", False, None)
//   %y = aten.linear(%xq, %w, %bias)
// After:
//   %y = pt2q.linear_mx(%x, %c, %s, "fp4_e2m1", 32, %bias, "int8", 32, "nearest", "floor", False)
// The fake-quant stays for its other users, if any.
#include "convert/native_lowering.h"
#include "graph/pass.h"

namespace pt2q {
namespace {

bool isStr(const Argument& a) { return a.is<std::string>(); }

// x's dtype as the graph records it (float32 when unknown).
c10::ScalarType dtypeOf(const Argument& a) {
  if (!a.isNode()) return c10::kFloat;
  const auto& t = a.node()->meta().types;
  return t.size() == 1 && t[0].dtype ? *t[0].dtype : c10::kFloat;
}

struct MxSite {
  Node* linear;
  Argument x, codes, scales, weight_format, block, bias;
  Argument input_format, input_block, rounding, scale_mode, flush;
};

std::optional<MxSite> match(const Graph& g, Node* linear) {
  const auto& la = linear->args();
  if (la.size() < 2 || la.size() > 3 || !linear->kwargs().empty() || !la[1].isNode()) return std::nullopt;
  Node* dq = la[1].node();
  const auto& d = dq->args();
  if (dq->target() != "pt2q.mx_dequantize" || d.size() != 7 || !dq->kwargs().empty()) return std::nullopt;
  const at::Tensor* codes = constantOf(g, d[0]);
  const at::Tensor* scales = constantOf(g, d[1]);
  if (codes == nullptr || scales == nullptr || codes->dim() != 2 ||
      !(codes->device().is_cpu() || codes->device().is_cuda()) || !isStr(d[2]) ||
      !d[3].is<int64_t>() || !d[4].is<int64_t>() || !d[6].is<c10::ScalarType>()) {
    return std::nullopt;
  }
  const int64_t axis = d[4].as<int64_t>();
  if (axis != -1 && axis != 1) return std::nullopt;  // blocked along K
  MxSite s{linear, la[0], d[0], d[1], d[2], d[3], la.size() > 2 ? la[2] : Argument(), Argument(), int64_t{32},
           std::string("nearest"), std::string("floor"), false};
  if (la[0].isNode() && la[0].node()->target() == "pt2q.mx_fake_quantize") {
    Node* fq = la[0].node();
    const auto& f = fq->args();
    if (f.size() == 8 && fq->kwargs().empty() && isStr(f[1]) && f[2].is<int64_t>() && f[3].is<int64_t>() &&
        isStr(f[4]) && isStr(f[5]) && f[6].is<bool>() && f[4].as<std::string>() != "stochastic") {
      const auto& t = f[0].isNode() ? f[0].node()->meta().types : std::vector<ValueType>{};
      const bool last = f[3].as<int64_t>() == -1 ||
                        (t.size() == 1 && t[0].shape && f[3].as<int64_t>() == int64_t(t[0].shape->size()) - 1);
      if (last) {
        s.x = f[0];
        s.input_format = f[1];
        s.input_block = f[2];
        s.rounding = f[4];
        s.scale_mode = f[5];
        s.flush = f[6];
      }
    }
  }
  // The dequantize's dtype is the linear's: the op computes in fp32 and returns x's dtype.
  if (d[6].as<c10::ScalarType>() != dtypeOf(s.x)) return std::nullopt;
  return s;
}

}  // namespace

int64_t lowerMxLinears(Graph& g) {
  std::vector<MxSite> sites;
  for (Node* n : g.nodes()) {
    if (n->kind() != NodeKind::kCallFunction || n->target() != "aten.linear") continue;
    if (auto s = match(g, n)) sites.push_back(*s);
  }
  for (const MxSite& s : sites) {
    Node* native = g.create(NodeKind::kCallFunction, "pt2q.linear_mx",
                            {s.x, s.codes, s.scales, s.weight_format, s.block, s.bias, s.input_format, s.input_block,
                             s.rounding, s.scale_mode, s.flush},
                            {}, g.uniqueName("linear_mx"), s.linear);
    native->meta() = s.linear->meta();
    native->meta().annotation.clear();
    g.replaceAllUsesWith(s.linear, native);
    g.erase(s.linear);
  }
  return static_cast<int64_t>(sites.size());
}

}  // namespace pt2q
