// SubgraphMatcher's contract (match.h) and the greedy driver (rewrite.h), graphs from IR text.
#include <gtest/gtest.h>

#include "graph/ir_text.h"
#include "graph/match.h"
#include "graph/rewrite.h"
#include "graph/verifier.h"

namespace pt2q {
namespace {

constexpr const char* kAddRelu = R"IR(graph @add_relu(%a, %b, %alpha):
  %s = aten.add.Tensor(%a, %b, alpha=%alpha)
  %r = aten.relu(%s)
  return %r
)IR";

std::unique_ptr<Match> matchNamed(const SubgraphMatcher& m, const Graph& g, const char* root, std::string* why) {
  return m.matchAt(g.findNode(root), why);
}

// Placeholders bind nodes and literals; every pattern node maps to its graph node.
TEST(SubgraphMatcherTest, BindsPlaceholdersToNodesAndLiterals) {
  SubgraphMatcher m(kAddRelu, "add-relu");
  auto g = parseGraph(R"IR(graph @g(%x: f32[4], %y: f32[4]):
  %s = aten.add.Tensor(%x, %y, alpha=2)
  %r = aten.relu(%s)
  return (%r,)
)IR");
  std::string why;
  auto match = matchNamed(m, *g, "r", &why);
  ASSERT_NE(match, nullptr) << why;
  EXPECT_EQ(match->value("a"), g->findNode("x"));
  EXPECT_EQ(match->value("b"), g->findNode("y"));
  EXPECT_EQ(match->value("alpha"), nullptr);
  EXPECT_EQ(printArgument(match->argument("alpha")), "2");
  EXPECT_EQ(match->value("s"), g->findNode("s"));
  EXPECT_EQ(match->root(), g->findNode("r"));
  EXPECT_EQ(match->nodes(), (std::vector<Node*>{g->findNode("s"), g->findNode("r")}));
}

// An intermediate value used outside the match cannot be removed, so there is no match.
TEST(SubgraphMatcherTest, RejectsMatchWithUseOutsideTheMatch) {
  SubgraphMatcher m(kAddRelu, "add-relu");
  auto g = parseGraph(R"IR(graph @g(%x: f32[4], %y: f32[4]):
  %s = aten.add.Tensor(%x, %y, alpha=1)
  %r = aten.relu(%s)
  return (%r, %s)
)IR");
  std::string why;
  EXPECT_EQ(matchNamed(m, *g, "r", &why), nullptr);
  EXPECT_EQ(why, "%s (pattern %s) is also used by %output outside the match");
}

TEST(SubgraphMatcherTest, ReasonsForMismatches) {
  SubgraphMatcher m(kAddRelu, "add-relu");
  std::string why;
  auto g = parseGraph("graph @g(%x: f32[4]):\n  %n = aten.neg(%x)\n  %r = aten.relu(%n)\n  return (%r,)\n");
  EXPECT_EQ(matchNamed(m, *g, "r", &why), nullptr);
  EXPECT_EQ(why, "%n is aten.neg, the pattern wants aten.add.Tensor");
  g = parseGraph("graph @g(%x: f32[4]):\n  %s = aten.add.Tensor(%x, %x)\n  %r = aten.relu(%s)\n  return (%r,)\n");
  EXPECT_EQ(matchNamed(m, *g, "r", &why), nullptr);
  EXPECT_EQ(why, "%s has 2 positional and 0 keyword arguments, the pattern 2 and 1");
  // A placeholder used twice must bind the same argument both times.
  SubgraphMatcher same(R"IR(graph @square(%a):
  %m = aten.mul.Tensor(%a, %a)
  return %m
)IR", "square");
  g = parseGraph("graph @g(%x: f32[4], %y: f32[4]):\n  %m = aten.mul.Tensor(%x, %y)\n  %n = aten.mul.Tensor(%x, %x)\n  return (%m, %n)\n");
  EXPECT_EQ(matchNamed(same, *g, "m", &why), nullptr);
  EXPECT_EQ(why, "placeholder %a would bind both %x and %y");
  EXPECT_NE(matchNamed(same, *g, "n", &why), nullptr);
  // Literals must be equal, floats bit for bit.
  SubgraphMatcher half(R"IR(graph @half(%a):
  %m = aten.mul.Scalar(%a, 0.5)
  return %m
)IR", "half");
  g = parseGraph("graph @g(%x: f32[4]):\n  %m = aten.mul.Scalar(%x, 0.25)\n  return (%m,)\n");
  EXPECT_EQ(matchNamed(half, *g, "m", &why), nullptr);
  EXPECT_EQ(why, "%m has 0.25 where the pattern has 0.5");
  EXPECT_EQ(half.findAll(*g).size(), 0u);
}

TEST(SubgraphMatcherTest, PatternsMustHaveOneRootReachedByEveryNode) {
  EXPECT_THROW(SubgraphMatcher("graph @p(%x):\n  return %x\n", "p"), c10::Error);
  EXPECT_THROW(SubgraphMatcher("graph @p(%x):\n  %a = aten.neg(%x)\n  %b = aten.relu(%x)\n  return %b\n", "p"),
               c10::Error);
}

// The driver rewrites to a fixed point, leaves rejected matches alone and reports counts.
TEST(RewriteTest, GreedyToAFixedPointWithFilters) {
  RewritePatternSet set;
  set.add({"neg-neg", "graph @p(%x):\n  %a = aten.neg(%x)\n  %b = aten.neg(%a)\n  return %b\n",
           "graph @r(%x):\n  return %x\n", {}, 1});
  set.add({"small-scale", "graph @p(%x, %s):\n  %m = aten.mul.Scalar(%x, %s)\n  return %m\n",
           "graph @r(%x, %s):\n  %d = aten.div.Scalar(%x, 2)\n  return %d\n",
           {[](const Match& m) { return printArgument(m.argument("s")) == "0.5" ? "" : "not a half"; }}, 2});
  auto g = parseGraph(R"IR(graph @g(%x: f32[4]):
  %a = aten.neg(%x)
  %b = aten.neg(%a)
  %c = aten.neg(%b)
  %d = aten.neg(%c) : f32[4]
  %h = aten.mul.Scalar(%d, 0.5) : f32[4] {stack_trace = "model.py:9"}
  %t = aten.mul.Scalar(%h, 3.0)
  return (%t,)
)IR");
  const RewriteResult r = applyPatternsGreedily(*g, set);
  verify(*g);
  EXPECT_EQ(r.num_rewrites, 3);
  EXPECT_EQ(r.by_pattern.at("neg-neg"), 2);
  EXPECT_EQ(r.by_pattern.at("small-scale"), 1);
  EXPECT_TRUE(r.converged);
  EXPECT_EQ(printGraph(*g), R"IR(graph @g(%x: f32[4]):
  %d = aten.div.Scalar(%x, 2) : f32[4] {stack_trace = "model.py:9"}
  %t = aten.mul.Scalar(%d, 3.0)
  return (%t,)
)IR");
}

TEST(RewriteTest, ReplacementPlaceholdersMustComeFromThePattern) {
  RewritePatternSet set;
  EXPECT_THROW(set.add({"bad", "graph @p(%x):\n  %a = aten.neg(%x)\n  return %a\n", "graph @r(%y):\n  return %y\n", {}, 1}),
               c10::Error);
}

}  // namespace
}  // namespace pt2q
