// Observer insertion of prepare_pt2e (contract §2.1 step 7, §2.4): call_module nodes named
// activation_post_process_N after each observed value, exactly where torchao puts them.
#pragma once

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "graph/graph.h"
#include "quantizers/annotation.h"

namespace pt2q {

struct InsertedObserver {
  std::string node;  // the call_module node (its name is the attribute's unless that was taken)
  std::string attr;  // the module attribute it calls: activation_post_process_N
  int instance;      // which observer instance that is
};

/// Inserts observer nodes into `graph` for the annotated nodes (those whose meta annotation is
/// set), in graph order, each node's input edges (arguments in order, lists flattened) before
/// its output: an edge (or output) in `instance_of` gets a call to that instance unless the
/// producer's output already calls the same instance or another user already inserted it, and
/// an in-place op's destination that only buffers feed (`buffers`) is left alone. Names are
/// activation_post_process_N with N the smallest not in `taken` nor used before. A value is
/// observed as an output only if it is one tensor. Returns the inserted nodes in insertion
/// order; on error throws and leaves the graph as it was.
std::vector<InsertedObserver> insertObservers(Graph& graph, const std::map<EdgeOrNode, int>& instance_of,
                                              const std::set<std::string>& taken,
                                              const std::set<std::string>& buffers);

}  // namespace pt2q
