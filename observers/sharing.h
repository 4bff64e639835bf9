// Observer sharing of prepare_pt2e (contract §2.4): which annotated edges and outputs share one
// observer, by torchao's union-find over explicit (SharedQuantizationSpec) and implicit sharing.
#pragma once

#include <vector>

#include "graph/graph.h"
#include "quantizers/annotation.h"

namespace pt2q {

struct SharingPlan {
  /// Every annotated input edge and output, in torchao's order (graph order; a node's input edges
  /// in annotation order, then its output), with the annotation's reference for it.
  std::vector<EdgeOrNode> keys;
  std::vector<QSpecRef> refs;
  /// Group of each key; groups are numbered in order of first appearance.
  std::vector<int> group;
  /// Per group, the spec its observer is made from: the reference of the group's first key,
  /// unwrapped through shared specs to a spec (or none). torchao asserts when that first key is
  /// a SharedQuantizationSpec naming a later key (pytorch/ao#4421); pt2q unwraps it instead.
  std::vector<QSpecRef> group_spec;
};

/// Reads the annotations of `graph` (node meta, printed form) and groups their edges and
/// outputs. Throws, naming the node, for an annotation that does not parse, an input edge from a
/// node that is not an input of the annotated node, a tensor kwarg on an annotated node, a
/// shared spec naming an edge or node no annotation quantizes, and shared specs that form a cycle.
SharingPlan computeSharing(const Graph& graph);

}  // namespace pt2q
