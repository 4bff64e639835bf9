// observers-to-qdq: observer calls -> quantized_decomposed quantize/dequantize.
//
// Before:
//   %obs = call_module "activation_post_process_0"(%x)
//   %y = aten.relu(%obs)
// After (per-tensor qparams as literals):
//   %q = quantized_decomposed.quantize_per_tensor(%x, 0.0157, -64, -128, 127, int8)
//   %dq = quantized_decomposed.dequantize_per_tensor(%q, 0.0157, -64, -128, 127, int8)
//   %y = aten.relu(%dq)
// Per channel: get_attr "_scale_0", "_zero_point_0" feed quantize/dequantize_per_channel.
// Per group (2-d weights, qparams [N, K / group_size]): quantize/dequantize_per_channel_group.
// Dynamic: choose_qparams.tensor -> getitem 0/1 -> quantize/dequantize_per_tensor.tensor.
// Dynamic per token: choose_qparams_per_token_asymmetric -> getitem 0/1 ->
// quantize/dequantize_per_token.
// Float16: convert_element_type.no_fuse to float16 and back.
// MX on a constant (a weight): pt2q.mx_quantize -> getitem 0/1 -> pt2q.mx_dequantize (fold-quantize
// then stores the codes and E8M0 scales); on anything else: pt2q.mx_fake_quantize.
#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "convert/observers_to_qdq.h"

namespace pt2q {
namespace {

using K = ObserverConversion::Kind;

std::string freshName(const Graph& g, const std::set<std::string>& taken, const std::string& prefix) {
  for (int64_t i = 0;; ++i) {
    const std::string name = prefix + std::to_string(i);
    if (!taken.count(name) && !g.constants().count(name) && !g.subgraphs().count(name)) return name;
  }
}

// torchao's module path of an observed value: the last nn_module_stack frame's last component.
std::string modulePath(const Node* observed) {
  const auto& stack = observed->meta().nn_module_stack;
  if (stack.empty()) return "";
  const std::string& path = stack.back().path;
  const size_t dot = path.rfind('.');
  return dot == std::string::npos ? path : path.substr(dot + 1);
}

std::vector<std::pair<std::string, Argument>> outDtype(const Node* input) {
  const auto& types = input->meta().types;
  if (types.size() == 1 && types[0].dtype && *types[0].dtype != c10::kFloat) return {{"out_dtype", *types[0].dtype}};
  return {};
}

// The dtype a dequantize must give back: the observed value's (float32 when unknown).
c10::ScalarType outputDtype(const Node* input) {
  const auto& types = input->meta().types;
  return types.size() == 1 && types[0].dtype ? *types[0].dtype : c10::kFloat;
}

}  // namespace

std::vector<std::string> convertObserversToQDQ(Graph& g, const std::map<std::string, ObserverConversion>& by_module,
                                               const std::set<std::string>& taken) {
  std::vector<Node*> todo;
  for (Node* n : g.nodes()) {
    if (n->kind() != NodeKind::kCallModule || !by_module.count(n->target())) continue;
    TORCH_CHECK(n->args().size() == 1 && n->args()[0].isNode() && n->kwargs().empty(), "observers-to-qdq: %",
                n->name(), " is not an observer call (one node argument)");
    const ObserverConversion& c = by_module.at(n->target());
    if (c.kind == K::kPerChannel || c.kind == K::kPerGroup) {
      TORCH_CHECK(c.scales.defined() && c.zero_points.defined(), "observers-to-qdq: %", n->name(),
                  ": per-channel conversion without scales and zero points");
    }
    if (c.kind == K::kPerGroup) {
      TORCH_CHECK(c.group_size >= 2 && c.scales.dim() == 2, "observers-to-qdq: %", n->name(),
                  ": per-group conversion needs group_size >= 2 and [rows, groups] scales, got group_size ",
                  c.group_size, " and scales of shape ", c.scales.sizes());
    }
    if (c.kind == K::kDynamicPerToken) {
      TORCH_CHECK(c.dtype == c10::kChar && c.quant_min == -128 && c.quant_max == 127, "observers-to-qdq: %",
                  n->name(), ": per-token dynamic quantization is int8 in [-128, 127], got ", c.dtype, " in [",
                  c.quant_min, ", ", c.quant_max, "]");
    }
    todo.push_back(n);
  }
  std::vector<std::string> added;
  std::set<std::string> used = taken;
  for (Node* obs : todo) {
    const ObserverConversion& c = by_module.at(obs->target());
    Node* x = obs->args()[0].node();
    Node* result = nullptr;
    auto call = [&](const std::string& target, const std::string& hint, std::vector<Argument> args,
                    std::vector<std::pair<std::string, Argument>> kwargs = {}) {
      return g.create(NodeKind::kCallFunction, target, std::move(args), std::move(kwargs), g.uniqueName(hint), obs);
    };
    // quantize(x, *qparams) -> dequantize(q, *qparams): the dequantize node.
    auto qdq = [&](const std::string& q_target, const std::string& q_hint, const std::string& dq_target,
                   const std::string& dq_hint, const std::vector<Argument>& qparams) {
      std::vector<Argument> qa{x};
      qa.insert(qa.end(), qparams.begin(), qparams.end());
      std::vector<Argument> da{call(q_target, q_hint, std::move(qa))};
      da.insert(da.end(), qparams.begin(), qparams.end());
      return call(dq_target, dq_hint, std::move(da), outDtype(x));
    };
    // A qparam constant named by the smallest free index after `prefix`, read by a get_attr.
    auto constant = [&](const std::string& prefix, const at::Tensor& value) {
      const std::string name = freshName(g, used, prefix);
      used.insert(name);
      g.constants()[name] = value.detach().clone();
      added.push_back(name);
      return g.create(NodeKind::kGetAttr, name, {}, {}, g.uniqueName(name), obs);
    };
    switch (c.kind) {
      case K::kRemove: result = x; break;
      case K::kPerTensor:
        result = qdq("quantized_decomposed.quantize_per_tensor", "quantize_per_tensor_default",
                     "quantized_decomposed.dequantize_per_tensor", "dequantize_per_tensor_default",
                     {c.scale, c.zero_point, c.quant_min, c.quant_max, c.dtype});
        break;
      case K::kPerChannel: {
        const std::string path = modulePath(x);
        Node* s = constant(path + "_scale_", c.scales);
        Node* z = constant(path + "_zero_point_", c.zero_points);
        result = qdq("quantized_decomposed.quantize_per_channel", "quantize_per_channel_default",
                     "quantized_decomposed.dequantize_per_channel", "dequantize_per_channel_default",
                     {s, z, c.axis, c.quant_min, c.quant_max, c.dtype});
        break;
      }
      case K::kPerGroup: {
        const std::string path = modulePath(x);
        Node* s = constant(path + "_scale_", c.scales);
        Node* z = constant(path + "_zero_point_", c.zero_points);
        Node* q = call("quantized_decomposed.quantize_per_channel_group", "quantize_per_channel_group_default",
                       {x, s, z, c.quant_min, c.quant_max, c.dtype, c.group_size});
        result = call("quantized_decomposed.dequantize_per_channel_group", "dequantize_per_channel_group_default",
                      {q, s, z, c.quant_min, c.quant_max, c.dtype, c.group_size, outputDtype(x)});
        break;
      }
      case K::kDynamicPerToken: {
        Node* cq = call("quantized_decomposed.choose_qparams_per_token_asymmetric",
                        "choose_qparams_per_token_asymmetric_default", {x, c.dtype});
        Node* s = call("_operator.getitem", "getitem", {cq, int64_t{0}});
        Node* z = call("_operator.getitem", "getitem", {cq, int64_t{1}});
        Node* q = call("quantized_decomposed.quantize_per_token", "quantize_per_token_default",
                       {x, s, z, c.quant_min, c.quant_max, c.dtype});
        result = call("quantized_decomposed.dequantize_per_token", "dequantize_per_token_default",
                      {q, s, z, c.quant_min, c.quant_max, c.dtype, outputDtype(x)});
        break;
      }
      case K::kDynamic: {
        TORCH_CHECK(c.dtype == c10::kChar || c.dtype == c10::kByte, "observers-to-qdq: %", obs->name(),
                    ": dynamic quantization supports int8 and uint8 only, got ", c.dtype);
        const std::string choose = c.symmetric ? "quantized_decomposed.choose_qparams_symmetric.tensor"
                                               : "quantized_decomposed.choose_qparams.tensor";
        Node* cq = call(choose, c.symmetric ? "choose_qparams_symmetric_tensor" : "choose_qparams_tensor",
                        {x, c.quant_min, c.quant_max, c.eps, c.dtype});
        Node* s = call("_operator.getitem", "getitem", {cq, int64_t{0}});
        Node* z = call("_operator.getitem", "getitem", {cq, int64_t{1}});
        result = qdq("quantized_decomposed.quantize_per_tensor.tensor", "quantize_per_tensor_tensor",
                     "quantized_decomposed.dequantize_per_tensor.tensor", "dequantize_per_tensor_tensor",
                     {s, z, c.quant_min, c.quant_max, c.dtype});
        break;
      }
      case K::kMx: {
        const auto& m = c.mx;
        const Argument seed = m.seed ? Argument(*m.seed) : Argument();
        std::vector<Argument> args{x, m.elem_format, m.block_size, m.axis, m.rounding, m.scale_mode,
                                   m.flush_fp32_subnorms, seed};
        const bool constant = x->kind() == NodeKind::kGetAttr && g.constants().count(x->target());
        if (!constant) {
          result = call("pt2q.mx_fake_quantize", "mx_fake_quantize_default", std::move(args));
          break;
        }
        const at::Tensor& w = g.constants().at(x->target());
        Node* q = call("pt2q.mx_quantize", "mx_quantize_default", std::move(args));
        Node* codes = call("_operator.getitem", "getitem", {q, int64_t{0}});
        Node* scales = call("_operator.getitem", "getitem", {q, int64_t{1}});
        const Argument last_dim = w.dim() > 0 ? Argument(w.size(-1)) : Argument();
        result = call("pt2q.mx_dequantize", "mx_dequantize_default",
                      {codes, scales, m.elem_format, m.block_size, m.axis, last_dim, w.scalar_type()});
        break;
      }
      case K::kFloat16: {
        Node* h = call("quantized_decomposed.convert_element_type.no_fuse", "convert_element_type_no_fuse",
                       {x, c10::kHalf});
        result = call("quantized_decomposed.convert_element_type.no_fuse", "convert_element_type_no_fuse",
                      {h, c10::kFloat});
        break;
      }
    }
    g.replaceAllUsesWith(obs, result);
    g.erase(obs);
  }
  return added;
}

}  // namespace pt2q
