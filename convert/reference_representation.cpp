// reference-representation: convert_pt2e(use_reference_representation=True). Quantized int8
// patterns become the integer arithmetic a backend would run (torchao's
// reference_representation_rewrite, contract §2.12), and the remaining int8 quantize/dequantize
// ops become their formulas. The replacements are torchao's, op for op and in its order, so the
// numbers are torchao's bit for bit; out_dtype is torch's higher-order op, whose first argument
// is an operator (op("...") in the IR).
//
// Before (static linear):
//   %dq_x = quantized_decomposed.dequantize_per_tensor(%x_i8, 0.02, 3, -128, 127, torch.int8)
//   %dq_w = quantized_decomposed.dequantize_per_tensor(%w_i8, 0.01, 0, -127, 127, torch.int8)
//   %lin = aten.linear(%dq_x, %dq_w, %bias)
//   %q = quantized_decomposed.quantize_per_tensor(%lin, 0.05, -2, -128, 127, torch.int8)
// After:
//   %clamp = aten.clamp(%x_i8, -128, 127)
//   ...   (x and w to int16, zero points subtracted)
//   %acc = out_dtype(op("aten.linear"), torch.int32, %sub, %sub_1, none)
//   %bias_i32 = out_dtype(op("aten.div.Tensor"), torch.int32, %bias, %mul)   # bias / (s_x * s_w)
//   ...   (acc + bias_i32, times s_x * s_w / s_out in out_dtype(mul), + zp_out, clamp)
//   %to_2 = aten.to.dtype(%clamp_2, torch.int8)
//
// torchao's conv2d and max_pool2d patterns are written for aten.convolution and
// aten.max_pool2d_with_indices, which torch.export no longer emits for conv2d/max_pool2d; they are
// kept so that graphs holding those ops rewrite as torchao rewrites them, and aten.conv2d stays
// dequantize -> conv2d -> quantize with each q/dq as its formula, as in torchao. Its 4-bit
// groupwise pattern needs torchao's affine ops, which pt2q's convert does not emit.
#include "convert/reference_representation.h"

#include <regex>

#include "graph/rewrite.h"

namespace pt2q {
namespace {

// Patterns spell quantized_decomposed ops "qd:name.overload(". They are written bare when the
// dispatcher knows them (torch.ao's Python library registers them) and as opaque calls when it
// does not (a C++-only process); a node's target string is the same either way.
std::string expand(const char* text) {
  static const std::regex qd(R"(qd:([A-Za-z_0-9.]+)\()");
  const bool known = findOperator("quantized_decomposed.quantize_per_tensor").has_value();
  return std::regex_replace(text, qd, known ? "quantized_decomposed.$1(" : "call_opaque \"quantized_decomposed.$1\"(");
}

constexpr const char* kDynamicLinear = R"IR(graph @dynamic_linear(%x, %qmin, %qmax, %eps, %w, %w_s, %w_zp, %w_qmin, %w_qmax, %bias):
  %qp = qd:choose_qparams.tensor(%x, %qmin, %qmax, %eps, torch.int8)
  %s = call_opaque "_operator.getitem"(%qp, 0)
  %zp = call_opaque "_operator.getitem"(%qp, 1)
  %q = qd:quantize_per_tensor.tensor(%x, %s, %zp, %qmin, %qmax, torch.int8)
  %dq = qd:dequantize_per_tensor.tensor(%q, %s, %zp, %qmin, %qmax, torch.int8)
  %dq_w = qd:dequantize_per_tensor(%w, %w_s, %w_zp, %w_qmin, %w_qmax, torch.int8)
  %out = aten.linear(%dq, %dq_w, %bias)
  return %out
)IR";
// choose_qparams' scale is float64, so torchao's replacement returns float64, which the next
// dynamically quantized layer's choose_qparams rejects; pt2q's ends with a cast to float32 (the
// dtype the matched linear had): the value is torchao's, rounded once to float32.
constexpr const char* kDynamicLinearRef = R"IR(graph @dynamic_linear_ref(%x, %qmin, %qmax, %eps, %w, %w_s, %w_zp, %w_qmin, %w_qmax, %bias):
  %choose_qparams = qd:choose_qparams.tensor(%x, %qmin, %qmax, %eps, torch.int8)
  %getitem = call_opaque "_operator.getitem"(%choose_qparams, 0)
  %getitem_1 = call_opaque "_operator.getitem"(%choose_qparams, 1)
  %div = aten.div.Tensor(%x, %getitem)
  %rounded = aten.round(%div)
  %to = aten.to.dtype(%rounded, torch.int32)
  %add = aten.add.Tensor(%to, %getitem_1)
  %clamp = aten.clamp(%add, %qmin, %qmax)
  %to_1 = aten.to.dtype(%clamp, torch.int8)
  %clamp_1 = aten.clamp(%w, %w_qmin, %w_qmax)
  %to_2 = aten.to.dtype(%to_1, torch.int16)
  %to_3 = aten.to.dtype(%clamp_1, torch.int16)
  %sub = aten.sub.Tensor(%to_2, %getitem_1)
  %sub_1 = aten.sub.Tensor(%to_3, %w_zp)
  %out_dtype = call_opaque "torch.ops.higher_order.out_dtype"(op("aten.linear"), torch.int32, %sub, %sub_1, none)
  %mul = aten.mul.Tensor(%getitem, %w_s)
  %out_dtype_1 = call_opaque "torch.ops.higher_order.out_dtype"(op("aten.div.Tensor"), torch.int32, %bias, %mul)
  %add_1 = aten.add.Tensor(%out_dtype, %out_dtype_1)
  %mul_1 = aten.mul.Tensor(%getitem, %w_s)
  %mul_2 = aten.mul.Tensor(%add_1, %mul_1)
  %to_4 = aten.to.dtype(%mul_2, torch.float32)
  return %to_4
)IR";

constexpr const char* kStaticLinear = R"IR(graph @static_linear(%x, %x_s, %x_zp, %x_qmin, %x_qmax, %w, %w_s, %w_zp, %w_qmin, %w_qmax, %bias, %o_s, %o_zp, %o_qmin, %o_qmax):
  %dq_x = qd:dequantize_per_tensor(%x, %x_s, %x_zp, %x_qmin, %x_qmax, torch.int8)
  %dq_w = qd:dequantize_per_tensor(%w, %w_s, %w_zp, %w_qmin, %w_qmax, torch.int8)
  %lin = aten.linear(%dq_x, %dq_w, %bias)
  %q = qd:quantize_per_tensor(%lin, %o_s, %o_zp, %o_qmin, %o_qmax, torch.int8)
  return %q
)IR";
// The integer tail shared by linear and convolution: %acc is the int32 accumulator, %bias_i32
// the bias in accumulator units.
#define PT2Q_REQUANTIZE_TAIL(ACC)                                                       \
  "  %mul_1 = aten.mul.Tensor(%x_s, %w_s)\n"                                            \
  "  %div = aten.div.Tensor(%mul_1, %o_s)\n"                                            \
  "  %out_dtype_2 = call_opaque \"torch.ops.higher_order.out_dtype\"(op(\"aten.mul.Tensor\"), torch.int32, " ACC \
  ", %div)\n"                                                                           \
  "  %add_1 = aten.add.Tensor(%out_dtype_2, %o_zp)\n"                                   \
  "  %clamp_2 = aten.clamp(%add_1, %o_qmin, %o_qmax)\n"                         \
  "  %to_2 = aten.to.dtype(%clamp_2, torch.int8)\n"                                     \
  "  return %to_2\n"
#define PT2Q_INT16_OPERANDS                                    \
  "  %clamp = aten.clamp(%x, %x_qmin, %x_qmax)\n"      \
  "  %clamp_1 = aten.clamp(%w, %w_qmin, %w_qmax)\n"    \
  "  %to = aten.to.dtype(%clamp, torch.int16)\n"               \
  "  %to_1 = aten.to.dtype(%clamp_1, torch.int16)\n"           \
  "  %sub = aten.sub.Tensor(%to, %x_zp)\n"                     \
  "  %sub_1 = aten.sub.Tensor(%to_1, %w_zp)\n"
#define PT2Q_BIAS_I32                                                                                         \
  "  %mul = aten.mul.Tensor(%x_s, %w_s)\n"                                                                    \
  "  %out_dtype_1 = call_opaque \"torch.ops.higher_order.out_dtype\"(op(\"aten.div.Tensor\"), torch.int32, " \
  "%bias, %mul)\n"

constexpr const char* kStaticLinearRef =
    "graph @static_linear_ref(%x, %x_s, %x_zp, %x_qmin, %x_qmax, %w, %w_s, %w_zp, %w_qmin, %w_qmax, %bias, %o_s, "
    "%o_zp, %o_qmin, %o_qmax):\n" PT2Q_INT16_OPERANDS
    "  %out_dtype = call_opaque \"torch.ops.higher_order.out_dtype\"(op(\"aten.linear\"), torch.int32, %sub, "
    "%sub_1, none)\n" PT2Q_BIAS_I32 "  %add = aten.add.Tensor(%out_dtype, %out_dtype_1)\n" PT2Q_REQUANTIZE_TAIL("%add");

constexpr const char* kConvolution = R"IR(graph @convolution(%x, %x_s, %x_zp, %x_qmin, %x_qmax, %w, %w_s, %w_zp, %w_qmin, %w_qmax, %bias, %o_s, %o_zp, %o_qmin, %o_qmax, %stride, %padding, %dilation, %transposed, %output_padding, %groups):
  %dq_x = qd:dequantize_per_tensor(%x, %x_s, %x_zp, %x_qmin, %x_qmax, torch.int8)
  %dq_w = qd:dequantize_per_tensor(%w, %w_s, %w_zp, %w_qmin, %w_qmax, torch.int8)
  %conv = aten.convolution(%dq_x, %dq_w, %bias, %stride, %padding, %dilation, %transposed, %output_padding, %groups)
  %q = qd:quantize_per_tensor(%conv, %o_s, %o_zp, %o_qmin, %o_qmax, torch.int8)
  return %q
)IR";
constexpr const char* kConvolutionRef =
    "graph @convolution_ref(%x, %x_s, %x_zp, %x_qmin, %x_qmax, %w, %w_s, %w_zp, %w_qmin, %w_qmax, %bias, %o_s, %o_zp, "
    "%o_qmin, %o_qmax, %stride, %padding, %dilation, %transposed, %output_padding, %groups):\n" PT2Q_INT16_OPERANDS
    "  %out_dtype = call_opaque \"torch.ops.higher_order.out_dtype\"(op(\"aten.convolution\"), torch.int32, "
    "%sub, %sub_1, none, %stride, %padding, %dilation, %transposed, %output_padding, %groups)\n" PT2Q_BIAS_I32
    "  %unsqueeze = aten.unsqueeze(%out_dtype_1, -1)\n"
    "  %unsqueeze_1 = aten.unsqueeze(%unsqueeze, -1)\n"
    "  %add = aten.add.Tensor(%out_dtype, %unsqueeze_1)\n" PT2Q_REQUANTIZE_TAIL("%add");

#undef PT2Q_REQUANTIZE_TAIL
#undef PT2Q_INT16_OPERANDS
#undef PT2Q_BIAS_I32

// add and add-relu share one quant_min/quant_max across the three q/dq ops, as torchao's do.
constexpr const char* kAddRelu = R"IR(graph @add_relu(%x, %x_s, %x_zp, %y, %y_s, %y_zp, %o_s, %o_zp, %qmin, %qmax):
  %dq_x = qd:dequantize_per_tensor(%x, %x_s, %x_zp, %qmin, %qmax, torch.int8)
  %dq_y = qd:dequantize_per_tensor(%y, %y_s, %y_zp, %qmin, %qmax, torch.int8)
  %add = aten.add.Tensor(%dq_x, %dq_y)
  %relu = aten.relu(%add)
  %q = qd:quantize_per_tensor(%relu, %o_s, %o_zp, %qmin, %qmax, torch.int8)
  return %q
)IR";
constexpr const char* kAddReluRef = R"IR(graph @add_relu_ref(%x, %x_s, %x_zp, %y, %y_s, %y_zp, %o_s, %o_zp, %qmin, %qmax):
  %to = aten.to.dtype(%x, torch.int32)
  %to_1 = aten.to.dtype(%y, torch.int32)
  %sub = aten.sub.Tensor(%to, %x_zp)
  %div = aten.div.Tensor(%x_s, %o_s)
  %out_dtype = call_opaque "torch.ops.higher_order.out_dtype"(op("aten.mul.Tensor"), torch.int32, %sub, %div)
  %sub_1 = aten.sub.Tensor(%to_1, %y_zp)
  %div_1 = aten.div.Tensor(%y_s, %o_s)
  %out_dtype_1 = call_opaque "torch.ops.higher_order.out_dtype"(op("aten.mul.Tensor"), torch.int32, %sub_1, %div_1)
  %add = aten.add.Tensor(%out_dtype, %out_dtype_1)
  %add_1 = aten.add.Tensor(%add, %o_zp)
  %clamp = aten.clamp(%add_1, %o_zp, %qmax)
  %to_2 = aten.to.dtype(%clamp, torch.int8)
  return %to_2
)IR";

constexpr const char* kAdd = R"IR(graph @add(%x, %x_s, %x_zp, %y, %y_s, %y_zp, %o_s, %o_zp, %qmin, %qmax):
  %dq_x = qd:dequantize_per_tensor(%x, %x_s, %x_zp, %qmin, %qmax, torch.int8)
  %dq_y = qd:dequantize_per_tensor(%y, %y_s, %y_zp, %qmin, %qmax, torch.int8)
  %add = aten.add.Tensor(%dq_x, %dq_y)
  %q = qd:quantize_per_tensor(%add, %o_s, %o_zp, %qmin, %qmax, torch.int8)
  return %q
)IR";
// torchao's add clamps to [-128, 127] whatever quant_min/quant_max say.
constexpr const char* kAddRef = R"IR(graph @add_ref(%x, %x_s, %x_zp, %y, %y_s, %y_zp, %o_s, %o_zp, %qmin, %qmax):
  %to = aten.to.dtype(%x, torch.int32)
  %to_1 = aten.to.dtype(%y, torch.int32)
  %div = aten.div.Tensor(%x_s, %o_s)
  %sub = aten.sub.Tensor(%to, %x_zp)
  %mul = aten.mul.Tensor(%div, %sub)
  %rounded = aten.round(%mul)
  %to_2 = aten.to.dtype(%rounded, torch.int32)
  %div_1 = aten.div.Tensor(%y_s, %o_s)
  %sub_1 = aten.sub.Tensor(%to_1, %y_zp)
  %mul_1 = aten.mul.Tensor(%div_1, %sub_1)
  %rounded_1 = aten.round(%mul_1)
  %to_3 = aten.to.dtype(%rounded_1, torch.int32)
  %add = aten.add.Tensor(%to_2, %to_3)
  %add_1 = aten.add.Tensor(%add, %o_zp)
  %clamp = aten.clamp(%add_1, -128, 127)
  %to_4 = aten.to.dtype(%clamp, torch.int8)
  return %to_4
)IR";

constexpr const char* kMaxPool = R"IR(graph @max_pool2d(%x, %x_s, %x_zp, %x_qmin, %x_qmax, %o_s, %o_zp, %o_qmin, %o_qmax, %kernel, %stride, %index):
  %dq = qd:dequantize_per_tensor(%x, %x_s, %x_zp, %x_qmin, %x_qmax, torch.int8)
  %mp = aten.max_pool2d_with_indices(%dq, %kernel, %stride)
  %item = call_opaque "_operator.getitem"(%mp, %index)
  %q = qd:quantize_per_tensor(%item, %o_s, %o_zp, %o_qmin, %o_qmax, torch.int8)
  return %q
)IR";
constexpr const char* kMaxPoolRef = R"IR(graph @max_pool2d_ref(%x, %x_s, %x_zp, %x_qmin, %x_qmax, %o_s, %o_zp, %o_qmin, %o_qmax, %kernel, %stride, %index):
  %clamp = aten.clamp(%x, %x_qmin, %x_qmax)
  %to = aten.to.dtype(%clamp, torch.int32)
  %sub = aten.sub.Tensor(%to, %x_zp)
  %max_pool2d_with_indices = aten.max_pool2d_with_indices(%sub, %kernel, %stride)
  %getitem = call_opaque "_operator.getitem"(%max_pool2d_with_indices, %index)
  %div = aten.div.Tensor(%x_s, %o_s)
  %mul = aten.mul.Tensor(%getitem, %div)
  %add = aten.add.Tensor(%mul, %o_zp)
  %clamp_1 = aten.clamp(%add, %o_qmin, %o_qmax)
  %to_1 = aten.to.dtype(%clamp_1, torch.int8)
  return %to_1
)IR";

// Single quantize/dequantize ops: both overloads (dynamic quantization's scale is a tensor).
constexpr const char* kQuantize = R"IR(graph @quantize_per_tensor(%x, %s, %zp, %qmin, %qmax):
  %q = qd:quantize_per_tensorOVERLOAD(%x, %s, %zp, %qmin, %qmax, torch.int8)
  return %q
)IR";
constexpr const char* kQuantizeRef = R"IR(graph @quantize_per_tensor_ref(%x, %s, %zp, %qmin, %qmax):
  %div = aten.div.Tensor(%x, %s)
  %rounded = aten.round(%div)
  %to = aten.to.dtype(%rounded, torch.int32)
  %add = aten.add.Tensor(%to, %zp)
  %clamp = aten.clamp(%add, %qmin, %qmax)
  %to_1 = aten.to.dtype(%clamp, torch.int8)
  return %to_1
)IR";
constexpr const char* kDequantize = R"IR(graph @dequantize_per_tensor(%x, %s, %zp, %qmin, %qmax):
  %dq = qd:dequantize_per_tensorOVERLOAD(%x, %s, %zp, %qmin, %qmax, torch.int8)
  return %dq
)IR";
constexpr const char* kDequantizeRef = R"IR(graph @dequantize_per_tensor_ref(%x, %s, %zp, %qmin, %qmax):
  %clamp = aten.clamp(%x, %qmin, %qmax)
  %to = aten.to.dtype(%clamp, torch.float32)
  %sub = aten.sub.Tensor(%to, %zp)
  %mul = aten.mul.Tensor(%sub, %s)
  %to_1 = aten.to.dtype(%mul, torch.float32)
  return %to_1
)IR";

constexpr const char* kQuantizePerChannel = R"IR(graph @quantize_per_channel(%x, %s, %zp, %axis, %qmin, %qmax):
  %q = qd:quantize_per_channel(%x, %s, %zp, %axis, %qmin, %qmax, torch.int8)
  return %q
)IR";
constexpr const char* kQuantizePerChannelRef = R"IR(graph @quantize_per_channel_ref(%x, %s, %zp, %axis, %qmin, %qmax):
  %transpose = aten.transpose.int(%x, %axis, -1)
  %div = aten.div.Tensor(%transpose, %s)
  %rounded = aten.round(%div)
  %to = aten.to.dtype(%rounded, torch.int32)
  %add = aten.add.Tensor(%to, %zp)
  %clamp = aten.clamp(%add, %qmin, %qmax)
  %transpose_1 = aten.transpose.int(%clamp, %axis, -1)
  %to_1 = aten.to.dtype(%transpose_1, torch.int8)
  return %to_1
)IR";
constexpr const char* kDequantizePerChannel = R"IR(graph @dequantize_per_channel(%x, %s, %zp, %axis, %qmin, %qmax):
  %dq = qd:dequantize_per_channel(%x, %s, %zp, %axis, %qmin, %qmax, torch.int8)
  return %dq
)IR";
constexpr const char* kDequantizePerChannelRef = R"IR(graph @dequantize_per_channel_ref(%x, %s, %zp, %axis, %qmin, %qmax):
  %clamp = aten.clamp(%x, %qmin, %qmax)
  %transpose = aten.transpose.int(%clamp, %axis, -1)
  %to = aten.to.dtype(%transpose, torch.int32)
  %sub = aten.sub.Tensor(%to, %zp)
  %to_1 = aten.to.dtype(%sub, torch.float32)
  %mul = aten.mul.Tensor(%to_1, %s)
  %transpose_1 = aten.transpose.int(%mul, %axis, -1)
  return %transpose_1
)IR";

std::string withOverload(const char* text, const char* overload) {
  return std::regex_replace(text, std::regex("OVERLOAD"), overload);
}

// torchao's list, in its order. Each rewrite runs over the whole graph before the next starts,
// so that a chain is taken by the largest pattern before its q/dq ops are taken one by one.
std::vector<RewritePatternSet> referencePatterns() {
  std::vector<RewritePatternSet> sets;
  auto add = [&](const char* name, const std::string& pattern, const std::string& replacement) {
    RewritePatternSet s;
    s.add({name, expand(pattern.c_str()), expand(replacement.c_str()), {}, 1});
    sets.push_back(std::move(s));
  };
  add("dynamic-linear", kDynamicLinear, kDynamicLinearRef);
  add("static-linear", kStaticLinear, kStaticLinearRef);
  add("convolution", kConvolution, kConvolutionRef);
  add("add-relu", kAddRelu, kAddReluRef);
  add("add", kAdd, kAddRef);
  add("max-pool2d", kMaxPool, kMaxPoolRef);
  for (const char* overload : {"", ".tensor"}) {
    add("quantize-per-tensor", withOverload(kQuantize, overload), kQuantizeRef);
  }
  for (const char* overload : {"", ".tensor"}) {
    add("dequantize-per-tensor", withOverload(kDequantize, overload), kDequantizeRef);
  }
  add("quantize-per-channel", kQuantizePerChannel, kQuantizePerChannelRef);
  add("dequantize-per-channel", kDequantizePerChannel, kDequantizePerChannelRef);
  return sets;
}

}  // namespace

std::map<std::string, int64_t> rewriteToReferenceRepresentation(Graph& graph) {
  std::map<std::string, int64_t> counts;
  for (const RewritePatternSet& set : referencePatterns()) {
    const RewriteResult r = applyPatternsGreedily(graph, set);
    for (const auto& [name, n] : r.by_pattern) counts[name] += n;
  }
  return counts;
}

}  // namespace pt2q
