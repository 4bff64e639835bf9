// .pt2q graph files: the IR and its constant tensors, saved and loaded (proto/graph.proto).
#pragma once

#include <memory>
#include <string>

#include "graph/graph.h"

namespace pt2q {

/// The file bytes of `graph` and its constants (CPU copies, little-endian, dense).
std::string serializeGraph(const Graph& graph);

/// Rebuilds a graph from file bytes. Everything is checked before it is used: a foreign,
/// truncated or corrupted file, one from a newer format version, a reference to a node not
/// defined before it, an unknown node kind, dtype or operator, and tensor data that does not
/// match its dtype and shape all fail with an error naming `source` (and the node or tensor),
/// never a crash. The result is verified.
std::unique_ptr<Graph> deserializeGraph(const std::string& bytes, const std::string& source = "<bytes>");

/// serializeGraph / deserializeGraph to and from a file.
void saveGraph(const Graph& graph, const std::string& path);
std::unique_ptr<Graph> loadGraph(const std::string& path);

}  // namespace pt2q
