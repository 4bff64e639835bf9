// convert_pt2e's core rewrite (contract §2.8): every observer call becomes the
// quantized_decomposed quantize/dequantize pair it stands for.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace pt2q {

/// What one observer module turns into, decided from its dtype, qscheme and qparams.
struct ObserverConversion {
  enum class Kind : uint8_t { kRemove, kPerTensor, kPerChannel, kPerGroup, kDynamic, kDynamicPerToken, kFloat16, kMx };
  Kind kind = Kind::kRemove;
  double scale = 1.0;          // kPerTensor: Python literals in the graph
  int64_t zero_point = 0;
  at::Tensor scales;           // kPerChannel / kPerGroup: buffers <module><prefix>_scale_i / _zero_point_i
  at::Tensor zero_points;
  int64_t axis = 0;
  int64_t group_size = 0;      // kPerGroup: consecutive values of a row sharing qparams
  int64_t quant_min = 0;
  int64_t quant_max = 0;
  c10::ScalarType dtype = c10::kChar;  // the underlying dtype (quint8 -> uint8)
  double eps = 0.0;            // kDynamic: choose_qparams arguments
  bool symmetric = false;      // kDynamic: choose_qparams_symmetric
  struct Mx {                  // kMx: pt2q.mx_fake_quantize's arguments
    std::string elem_format;
    int64_t block_size = 32;
    int64_t axis = -1;
    std::string rounding = "nearest";
    std::string scale_mode = "floor";
    bool flush_fp32_subnorms = false;
    std::optional<int64_t> seed;
  } mx;
};

/// Replaces each call_module node whose module (target) is in `by_module` by its
/// quantize/dequantize nodes, in graph order, as torchao's
/// _replace_observer_with_quantize_dequantize_node_decomposed does; per-channel qparams become
/// constants named by the smallest free index (names in `taken` and the graph's constants are
/// not free). Returns the constants it added. Checks everything before changing anything.
std::vector<std::string> convertObserversToQDQ(Graph& graph,
                                               const std::map<std::string, ObserverConversion>& by_module,
                                               const std::set<std::string>& taken);

/// Clones a dequantize node with several users once per user that carries a quantization
/// annotation (`annotated` names them), as torchao's DuplicateDQPass does: each consumer gets
/// its own dq -> op pattern. Not for the dynamic choose_qparams -> getitem -> q -> dq chain.
int64_t duplicateDequantize(Graph& graph, const std::set<std::string>& annotated);

/// Gives quantize/dequantize/choose_qparams nodes the stack trace of the annotated node they
/// serve (torchao's PortNodeMetaForQDQ; reads the annotations in node meta).
void portQDQMetadata(Graph& graph);

/// Folds quantize ops whose inputs are all constant (weights and pure ops on them) into new
/// constants _frozen_param{i} (torchao's constant_fold with _quant_node_constraint); then drops
/// get_attr nodes nobody uses (and their top-level constants) and dead code. Returns the names of
/// the constants it added.
std::vector<std::string> foldQuantize(Graph& graph, const std::set<std::string>& taken);

}  // namespace pt2q
