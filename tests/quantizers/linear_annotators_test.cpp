// The native linears' annotator ("native_linear") through the C++ API: what it claims, what it
// leaves alone (other ops, filtered nodes, nodes annotated first, linears whose weight is not a
// node), and its error, which changes nothing.
#include <gtest/gtest.h>

#include <c10/util/Exception.h>

#include "graph/ir_text.h"
#include "quantizers/annotators.h"

namespace pt2q {
namespace {

constexpr const char* kText = R"IR(graph @m(%x: f32[2, 8], %w2: f32[8, 8]):
  %w = get_attr "a.weight" : f32[8, 8]
  %b = get_attr "a.bias" : f32[8]
  %y = aten.linear(%x, %w, %b) : f32[2, 8]
  %z = aten.linear(%y, %w2) : f32[2, 8]
  %s = aten.linear(%w2, %w2) : f32[8, 8]
  %t = aten.linear(%z, %w) : f32[2, 8] {annotation = "in %z = none; annotated"}
  %r = aten.relu(%t) : f32[2, 8]
  return (%r, %s)
)IR";

QSpecRef spec(int id, const char* dtype) {
  return parseAnnotation(std::string("out = spec#") + std::to_string(id) + "{dtype=" + dtype + "}", "<test>").output;
}

std::string ann(const Graph& g, const std::string& name) {
  for (const Node* n : g.nodes()) {
    if (n->name() == name) return n->meta().annotation;
  }
  ADD_FAILURE() << "no node " << name;
  return "";
}

TEST(LinearAnnotatorsTest, WeightOnlyAnnotatesEveryLinearWeight) {
  auto g = parseGraph(kText);
  RoleSpecs roles;
  roles.weight = spec(0, "torch.int8");
  runAnnotators(*g, {"native_linear"}, roles, nullptr);
  EXPECT_EQ(ann(*g, "y"), "in %w = spec#0{dtype=torch.int8}; annotated");
  EXPECT_EQ(ann(*g, "z"), "in %w2 = spec#0{dtype=torch.int8}; annotated");
  EXPECT_EQ(ann(*g, "s"), "in %w2 = spec#0{dtype=torch.int8}; annotated");
  EXPECT_EQ(ann(*g, "t"), "in %z = none; annotated");  // annotated first: kept as it was
  EXPECT_EQ(ann(*g, "r"), "");
}

TEST(LinearAnnotatorsTest, DynamicAddsTheInputAfterTheWeight) {
  auto g = parseGraph(kText);
  RoleSpecs roles;
  roles.weight = spec(0, "torch.int8");
  roles.input_activation = spec(1, "torch.int8");
  const std::set<std::string> allowed = {"z", "s"};
  runAnnotators(*g, {"native_linear"}, roles, &allowed);
  EXPECT_EQ(ann(*g, "y"), "");  // not in the filter
  EXPECT_EQ(ann(*g, "z"), "in %w2 = spec#0{dtype=torch.int8}; in %y = spec#1{dtype=torch.int8}; annotated");
  // F.linear(w2, w2): one edge, with the input spec
  EXPECT_EQ(ann(*g, "s"), "in %w2 = spec#1{dtype=torch.int8}; annotated");
}

TEST(LinearAnnotatorsTest, NoWeightSpecIsAnErrorThatChangesNothing) {
  auto g = parseGraph(kText);
  const std::string before = printGraph(*g);
  RoleSpecs roles;
  roles.input_activation = spec(1, "torch.int8");
  try {
    runAnnotators(*g, {"native_linear"}, roles, nullptr);
    FAIL() << "expected an error";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("native_linear annotator: the quantization config has no weight spec"),
              std::string::npos);
  }
  EXPECT_EQ(printGraph(*g), before);
}

}  // namespace
}  // namespace pt2q
