// The IR verifier: Graph's invariants (graph.h) and schema conformance of operator calls.
#pragma once

#include <string>

#include "graph/graph.h"

namespace pt2q {

/// Checks every invariant listed in graph.h and, for call_function nodes with an operator, that
/// the arguments fit its schema (arity, keyword names, required arguments, argument kinds).
/// Throws c10::Error naming the first offending node and what was expected. Every pass runs it
/// after itself in debug and test builds (see graph/pass.h).
void verify(const Graph& graph);

/// The same checks; returns the first problem instead of throwing ("" when the graph is valid).
std::string verifyMessage(const Graph& graph);

}  // namespace pt2q
