// lower-to-native, max pooling: a per-tensor dequantize -> aten.max_pool2d -> a per-tensor quantize
// of the same qparams (XNNPACK's and X86's max_pool2d share their input's) becomes pt2q.max_pool2d_q8
// on the codes: dequantize is increasing and quantize inverts it exactly for these codes, so the
// window's largest code is the chain's code (kernels/ops.cpp). When one side holds uint8 codes and
// the other the int8 codes an earlier static lowering moved its chain to (zero point and clamp 128
// lower), the uint8 side's quantize and dequantizes move to int8 too; the op takes either dtype.
//
// Before:
//   %d = quantized_decomposed.dequantize_per_tensor(%q0, 0.02, -5, -128, 127, torch.int8)
//   %m = aten.max_pool2d(%d, [3, 3], [2, 2], [1, 1])
//   %q = quantized_decomposed.quantize_per_tensor(%m, 0.02, -5, -128, 127, torch.int8)
// After:
//   %q = pt2q.max_pool2d_q8(%q0, [3, 3], [2, 2], [1, 1], [1, 1], False)
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "convert/native_lowering.h"
#include "convert/static_qdq.h"

namespace pt2q {
namespace {

struct PoolSite {
  Node* q;
  PerTensor in, out;
  std::vector<Argument> window;  // kernel_size, stride, padding, dilation, ceil_mode
  std::vector<Node*> to_int8;
};

bool intList(const Argument& a) {
  if (!a.is<ArgList>()) return false;
  for (const Argument& x : a.as<ArgList>().items) {
    if (!x.is<int64_t>()) return false;
  }
  return true;
}

ArgList ints(std::initializer_list<int64_t> v) {
  ArgList l;
  for (int64_t x : v) l.items.emplace_back(x);
  return l;
}

// The qparams in int8 terms: a uint8 side's zero point and clamp 128 lower.
bool sameQParams(const PerTensor& a, const PerTensor& b) {
  const int64_t sa = a.is_uint8 ? 128 : 0, sb = b.is_uint8 ? 128 : 0;
  return a.scale == b.scale && a.zero_point - sa == b.zero_point - sb && a.qmin - sa == b.qmin - sb &&
         a.qmax - sa == b.qmax - sb;
}

std::optional<PoolSite> match(Node* qn) {
  auto q = perTensor(qn, kQuantizePerTensor);
  if (!q || !q->input.isNode()) return std::nullopt;
  Node* m = q->input.node();
  const auto& a = m->args();
  if (m->target() != "aten.max_pool2d" || m->users().size() != 1 || !m->kwargs().empty() || a.size() < 2 ||
      a.size() > 6 || !a[0].isNode() || !intList(a[1])) {
    return std::nullopt;
  }
  for (size_t i = 2; i < a.size() && i < 5; ++i) {
    if (!intList(a[i])) return std::nullopt;
  }
  if (a.size() == 6 && !a[5].is<bool>()) return std::nullopt;
  auto in = perTensor(a[0].node(), kDequantizePerTensor);
  if (!in || !in->input.isNode() || !sameQParams(*in, *q)) return std::nullopt;
  PoolSite site{qn, *in, *q, {}, {}};
  site.window = {a[1], a.size() > 2 ? a[2] : Argument(ArgList()), a.size() > 3 ? a[3] : Argument(ints({0, 0})),
                 a.size() > 4 ? a[4] : Argument(ints({1, 1})), a.size() > 5 ? a[5] : Argument(false)};
  if (in->is_uint8 != q->is_uint8) {
    auto group = in->is_uint8 ? uint8Group(in->input.node()) : uint8Group(qn);
    if (!group) return std::nullopt;
    site.to_int8 = std::move(*group);
  }
  return site;
}

}  // namespace

int64_t lowerStaticPools(Graph& g) {
  return lowerQuantizeSites(g, match, [](const PoolSite& s) {
    std::vector<Argument> args{s.in.node->args()[0]};
    args.insert(args.end(), s.window.begin(), s.window.end());
    return std::make_pair(std::string("max_pool2d_q8"), std::move(args));
  });
}

}  // namespace pt2q
