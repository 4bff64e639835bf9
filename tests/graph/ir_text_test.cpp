// The IR text form: print(parse(t)) is a fixed point, parse(print(g)) rebuilds g, and parse
// errors name the line, column and what was expected.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "graph/ir_text.h"
#include "graph/verifier.h"

namespace pt2q {
namespace {

// Structural equality of two graphs: same nodes in the same order with the same names, kinds,
// targets, arguments (node references by name) and meta.
void expectSameGraph(const Graph& a, const Graph& b) {
  ASSERT_EQ(a.name(), b.name());
  const auto na = a.nodes(), nb = b.nodes();
  ASSERT_EQ(na.size(), nb.size());
  for (size_t i = 0; i < na.size(); ++i) {
    const Node& x = *na[i];
    const Node& y = *nb[i];
    SCOPED_TRACE("node %" + x.name());
    EXPECT_EQ(x.name(), y.name());
    EXPECT_EQ(x.kind(), y.kind());
    EXPECT_EQ(x.target(), y.target());
    EXPECT_EQ(x.isOpaque(), y.isOpaque());
    EXPECT_TRUE(x.meta() == y.meta());
    ASSERT_EQ(x.args().size(), y.args().size());
    for (size_t k = 0; k < x.args().size(); ++k) EXPECT_EQ(printArgument(x.args()[k]), printArgument(y.args()[k]));
    ASSERT_EQ(x.kwargs().size(), y.kwargs().size());
    for (size_t k = 0; k < x.kwargs().size(); ++k) {
      EXPECT_EQ(x.kwargs()[k].first, y.kwargs()[k].first);
      EXPECT_EQ(printArgument(x.kwargs()[k].second), printArgument(y.kwargs()[k].second));
    }
  }
}

std::string roundTrip(const std::string& text) {
  const std::string once = printGraph(*parseGraph(text, "t"));
  EXPECT_EQ(printGraph(*parseGraph(once, "t")), once) << "printing is not a fixed point";
  return once;
}

TEST(IrTextTest, EveryArgumentKindRoundTrips) {
  const std::string text = R"IR(graph @all(%x: f32[s0, 16], %n: sym("s0"), %d = 3 {"k" = "v"}):
  %w = get_attr "layer.weight" : bf16[8, 16]
  %t = aten._to_copy(%x, dtype=torch.bfloat16, layout=torch.strided, device=torch.device("cuda:1"), pin_memory=false, memory_format=torch.channels_last)
  %v = aten.view(%x, [sym("2*s0"), -1]) : f32["2*s0", 8]
  %m = aten.mul.Scalar(%x, -0.0)
  %i = aten.mul.Scalar(%m, inf)
  %j = aten.mul.Scalar(%i, -inf)
  %k = aten.mul.Scalar(%j, 1e-300)
  %g = call_opaque "_operator.getitem"(%x, (1, "a\n\"b\"\\", none, [], (), [true, false], (2,)))
  %o = call_opaque "torch.ops.higher_order.out_dtype"(op("aten.mul.Tensor"), torch.int32, %g, %g)
  %c = call_module "sub.block"(%o, flag=true) : (f32[2], i64[], sym, symbool("s1 > 2"), tensor, tensor[3]) {nn_module_stack = [("L__self___sub", "sub", "M.Sub"), ("b", "sub.block", "M.Block")], stack_trace = "line 1\nline 2", annotation = "int8 per tensor"}
  return (%t, %v, %k, %c, %w, %n, %d)
)IR";
  EXPECT_EQ(roundTrip(text), text);
}

// parse(print(g)) == g for graphs built through the API, including doubles of every kind.
TEST(IrTextTest, BuiltGraphsRoundTripBitForBit) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    Graph g;
    g.setName("random" + std::to_string(trial));
    Node* x = g.addPlaceholder("x");
    x->meta().types.push_back(ValueType{ValueType::Kind::kTensor, c10::kFloat, std::vector<Dim>{int64_t{4}}, {}});
    Node* last = x;
    std::vector<Argument> tail;
    for (int i = 0; i < 20; ++i) {
      uint64_t bits = rng();
      double d;
      std::memcpy(&d, &bits, sizeof(d));
      if (std::isnan(d)) d = 0.5;  // NaN payloads are not kept (one spelling, nan)
      last = g.create(NodeKind::kCallFunction, "aten.mul.Scalar", {Argument(last), Argument(d)});
      tail.emplace_back(static_cast<int64_t>(rng()));
    }
    g.setOutput(Argument(ArgTuple{{Argument(last), Argument(ArgList{tail})}}));
    verify(g);
    const std::string text = printGraph(g);
    auto back = parseGraph(text, "t");
    expectSameGraph(g, *back);
    const auto a = g.nodes(), b = back->nodes();
    for (size_t i = 1; i + 1 < a.size(); ++i) EXPECT_TRUE(a[i]->args()[1] == b[i]->args()[1]) << text;
    EXPECT_EQ(printGraph(*back), text);
  }
}

// Subgraphs (a cond's branches) print after the main graph, named by path, and parse back.
TEST(IrTextTest, SubgraphsRoundTripAndAttachByPath) {
  const std::string text = R"IR(graph @main(%p: b8[], %x: f32[2]):
  %t = get_attr "true_graph_0"
  %f = get_attr "sub.false_graph_0"
  %c = call_opaque "torch.ops.higher_order.cond"(%p, %t, %f, (%x,))
  %g = call_opaque "_operator.getitem"(%c, 0)
  return (%g,)

graph @sub.false_graph_0(%x: f32[2]):
  %n = aten.neg(%x)
  return (%n,)

graph @true_graph_0(%x: f32[2]):
  %r = aten.relu(%x)
  return (%r,)

graph @true_graph_0.inner(%y):
  return (%y,)
)IR";
  auto g = parseGraph(text, "t");
  ASSERT_EQ(g->subgraphs().size(), 2u);
  EXPECT_EQ(g->subgraphs().at("true_graph_0")->subgraphs().count("inner"), 1u);  // nested by its path prefix
  EXPECT_EQ(g->subgraphs().at("sub.false_graph_0")->name(), "sub.false_graph_0");
  EXPECT_EQ(printGraph(*g), text);
  expectSameGraph(*g->subgraphs().at("true_graph_0"), *parseGraph(printGraph(*g), "t")->subgraphs().at("true_graph_0"));
}

void expectParseError(const char* text, const std::string& message) {
  try {
    parseGraph(text, "in.ir");
    FAIL() << "parsed: " << text;
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what_without_backtrace()).find(message), std::string::npos) << e.what_without_backtrace();
  }
}

TEST(IrTextTest, ErrorsNameTheLineColumnAndExpectation) {
  expectParseError("grph @g():\n  return ()", "in.ir:1:1: expected 'graph', got 'grph'");
  expectParseError("graph @g(%x):\n  %y = aten.relu(%z)\n  return (%y,)", "in.ir:2:18: expected a value defined above, got %z");
  expectParseError("graph @g(%x):\n  %y = call_opaque \"f\"(op(aten.mm))\n  return (%y,)",
                   "in.ir:2:27: expected an operator name as a string");
  expectParseError("graph @g(%x):\n  %y = aten.nosuchop(%x)\n  return (%y,)",
                   "in.ir:2:8: expected an operator the dispatcher knows (opaque callables are written call_opaque "
                   "\"name\"), got 'aten.nosuchop'");
  expectParseError("graph @g(%x):\n  %x = aten.relu(%x)\n  return (%x,)", "expected a new value name (%x is already defined)");
  expectParseError("graph @g(%x):\n  %y = aten.relu(%x) : f33[2]\n  return (%y,)", "expected a dtype such as f32, bf16, i8 (got 'f33')");
  expectParseError("graph @g(%x):\n  %y = call_opaque \"aten.relu\"(%x)\n  return (%y,)", "expected an opaque target");
  expectParseError("graph @g(%x):\n  %y = aten.relu(%x, \"unterminated)\n", "in.ir:2:22: expected a closing '\"', got the end of the line");
  expectParseError("graph @g(%x):\n  %y = aten.add.Tensor(%x, alpha=1, %x)\n  return (%y,)",
                   "expected a keyword argument (positional arguments come first)");
  expectParseError("graph @g(%x):\n  %y = aten.relu(%x)\n", "expected a node or 'return', got the end of the text");
  expectParseError("graph @g(%x):\n  return (%x)", "expected a 1-tuple written '(x,)'");
  expectParseError("graph @g(%x):\n  return (%x,)\ngraph @s(%y):\n  return (%y,)\ngraph @s(%y):\n  return (%y,)\n",
                   "in.ir:5:1: expected a new subgraph name, got @s a second time");
  expectParseError("graph @g(%x):\n  return (%x,)\n%y = aten.relu(%x)", "expected the end of the graph after 'return', or a subgraph");
  // Parsed graphs are verified: schema errors come with the node.
  expectParseError("graph @g(%x):\n  %y = aten.add.Tensor(%x)\n  return (%y,)",
                   "node %y: aten.add.Tensor is missing its required argument 'other'");
}

}  // namespace
}  // namespace pt2q
