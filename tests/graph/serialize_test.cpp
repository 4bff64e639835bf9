// .pt2q graph files: exact round trips (graph, meta, tensors with their dtypes and strides) and
// clear errors, never crashes, for foreign, truncated, corrupted and inconsistent files.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <random>

#include "graph/ir_text.h"
#include "graph/serialize.h"
#include "proto/graph_file.h"

namespace pt2q {
namespace {

constexpr const char* kText = R"IR(graph @model(%x: f32[s0, 4] {"note" = "input"}):
  %w = get_attr "layer.weight" : f32[3, 4]
  %b = get_attr "layer.bias" : bf16[3]
  %lin = aten.linear(%x, %w, none) : f32[s0, 3] {nn_module_stack = [("L__self___layer", "layer", "Linear")], stack_trace = "m.py:3", annotation = "int8"}
  %c = aten._to_copy(%lin, dtype=torch.bfloat16, device=torch.device("cpu"), memory_format=torch.preserve_format)
  %s = aten.add.Tensor(%c, %b, alpha=0.5)
  %v = aten.view(%s, [sym("s0"), -1])
  %g = call_opaque "_operator.getitem"(%v, (0, none, [true, -1.5e-300]))
  %o = call_opaque "torch.ops.higher_order.out_dtype"(op("aten.mm"), torch.int32, %lin, %w)
  return (%s, %g, %o)
)IR";

std::unique_ptr<Graph> sample() {
  auto g = parseGraph(kText, "sample");
  g->constants()["layer.weight"] = at::randn({4, 3}).t();  // non-contiguous strides
  g->constants()["layer.bias"] = at::randn({3}).to(at::kBFloat16);
  g->constants()["extra.codes"] = at::randint(0, 255, {2, 0, 5}, at::kByte);  // zero elements
  g->constants()["extra.int4"] = at::randint(0, 16, {7}, at::kByte).view(at::ScalarType::UInt4);
  return g;
}

TEST(SerializeTest, RoundTripIsExact) {
  auto g = sample();
  const std::string bytes = serializeGraph(*g);
  auto back = deserializeGraph(bytes, "mem");
  EXPECT_EQ(printGraph(*back), printGraph(*g));
  ASSERT_EQ(back->constants().size(), g->constants().size());
  for (const auto& [path, t] : g->constants()) {
    const at::Tensor& u = back->constants().at(path);
    EXPECT_EQ(u.scalar_type(), t.scalar_type()) << path;
    EXPECT_EQ(u.sizes(), t.sizes()) << path;
    EXPECT_EQ(u.strides(), t.strides()) << path;
    EXPECT_TRUE(at::equal(u.contiguous().view(at::kByte), t.contiguous().view(at::kByte))) << path;  // bit for bit
  }
  EXPECT_EQ(serializeGraph(*back), bytes);  // deterministic
}

TEST(SerializeTest, SubgraphsRoundTrip) {
  auto g = parseGraph(R"IR(graph @main(%p: b8[], %x: f32[2]):
  %t = get_attr "true_graph_0"
  %f = get_attr "false_graph_0"
  %c = call_opaque "torch.ops.higher_order.cond"(%p, %t, %f, (%x,))
  return (%c,)

graph @false_graph_0(%x: f32[2]):
  %n = aten.neg(%x)
  return (%n,)

graph @true_graph_0(%x: f32[2]):
  %r = aten.relu(%x)
  return (%r,)
)IR");
  g->subgraphs().at("true_graph_0")->constants()["k"] = at::ones({2});
  auto back = deserializeGraph(serializeGraph(*g), "mem");
  EXPECT_EQ(printGraph(*back), printGraph(*g));
  EXPECT_TRUE(at::equal(back->subgraphs().at("true_graph_0")->constants().at("k"), at::ones({2})));
}

void expectLoadError(const std::string& bytes, const std::string& message) {
  try {
    deserializeGraph(bytes, "f.pt2q");
    FAIL() << "loaded";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what_without_backtrace()).find(message), std::string::npos) << e.what_without_backtrace();
  }
}

TEST(SerializeTest, ForeignTruncatedAndNewerFilesFailClearly) {
  expectLoadError("\x89PNG\r\n\x1a\n....", "f.pt2q is not a pt2q graph file");
  const std::string bytes = serializeGraph(*sample());
  // Every truncation fails with an error (a prefix of a valid message never parses to a graph
  // that still verifies with all its tensors); none crashes.
  for (size_t n = 0; n < bytes.size(); n += 7) {
    EXPECT_ANY_THROW(deserializeGraph(bytes.substr(0, n), "f.pt2q")) << n;
  }
  GraphRecord r;
  std::string newer = encodeGraphFile(r, "future");
  // The header's format_version is the first varint after the magic and two tag bytes.
  ASSERT_EQ(newer[8], '\x0a');
  ASSERT_EQ(newer[10], '\x08');
  newer[11] = 99;
  expectLoadError(newer, "format version 99, newer than the 1 this build reads");
}

TEST(SerializeTest, CorruptedBytesNeverCrash) {
  const std::string bytes = serializeGraph(*sample());
  std::mt19937 rng(3);
  int loaded = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    std::string b = bytes;
    for (int k = 0; k < 1 + trial % 4; ++k) b[8 + rng() % (b.size() - 8)] = static_cast<char>(rng());
    try {
      deserializeGraph(b, "f.pt2q");
      ++loaded;  // some flips land in strings or tensor bytes and give another valid graph
    } catch (const c10::Error&) {
    }
  }
  SUCCEED() << loaded << " of 2000 corrupted files still loaded";
}

GraphRecord minimal() {
  GraphRecord r;
  r.name = "g";
  NodeRecord x;
  x.name = "x";
  x.kind = 0;
  x.target = "x";
  NodeRecord out;
  out.name = "output";
  out.kind = 4;
  out.target = "output";
  ArgRecord ref;
  ref.kind = ArgRecord::Kind::kNode;
  ref.s = "x";
  out.args.push_back(ref);
  r.nodes = {x, out};
  return r;
}

TEST(SerializeTest, InconsistentFilesNameTheItem) {
  GraphRecord r = minimal();
  r.nodes[1].args[0].s = "later";
  expectLoadError(encodeGraphFile(r, "t"), "node %output refers to %later, which is not defined before it");
  r = minimal();
  r.nodes[0].kind = 9;
  expectLoadError(encodeGraphFile(r, "t"), "node %x: unknown node kind 9");
  r = minimal();
  NodeRecord call;
  call.name = "y";
  call.kind = 2;
  call.target = "aten.no_such_op";
  r.nodes.insert(r.nodes.begin() + 1, call);
  expectLoadError(encodeGraphFile(r, "t"), "node %y: the operator aten.no_such_op is not registered");
  r = minimal();
  TensorRecord t;
  t.path = "w";
  t.dtype = "float32";
  t.shape = {2, 3};
  t.strides = {3, 1};
  t.data = std::string(20, '\0');
  r.tensors = {t};
  expectLoadError(encodeGraphFile(r, "t"), "tensor \"w\": 20 bytes of data for 6 float32 elements");
  r.tensors[0].data = std::string(24, '\0');
  r.tensors[0].strides = {4, 1};
  expectLoadError(encodeGraphFile(r, "t"), "tensor \"w\": strides that leave gaps");
  r.tensors[0].strides = {1, 1};
  expectLoadError(encodeGraphFile(r, "t"), "tensor \"w\": strides that overlap");
  r.tensors[0].strides = {3, 1};
  r.tensors[0].dtype = "float33";
  expectLoadError(encodeGraphFile(r, "t"), "tensor \"w\": unknown dtype \"float33\"");
  r.tensors[0].dtype = "float32";
  r.tensors[0].shape = {int64_t{1} << 30, int64_t{1} << 30};
  expectLoadError(encodeGraphFile(r, "t"), "tensor \"w\": more than 2^40 elements");
}

}  // namespace
}  // namespace pt2q
