// Quantization annotations as the IR carries them (node meta `annotation`): which input edges
// and which output of a node are quantized, and with what spec. Python's QuantizationSpec
// objects stay in Python; the IR holds what prepare needs from them: an id that maps back to
// the object, the attributes that implicit sharing compares, and SharedQuantizationSpec targets.
//
// Printed form (one node):
//   in %x = spec#0{dtype=int8, quant_min=-128, quant_max=127, qscheme=per_tensor_affine,
//                  ch_axis=None, is_dynamic=False}; in %w = none; out = shared(%x, %conv)
//   [; implicit_sharing = false] [; annotated] [; quantized_output]
// An attribute the Python spec does not have is left out (torchao's _has_same_attr treats
// "absent on both" as equal); values are Python reprs.
#pragma once

#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "graph/node.h"

namespace pt2q {

/// EdgeOrNode: the output of `node` (user empty) or the input edge (node -> user).
struct EdgeOrNode {
  std::string node;
  std::string user;
  bool isEdge() const { return !user.empty(); }
  bool operator<(const EdgeOrNode& o) const { return std::tie(node, user) < std::tie(o.node, o.user); }
  bool operator==(const EdgeOrNode& o) const { return node == o.node && user == o.user; }
};

/// What one edge or output of an annotation points at.
struct QSpecRef {
  enum class Kind : uint8_t { kNone, kSpec, kShared };
  Kind kind = Kind::kNone;
  int64_t id = -1;                                          // kSpec: the spec's id
  std::vector<std::pair<std::string, std::string>> attrs;  // kSpec: attribute -> Python repr
  EdgeOrNode shared;                                        // kShared: what it shares with
  /// The value of attribute `name`, or nullopt when the spec does not have it.
  std::optional<std::string> attr(const std::string& name) const;
};

struct Annotation {
  std::vector<std::pair<std::string, QSpecRef>> inputs;  // input_qspec_map, by producer name, in order
  QSpecRef output;
  bool allow_implicit_sharing = true;
  bool annotated = false;  // QuantizationAnnotation._annotated: a quantizer claimed the node
  bool quantized_output = false;  // X86's _is_output_of_quantized_pattern
  /// is_valid_annotation: something is quantized.
  bool valid() const { return !inputs.empty() || output.kind != QSpecRef::Kind::kNone; }
};

/// The annotation of a node (an empty one when it has none) and its replacement.
Annotation annotationOf(const Node* n);
void setAnnotation(Node* n, const Annotation& a);

std::string printAnnotation(const Annotation& a);
/// Parses the printed form; throws naming `node` and the offending text.
Annotation parseAnnotation(const std::string& text, const std::string& node);

/// torchao's _has_same_attr over dtype, is_dynamic, quant_min, quant_max, qscheme, ch_axis,
/// scale and zero_point, and the MX spec's elem_format, block_size, axis, rounding, scale_mode,
/// flush_fp32_subnorms and seed: both absent, or both present and equal (numbers compared as
/// numbers).
bool sameQuantizationAttrs(const QSpecRef& a, const QSpecRef& b);

}  // namespace pt2q
