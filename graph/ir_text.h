// The IR's text form: printing and parsing. See docs/ir_text.md for the grammar.
//
//   graph @main(%x: f32[s0, 16]):
//     %weight = get_attr "layer.weight" : f32[8, 16]
//     %linear = aten.linear(%x, %weight, none) : f32[s0, 8] {nn_module_stack = [("layer", "layer", "Linear")]}
//     %getitem = call_opaque "_operator.getitem"(%linear, 0)
//     return (%linear,)
//
// print(parse(text)) == text for printed text (a fixed point), and parse(print(g)) rebuilds g
// (same nodes, names, targets, arguments and meta; tensors are referred to, never printed).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "graph/graph.h"

namespace pt2q {

/// The text form of a graph.
std::string printGraph(const Graph& graph);
/// One node's line (without indentation), for error messages and logs.
std::string printNode(const Node& node);
/// An argument as it appears in the text form.
std::string printArgument(const Argument& a);

/// Parses one graph. Errors name the line and column and what was expected. Lines starting
/// with '#' are comments. The result is verified (verify()).
std::unique_ptr<Graph> parseGraph(std::string_view text, const std::string& source = "<text>");

/// The cases of a test file, split at lines starting with "# -----", each with the number of
/// the line it starts on (so that errors can name lines of the whole file).
std::vector<std::pair<std::string, int>> splitTestCases(std::string_view text);

/// Short dtype names of the text form ("f32", "bf16", "i8", "f8e4m3", ...), and back.
const char* dtypeShortName(c10::ScalarType t);
std::optional<c10::ScalarType> dtypeFromShortName(std::string_view name);
/// torch's dtype names ("float32", "bfloat16"), used for dtype arguments (torch.float32), and back.
const char* dtypeTorchName(c10::ScalarType t);
std::optional<c10::ScalarType> dtypeFromTorchName(std::string_view name);
/// Layout and memory format names as torch spells them ("strided", "channels_last"), and back.
const char* layoutName(c10::Layout l);
std::optional<c10::Layout> layoutFromName(std::string_view name);
const char* memoryFormatName(c10::MemoryFormat m);
std::optional<c10::MemoryFormat> memoryFormatFromName(std::string_view name);

}  // namespace pt2q
