// Graph mutation API and verifier: every invariant of graph.h, and the errors that name nodes.
#include <gtest/gtest.h>

#include "graph/graph.h"
#include "graph/ir_text.h"
#include "graph/verifier.h"

namespace pt2q {
namespace {

std::unique_ptr<Graph> parse(const char* text) { return parseGraph(text, "test"); }

constexpr const char* kChain = R"IR(
graph @chain(%x: f32[4]):
  %a = aten.relu(%x)
  %b = aten.neg(%a)
  %c = aten.add.Tensor(%a, %b)
  return (%c,)
)IR";

// Use lists follow setArgs, replaceAllUsesWith and erase.
TEST(GraphTest, UseListsFollowMutations) {
  auto g = parse(kChain);
  Node* x = g->findNode("x");
  Node* a = g->findNode("a");
  Node* b = g->findNode("b");
  Node* c = g->findNode("c");
  EXPECT_EQ(a->users(), (std::vector<Node*>{b, c}));
  g->replaceAllUsesWith(a, x);
  EXPECT_TRUE(a->users().empty());
  EXPECT_EQ(x->users(), (std::vector<Node*>{a, b, c}));
  g->erase(a);
  EXPECT_EQ(x->users(), (std::vector<Node*>{b, c}));
  EXPECT_EQ(c->args()[0].node(), x);
  verify(*g);
}

// A node used twice by one user is listed once and stays a user until both uses go.
TEST(GraphTest, RepeatedUseIsOneUser) {
  auto g = parse(R"IR(
graph @twice(%x: f32[4]):
  %m = aten.mul.Tensor(%x, %x)
  return (%m,)
)IR");
  Node* x = g->findNode("x");
  Node* m = g->findNode("m");
  EXPECT_EQ(x->users().size(), 1u);
  m->setArgs({Argument(x), Argument(m->args()[1])});
  EXPECT_EQ(x->users().size(), 1u);
  Node* y = g->addPlaceholder("y");
  m->setArgs({Argument(x), Argument(y)});
  EXPECT_EQ(x->users().size(), 1u);
  EXPECT_EQ(y->users().size(), 1u);
  verify(*g);
}

TEST(GraphTest, EraseRefusesANodeWithUsers) {
  auto g = parse(kChain);
  try {
    g->erase(g->findNode("a"));
    FAIL() << "erase of a used node succeeded";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("node %a still has 2 user(s), the first %b"), std::string::npos) << e.what();
  }
  verify(*g);  // nothing changed
}

TEST(GraphTest, CreateNamesUniquelyAndResolvesOperators) {
  auto g = parse(kChain);
  Node* a = g->findNode("a");
  Node* r = g->create(NodeKind::kCallFunction, "aten.relu", {Argument(a)});
  EXPECT_EQ(r->name(), "relu");
  Node* r2 = g->create(NodeKind::kCallFunction, "aten.relu.default", {Argument(r)});
  EXPECT_EQ(r2->name(), "relu_1");
  EXPECT_TRUE(r2->op().has_value());
  Node* o = g->create(NodeKind::kCallFunction, "_operator.getitem", {Argument(r2), Argument(int64_t{0})});
  EXPECT_TRUE(o->isOpaque());
  EXPECT_EQ(o->name(), "getitem");
  EXPECT_EQ(g->indexOf(o), g->indexOf(g->output()) - 1);  // created before the output
  verify(*g);
}

// Each invariant, broken one at a time, is reported with the node that breaks it.
TEST(VerifierTest, UseBeforeDefinition) {
  auto g = parse(kChain);
  g->moveBefore(g->findNode("c"), g->findNode("a"));
  EXPECT_EQ(verifyMessage(*g), "node %c: refers to %a, which comes after it");
}

TEST(VerifierTest, PlaceholderAfterACall) {
  auto g = parse(kChain);
  Node* unused = g->addPlaceholder("unused");
  g->moveBefore(unused, g->findNode("b"));
  EXPECT_EQ(verifyMessage(*g), "node %unused: placeholder after a non-placeholder node (placeholders come first)");
}

TEST(VerifierTest, OutputNotLast) {
  auto g = parse(kChain);
  g->moveBefore(g->output(), g->findNode("c"));
  EXPECT_NE(verifyMessage(*g).find("output node is not the last node"), std::string::npos);
}

TEST(VerifierTest, ReferenceIntoAnotherGraph) {
  auto g = parse(kChain);
  auto other = parse(kChain);
  g->findNode("c")->setArgs({Argument(other->findNode("a")), Argument(g->findNode("b"))});
  EXPECT_EQ(verifyMessage(*g), "node %c: refers to %a of another graph");
  g->findNode("c")->setArgs({Argument(g->findNode("a")), Argument(g->findNode("b"))});  // leave `other` clean
}

TEST(VerifierTest, SchemaArityKeywordsAndKinds) {
  auto g = parse(kChain);
  Node* x = g->findNode("x");
  Node* n = g->create(NodeKind::kCallFunction, "aten.add.Tensor", {Argument(x)});
  EXPECT_EQ(verifyMessage(*g), "node %add: aten.add.Tensor is missing its required argument 'other'");
  n->setArgs({Argument(x), Argument(x), Argument(int64_t{1}), Argument(int64_t{2})});
  EXPECT_EQ(verifyMessage(*g), "node %add: aten.add.Tensor takes at most 2 positional argument(s), got 4");
  n->setArgs({Argument(x), Argument(x)}, {{"beta", Argument(int64_t{1})}});
  EXPECT_EQ(verifyMessage(*g), "node %add: aten.add.Tensor has no argument 'beta'");
  n->setArgs({Argument(x), Argument(x)}, {{"alpha", Argument("two")}});
  EXPECT_EQ(verifyMessage(*g), "node %add: argument 'alpha' of aten.add.Tensor expects Scalar, got a string");
  n->setArgs({Argument(x), Argument(ArgList{})});
  EXPECT_EQ(verifyMessage(*g), "node %add: argument 'other' of aten.add.Tensor expects Tensor, got a list");
  n->setArgs({Argument(x), Argument(int64_t{3})});  // a Python number for a Tensor is wrapped when run
  EXPECT_EQ(verifyMessage(*g), "");
  n->setArgs({Argument(x), Argument(x)}, {{"alpha", Argument(2.5)}});
  EXPECT_EQ(verifyMessage(*g), "");
}

TEST(VerifierTest, MissingOutput) {
  Graph g;
  g.addPlaceholder("x");
  EXPECT_EQ(verifyMessage(g), "the graph has no output node");
  try {
    verify(g);
    FAIL();
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("IR verification failed in graph @main"), std::string::npos);
  }
}

}  // namespace
}  // namespace pt2q
