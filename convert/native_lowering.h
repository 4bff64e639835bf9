// What the lower-to-native pattern files share: constant lookup, weight packing and the
// _packed_weight{i} constants.
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <set>
#include <string>

#include "graph/graph.h"

namespace pt2q {

/// The constant a get_attr argument reads, or nullptr (also for a buffer the graph writes).
const at::Tensor* constantOf(const Graph& g, const Argument& a);

/// pt2q::pack_weight_int{bits}(w) through the dispatcher.
at::Tensor packWeightConstant(const at::Tensor& w, int bits);

/// `value` as a new constant {prefix}{i} (the smallest i free of `taken`, the graph's constants
/// and subgraphs) read by a new get_attr placed before `before`.
Node* addConstant(Graph& g, const std::set<std::string>& taken, const std::string& prefix, at::Tensor value,
                  Node* before);

/// The one device of the graph's constants (a model's weights live with its activations), where a
/// lowering puts the constants its native ops read with the activations; nothing for none or
/// several.
std::optional<c10::Device> constantsDevice(const Graph& g);

/// `packed` as a new constant _packed_weight{i} (addConstant).
Node* addPackedWeight(Graph& g, const std::set<std::string>& taken, at::Tensor packed, Node* before);

/// A weight quantized per tensor (XNNPACKQuantizer's default config):
/// dequantize_per_tensor(codes, scale, 0, qmin, qmax, int8) on a constant int8 tensor of 2 or 4
/// dimensions, literal qparams. `scales` holds the scale once per output channel (dim 0) in fp32,
/// which is how the dequantize applies it, so the per-channel kernels compute the same values.
struct PerTensorWeight {
  const at::Tensor* codes;
  at::Tensor scales;
};
std::optional<PerTensorWeight> perTensorWeight(const Graph& g, const Argument& dq);

/// Static int8 chains dq(x) -> linear / conv2d [-> relu] -> q with a constant int8 per-channel
/// symmetric weight become pt2q.linear_q8 / conv2d_q8 on the input codes
/// (convert/lower_static_to_native.cpp). Returns how many.
int64_t lowerStaticChains(Graph& g, const std::set<std::string>& taken);

/// Static int8 adds dq(a) + dq(b) [-> relu] -> q become pt2q.add_q8 on the codes, and multiplies
/// dq(a) * dq(b) [-> relu] -> q pt2q.mul_q8 (convert/lower_static_add.cpp). Returns how many.
int64_t lowerStaticAdds(Graph& g);

/// Linears and plain convolutions of dequantized int8 / uint8 codes with a static weight whose
/// output nothing quantizes (left after the chains, adds and pools) become pt2q.linear_q8_float /
/// conv2d_q8_float (lower_static_float_out.cpp). Returns how many.
int64_t lowerStaticFloatOutputs(Graph& g, const std::set<std::string>& taken);

/// Per-tensor int8 quantizes of fp32 values with a static shape and literal qparams (the scale
/// exact in fp32) become pt2q.quantize_affine with one block (lower_static_quantize.cpp); run
/// last, after every lowering that reads or moves them. Returns how many.
int64_t lowerStaticQuantizes(Graph& g, const std::set<std::string>& taken);

/// dq -> max_pool2d -> q of the same qparams becomes pt2q.max_pool2d_q8 on the codes
/// (convert/lower_static_pool.cpp). Returns how many.
int64_t lowerStaticPools(Graph& g);

/// dq -> elementwise unary ops (literal arguments) -> q becomes pt2q.lookup_q8 on the codes, its
/// 256-entry table computed by running the chain on every code (convert/lower_static_unary.cpp).
/// Returns how many.
int64_t lowerStaticUnaries(Graph& g, const std::set<std::string>& taken);

/// aten.linear on mx_dequantize(constant codes, constant scales) blocked along K, its input
/// optionally mx_fake_quantize'd along K, becomes pt2q.linear_mx on the codes
/// (convert/lower_mx_to_native.cpp). Returns how many.
int64_t lowerMxLinears(Graph& g);

}  // namespace pt2q
