// isWritten / mutatedConstants: writes found through views, kwargs, getitem and observers; reads,
// copies and fresh results are not writes.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "graph/aliasing.h"
#include "graph/ir_text.h"

namespace pt2q {
namespace {

std::unique_ptr<Graph> parseWithConstants(const char* text) {
  auto g = parseGraph(text, "test");
  for (Node* n : g->nodes()) {
    if (n->kind() == NodeKind::kGetAttr) g->constants()[n->target()] = at::zeros({4});
  }
  return g;
}

// export's module() writes a mutated buffer back with copy_ after reading it.
TEST(AliasingTest, CopyIntoABufferWritesIt) {
  auto g = parseWithConstants(R"IR(
graph @copy_back(%x: f32[4]):
  %buf = get_attr "buf" : f32[4]
  %w = get_attr "w" : f32[4]
  %a = aten.add.Tensor(%buf, %x)
  %m = aten.mul.Tensor(%a, %w)
  %c = aten.copy_(%buf, %a)
  return (%m,)
)IR");
  EXPECT_TRUE(isWritten(g->findNode("buf")));
  EXPECT_FALSE(isWritten(g->findNode("w")));
  EXPECT_FALSE(isWritten(g->findNode("a")));
  EXPECT_EQ(mutatedConstants(*g), (std::set<std::string>{"buf"}));
  EXPECT_TRUE(isMutatedConstant(*g, "buf"));
  EXPECT_FALSE(isMutatedConstant(*g, "w"));
}

// A write to a view (slice, then select of it) writes the buffer; a write to a copy does not.
TEST(AliasingTest, WritesThroughViewsButNotCopies) {
  auto g = parseWithConstants(R"IR(
graph @views(%x: f32[2]):
  %state = get_attr "state" : f32[4]
  %weight = get_attr "weight" : f32[4]
  %s = aten.slice.Tensor(%state, 0, 0, 2)
  %v = aten.select.int(%s, 0, 1)
  %r = aten.add_.Scalar(%v, 1.0)
  %k = aten.clone(%weight)
  %t = aten.mul_.Scalar(%k, 2.0)
  return (%x,)
)IR");
  EXPECT_EQ(mutatedConstants(*g), (std::set<std::string>{"state"}));
  EXPECT_TRUE(isWritten(g->findNode("k")));
  EXPECT_FALSE(isWritten(g->findNode("weight")));
}

// out= is a keyword argument marked as written; getitem of split's list of views and an observer
// (call_module, which returns its input) pass the alias on.
TEST(AliasingTest, OutKeywordGetitemAndSubmoduleCalls) {
  auto g = parseWithConstants(R"IR(
graph @kinds(%x: f32[4]):
  %a = get_attr "a" : f32[4]
  %b = get_attr "b" : f32[4]
  %c = get_attr "c" : f32[4]
  %o = aten.add.out(%x, %x, out=%a)
  %parts = aten.split.Tensor(%b, 2)
  %p0 = call_opaque "_operator.getitem"(%parts, 0)
  %z = aten.zero_(%p0)
  %obs = call_module "activation_post_process_0"(%c)
  %f = aten.fill_.Scalar(%obs, 0.0)
  return (%x,)
)IR");
  EXPECT_EQ(mutatedConstants(*g), (std::set<std::string>{"a", "b", "c"}));
}

// A read-only graph writes nothing, whatever views it takes.
TEST(AliasingTest, ReadsAreNotWrites) {
  auto g = parseWithConstants(R"IR(
graph @reads(%x: f32[4]):
  %w = get_attr "w" : f32[4]
  %t = aten.t(%w)
  %v = aten.view(%t, [4])
  %y = aten.add.Tensor(%v, %x)
  return (%y,)
)IR");
  EXPECT_TRUE(mutatedConstants(*g).empty());
}

}  // namespace
}  // namespace pt2q
