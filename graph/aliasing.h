#pragma once
// What the graph writes: values, and the constants (buffers) behind them, that a node updates in
// place.
#include <set>
#include <string>

#include "graph/graph.h"

namespace pt2q {

/// Whether some node of the graph writes the storage of `value`: a user binds it (or a view of
/// it) to an argument its schema marks as written (`Tensor(a!)`: copy_'s and add_'s self, an
/// `out=` tensor). Views are followed forward: an argument with an alias set (`Tensor(a)`) may
/// share storage with the result, getitem shares its list's, and a submodule call (an observer)
/// returns its input. Other Python calls (higher-order ops) return fresh tensors.
bool isWritten(const Node* value);

/// Paths of the constants that a node of `g` writes (isWritten of any get_attr of them).
/// torch.export's module() writes a mutated buffer back with `aten.copy_(buffer, new_value)` at
/// the end of the graph, so a read of that buffer earlier in the graph sees a value that changes
/// from call to call: it is state, not a constant to fold or pack.
std::set<std::string> mutatedConstants(const Graph& g);

/// mutatedConstants(g).count(path), without building the set.
bool isMutatedConstant(const Graph& g, const std::string& path);

}  // namespace pt2q
