// Annotators: functions that write quantization annotations on the IR for one pattern (e.g.
// "linear_relu"), registered by name; built-in quantizers run a list of them per config.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "quantizers/annotation.h"

namespace pt2q {

/// The specs of a QuantizationConfig's roles (kNone where the config has none).
struct RoleSpecs {
  QSpecRef input_activation;
  QSpecRef output_activation;
  QSpecRef weight;
  QSpecRef bias;
  QSpecRef transposed_weight;  // the weight spec with ch_axis 1 (conv_transpose's output channels)
};

/// What an annotator works with: the graph, the config's specs, and which nodes it may claim
/// (the config's module filter; null = every node).
struct AnnotatorContext {
  Graph& graph;
  const RoleSpecs& roles;
  const std::set<std::string>* allowed = nullptr;
  /// X86's pattern filters (on a whole pattern, not per node): "" none (use `allowed` on each
  /// node), "global" (exactly one node of the pattern is a default-quantizable op), or an
  /// operator target (exactly one node of the pattern is that op).
  std::string pattern_filter;
  /// The config is None: matched patterns are claimed but not quantized (X86).
  bool config_is_none = false;
  bool allows(const Node* n) const { return allowed == nullptr || allowed->count(n->name()) > 0; }
};

using Annotator = std::function<void(AnnotatorContext&)>;

class AnnotatorRegistry {
 public:
  void add(const std::string& name, Annotator fn) { annotators_[name] = std::move(fn); }
  /// The annotator `name`; throws naming the known ones.
  const Annotator& get(const std::string& name) const;
  std::vector<std::string> names() const;

 private:
  std::map<std::string, Annotator> annotators_;
};

/// Every annotator pt2q has: XNNPACK's (quantizers/xnnpack_annotators.cpp), X86's
/// (quantizers/x86_annotators.cpp), embedding and the native linears' "native_linear"
/// (quantizers/linear_annotators.cpp).
const AnnotatorRegistry& defaultAnnotatorRegistry();

/// Runs annotators by name in order (first annotation of a node wins).
void runAnnotators(Graph& graph, const std::vector<std::string>& names, const RoleSpecs& roles,
                   const std::set<std::string>* allowed, const std::string& pattern_filter = "",
                   bool config_is_none = false);

/// XNNPACK's propagate_annotation: shape/layout ops (relu, hardtanh, max_pool2d, mean, permute,
/// squeeze, adaptive_avg_pool2d, view, slice_copy, flatten) after a node with an output spec share
/// that node's observer for their input and output.
void propagateAnnotation(Graph& graph);

// Registration hooks of the annotator files.
void registerXnnpackAnnotators(AnnotatorRegistry& r);
void registerEmbeddingAnnotators(AnnotatorRegistry& r);
void registerX86Annotators(AnnotatorRegistry& r);
void registerLinearAnnotators(AnnotatorRegistry& r);

/// X86's last step: int8-in-int8-out ops (max_pool2d, cat, avg_pool2d, adaptive_avg_pool2d,
/// flatten) whose output is quantized share their input edge's observer for the output.
void annotateX86Int8Outputs(Graph& graph);

}  // namespace pt2q
