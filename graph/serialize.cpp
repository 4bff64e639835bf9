// Graph <-> proto/graph_file.h records, with every field of a loaded file checked (see serialize.h).
#include "graph/serialize.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "graph/ir_text.h"
#include "graph/verifier.h"
#include "proto/graph_file.h"

namespace pt2q {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "graph files store tensor data little-endian");

ArgRecord toRecord(const Argument& a) {
  ArgRecord r;
  using K = ArgRecord::Kind;
  if (a.isNone()) {
    r.kind = K::kNone;
  } else if (a.is<bool>()) {
    r.kind = K::kBool;
    r.b = a.as<bool>();
  } else if (a.is<int64_t>()) {
    r.kind = K::kInt;
    r.i = a.as<int64_t>();
  } else if (a.is<double>()) {
    r.kind = K::kDouble;
    r.d = a.as<double>();
  } else if (a.is<std::string>()) {
    r.kind = K::kString;
    r.s = a.as<std::string>();
  } else if (a.isNode()) {
    r.kind = K::kNode;
    r.s = a.node()->name();
  } else if (a.is<ArgList>() || a.is<ArgTuple>()) {
    r.kind = a.is<ArgList>() ? K::kList : K::kTuple;
    for (const Argument& x : a.is<ArgList>() ? a.as<ArgList>().items : a.as<ArgTuple>().items) {
      r.items.push_back(toRecord(x));
    }
  } else if (a.is<c10::ScalarType>()) {
    r.kind = K::kDtype;
    r.s = dtypeTorchName(a.as<c10::ScalarType>());
  } else if (a.is<c10::Device>()) {
    r.kind = K::kDevice;
    r.s = a.as<c10::Device>().str();
  } else if (a.is<c10::Layout>()) {
    r.kind = K::kLayout;
    r.s = layoutName(a.as<c10::Layout>());
  } else if (a.is<c10::MemoryFormat>()) {
    r.kind = K::kMemoryFormat;
    r.s = memoryFormatName(a.as<c10::MemoryFormat>());
  } else if (a.is<OpRef>()) {
    r.kind = K::kOp;
    r.s = a.as<OpRef>().name;
  } else {
    r.kind = K::kSym;
    r.s = a.as<SymExpr>().expr;
  }
  return r;
}

TensorRecord tensorRecord(const std::string& path, const at::Tensor& t) {
  TORCH_CHECK(!t.is_quantized() && t.layout() == at::kStrided, "saveGraph: constant \"", path,
              "\" is a quantized or non-strided tensor, which graph files do not hold");
  TensorRecord r;
  r.path = path;
  r.dtype = dtypeTorchName(t.scalar_type());
  r.shape = t.sizes().vec();
  r.strides = t.strides().vec();
  r.requires_grad = t.requires_grad();
  r.is_parameter = t.requires_grad();
  const at::Tensor c = t.detach().cpu().resolve_conj().resolve_neg().contiguous();
  r.data.assign(static_cast<const char*>(c.const_data_ptr()), c.numel() * c.element_size());
  return r;
}

// Everything below checks a loaded record before using it; errors name the file and the item.
struct Loader {
  std::string source;
  Graph* g;
  std::map<std::string, Node*> defined;

  [[noreturn]] void fail(const std::string& what) const { TORCH_CHECK(false, "loadGraph: ", source, ": ", what); }

  Argument arg(const ArgRecord& r, const std::string& at) {
    using K = ArgRecord::Kind;
    switch (r.kind) {
      case K::kNone: return Argument();
      case K::kBool: return Argument(r.b);
      case K::kInt: return Argument(r.i);
      case K::kDouble: return Argument(r.d);
      case K::kString: return Argument(r.s);
      case K::kNode: {
        auto it = defined.find(r.s);
        if (it == defined.end()) fail("node %" + at + " refers to %" + r.s + ", which is not defined before it");
        return Argument(it->second);
      }
      case K::kList:
      case K::kTuple: {
        std::vector<Argument> items;
        for (const ArgRecord& x : r.items) items.push_back(arg(x, at));
        if (r.kind == K::kList) return Argument(ArgList{std::move(items)});
        return Argument(ArgTuple{std::move(items)});
      }
      case K::kDtype:
        if (auto d = dtypeFromTorchName(r.s)) return Argument(*d);
        fail("node %" + at + ": unknown dtype \"" + r.s + "\"");
      case K::kDevice:
        try {
          return Argument(c10::Device(r.s));
        } catch (const c10::Error&) {
          fail("node %" + at + ": invalid device \"" + r.s + "\"");
        }
      case K::kLayout:
        if (auto l = layoutFromName(r.s)) return Argument(*l);
        fail("node %" + at + ": unknown layout \"" + r.s + "\"");
      case K::kMemoryFormat:
        if (auto m = memoryFormatFromName(r.s)) return Argument(*m);
        fail("node %" + at + ": unknown memory format \"" + r.s + "\"");
      case K::kSym: return Argument(SymExpr{r.s});
      case K::kOp: return Argument(OpRef{r.s});
    }
    fail("node %" + at + ": unknown argument kind");
  }

  ValueType type(const TypeRecord& r, const std::string& at) {
    ValueType t;
    if (r.kind < 0 || r.kind > 3) fail("node %" + at + ": unknown value kind " + std::to_string(r.kind));
    t.kind = static_cast<ValueType::Kind>(r.kind);
    if (!r.dtype.empty()) {
      t.dtype = dtypeFromTorchName(r.dtype);
      if (!t.dtype) fail("node %" + at + ": unknown dtype \"" + r.dtype + "\"");
    }
    if (r.has_shape) {
      std::vector<Dim> dims;
      for (const DimRecord& d : r.shape) {
        if (d.is_sym) dims.emplace_back(SymExpr{d.sym}); else dims.emplace_back(d.size);
      }
      t.shape = std::move(dims);
    } else if (!r.shape.empty()) {
      fail("node %" + at + ": a shape without has_shape");
    }
    if (!r.value.empty()) t.value = SymExpr{r.value};
    return t;
  }

  void node(const NodeRecord& r) {
    if (r.name.empty()) fail("a node without a name");
    if (defined.count(r.name)) fail("the node name %" + r.name + " is used twice");
    if (r.kind < 0 || r.kind > 4) fail("node %" + r.name + ": unknown node kind " + std::to_string(r.kind));
    const NodeKind kind = static_cast<NodeKind>(r.kind);
    std::vector<Argument> args;
    for (const ArgRecord& a : r.args) args.push_back(arg(a, r.name));
    std::vector<std::pair<std::string, Argument>> kwargs;
    for (const auto& kv : r.kwargs) kwargs.emplace_back(kv.first, arg(kv.second, r.name));
    Node* n = nullptr;
    if (kind == NodeKind::kPlaceholder) {
      if (!kwargs.empty() || args.size() > 1) fail("node %" + r.name + ": a placeholder takes at most a default");
      if (g->output() != nullptr) fail("node %" + r.name + ": a node after the output node");
      n = g->addPlaceholder(r.name);
      n->setArgs(std::move(args));
    } else if (kind == NodeKind::kOutput) {
      if (g->output() != nullptr) fail("node %" + r.name + ": a second output node");
      if (args.size() != 1 || !kwargs.empty()) fail("node %" + r.name + ": the output node takes one argument");
      n = g->setOutput(std::move(args[0]));
      if (n->name() != r.name) g->rename(n, r.name);
    } else {
      if (g->output() != nullptr) fail("node %" + r.name + ": a node after the output node");
      if (kind == NodeKind::kCallFunction && !r.opaque && !findOperator(r.target).has_value()) {
        fail("node %" + r.name + ": the operator " + r.target +
             " is not registered (load the library that defines it first)");
      }
      n = g->create(kind, r.target, std::move(args), std::move(kwargs), r.name);
    }
    if (n->name() != r.name) fail("node %" + r.name + ": the name is not usable");
    for (const TypeRecord& t : r.types) n->meta().types.push_back(type(t, r.name));
    n->meta().tuple_output = r.tuple_output;
    for (const auto& f : r.nn_module_stack) {
      if (f.size() != 3) fail("node %" + r.name + ": a malformed nn_module_stack frame");
      n->meta().nn_module_stack.push_back({f[0], f[1], f[2]});
    }
    n->meta().stack_trace = r.stack_trace;
    n->meta().annotation = r.annotation;
    n->meta().extra = r.extra;
    defined[r.name] = n;
  }

  at::Tensor tensor(const TensorRecord& r) {
    const std::string at = "tensor \"" + r.path + "\"";
    const auto dtype = dtypeFromTorchName(r.dtype);
    if (!dtype) fail(at + ": unknown dtype \"" + r.dtype + "\"");
    if (c10::isQIntType(*dtype)) fail(at + ": quantized dtypes are not held by graph files");
    if (r.strides.size() != r.shape.size()) fail(at + ": " + std::to_string(r.shape.size()) + " sizes but " +
                                                 std::to_string(r.strides.size()) + " strides");
    int64_t numel = 1, storage = 1;
    for (size_t i = 0; i < r.shape.size(); ++i) {
      if (r.shape[i] < 0 || r.strides[i] < 0) fail(at + ": a negative size or stride");
      if (r.shape[i] != 0 && numel > (int64_t{1} << 40) / r.shape[i]) fail(at + ": more than 2^40 elements");
      numel *= r.shape[i];
    }
    const size_t item = c10::elementSize(*dtype);
    if (r.data.size() != static_cast<size_t>(numel) * item) {
      fail(at + ": " + std::to_string(r.data.size()) + " bytes of data for " + std::to_string(numel) + " " + r.dtype +
           " elements");
    }
    at::Tensor dense = at::empty(r.shape, at::TensorOptions().dtype(*dtype));
    if (numel > 0) std::memcpy(dense.mutable_data_ptr(), r.data.data(), r.data.size());
    if (numel > 0) {
      for (size_t i = 0; i < r.shape.size(); ++i) {
        if (r.strides[i] > (int64_t{1} << 40) || r.shape[i] - 1 > ((int64_t{1} << 40) - storage) / std::max<int64_t>(r.strides[i], 1)) {
          fail(at + ": strides reach past 2^40 elements");
        }
        storage += (r.shape[i] - 1) * r.strides[i];
      }
      if (storage > numel) fail(at + ": strides that leave gaps (a storage of " + std::to_string(storage) + " for " +
                                std::to_string(numel) + " elements)");
    }
    at::Tensor t = dense;
    if (dense.strides().vec() != r.strides) {
      t = at::empty_strided(r.shape, r.strides, dense.options());
      if (numel > 0 && !t.is_non_overlapping_and_dense()) fail(at + ": strides that overlap");
      t.copy_(dense);
    }
    if (r.requires_grad) {
      if (!c10::isFloatingType(*dtype) && !c10::isComplexType(*dtype)) fail(at + ": requires_grad on a " + r.dtype + " tensor");
      t.requires_grad_(true);
    }
    return t;
  }
};

}  // namespace

namespace {

GraphRecord recordOf(const Graph& graph) {
  GraphRecord g;
  g.name = graph.name();
  for (const Node* n : graph.nodes()) {
    NodeRecord r;
    r.name = n->name();
    r.kind = static_cast<int>(n->kind());
    r.target = n->target();
    r.opaque = n->isOpaque();
    for (const Argument& a : n->args()) r.args.push_back(toRecord(a));
    for (const auto& kv : n->kwargs()) r.kwargs.emplace_back(kv.first, toRecord(kv.second));
    for (const ValueType& t : n->meta().types) {
      TypeRecord tr;
      tr.kind = static_cast<int>(t.kind);
      if (t.dtype) tr.dtype = dtypeTorchName(*t.dtype);
      tr.has_shape = t.shape.has_value();
      if (t.shape) {
        for (const Dim& d : *t.shape) {
          DimRecord dr;
          dr.is_sym = std::holds_alternative<SymExpr>(d);
          if (dr.is_sym) dr.sym = std::get<SymExpr>(d).expr; else dr.size = std::get<int64_t>(d);
          tr.shape.push_back(std::move(dr));
        }
      }
      if (t.value) tr.value = t.value->expr;
      r.types.push_back(std::move(tr));
    }
    r.tuple_output = n->meta().tuple_output;
    for (const ModuleFrame& f : n->meta().nn_module_stack) r.nn_module_stack.push_back({f.key, f.path, f.type});
    r.stack_trace = n->meta().stack_trace;
    r.annotation = n->meta().annotation;
    r.extra = n->meta().extra;
    g.nodes.push_back(std::move(r));
  }
  for (const auto& [path, t] : graph.constants()) g.tensors.push_back(tensorRecord(path, t));
  for (const auto& [path, sub] : graph.subgraphs()) g.subgraphs.push_back({path, recordOf(*sub)});
  return g;
}

std::unique_ptr<Graph> buildGraph(const GraphRecord& rec, const std::string& source) {
  auto graph = std::make_unique<Graph>();
  graph->setName(rec.name.empty() ? "main" : rec.name);
  Loader loader{source, graph.get(), {}};
  // Subgraphs first: the parent's get_attr nodes name them.
  for (const SubgraphRecord& sub : rec.subgraphs) {
    if (sub.path.empty() || graph->subgraphs().count(sub.path)) {
      loader.fail("subgraph \"" + sub.path + "\": an empty or repeated path");
    }
    graph->subgraphs()[sub.path] = buildGraph(sub.graph, source + " (subgraph " + sub.path + ")");
  }
  for (const NodeRecord& n : rec.nodes) loader.node(n);
  for (const TensorRecord& t : rec.tensors) {
    if (graph->constants().count(t.path)) loader.fail("the tensor \"" + t.path + "\" appears twice");
    graph->constants()[t.path] = loader.tensor(t);
  }
  return graph;
}

}  // namespace

std::string serializeGraph(const Graph& graph) {
  verify(graph);
  return encodeGraphFile(recordOf(graph), "pt2q");
}

std::unique_ptr<Graph> deserializeGraph(const std::string& bytes, const std::string& source) {
  GraphRecord rec;
  try {
    rec = decodeGraphFile(bytes, source);
  } catch (const std::runtime_error& e) {
    TORCH_CHECK(false, e.what());
  }
  auto graph = buildGraph(rec, source);
  const std::string e = verifyMessage(*graph);
  TORCH_CHECK(e.empty(), "loadGraph: ", source, ": the graph is invalid: ", e);
  return graph;
}

void saveGraph(const Graph& graph, const std::string& path) {
  const std::string bytes = serializeGraph(graph);
  std::ofstream out(path, std::ios::binary);
  TORCH_CHECK(out.good(), "saveGraph: cannot write ", path);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  TORCH_CHECK(out.good(), "saveGraph: writing ", path, " failed");
}

std::unique_ptr<Graph> loadGraph(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TORCH_CHECK(in.good(), "loadGraph: cannot read ", path);
  std::stringstream buf;
  buf << in.rdbuf();
  return deserializeGraph(buf.str(), path);
}

}  // namespace pt2q
