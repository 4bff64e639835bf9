// Bridges proto::GraphFile (generated code, system protobuf) to the plain records of graph_file.h.
#include "proto/graph_file.h"

#include <stdexcept>

#include "proto/file_header.h"
#include "proto/graph.pb.h"

namespace pt2q {
namespace {

constexpr char kMagic[] = "PT2QGRPH";
constexpr size_t kMagicSize = 8;

void toProto(const ArgRecord& a, proto::Argument* p) {
  switch (a.kind) {
    case ArgRecord::Kind::kNone: p->set_none(true); break;
    case ArgRecord::Kind::kBool: p->set_b(a.b); break;
    case ArgRecord::Kind::kInt: p->set_i(a.i); break;
    case ArgRecord::Kind::kDouble: p->set_d(a.d); break;
    case ArgRecord::Kind::kString: p->set_s(a.s); break;
    case ArgRecord::Kind::kNode: p->set_node(a.s); break;
    case ArgRecord::Kind::kList:
    case ArgRecord::Kind::kTuple: {
      proto::ArgumentList* l = a.kind == ArgRecord::Kind::kList ? p->mutable_list() : p->mutable_tuple();
      for (const ArgRecord& x : a.items) toProto(x, l->add_items());
      break;
    }
    case ArgRecord::Kind::kDtype: p->set_dtype(a.s); break;
    case ArgRecord::Kind::kDevice: p->set_device(a.s); break;
    case ArgRecord::Kind::kLayout: p->set_layout(a.s); break;
    case ArgRecord::Kind::kMemoryFormat: p->set_memory_format(a.s); break;
    case ArgRecord::Kind::kSym: p->set_sym(a.s); break;
    case ArgRecord::Kind::kOp: p->set_op(a.s); break;
  }
}

ArgRecord fromProto(const proto::Argument& p) {
  ArgRecord a;
  switch (p.value_case()) {
    case proto::Argument::kNone:
    case proto::Argument::VALUE_NOT_SET: a.kind = ArgRecord::Kind::kNone; break;
    case proto::Argument::kB: a.kind = ArgRecord::Kind::kBool; a.b = p.b(); break;
    case proto::Argument::kI: a.kind = ArgRecord::Kind::kInt; a.i = p.i(); break;
    case proto::Argument::kD: a.kind = ArgRecord::Kind::kDouble; a.d = p.d(); break;
    case proto::Argument::kS: a.kind = ArgRecord::Kind::kString; a.s = p.s(); break;
    case proto::Argument::kNode: a.kind = ArgRecord::Kind::kNode; a.s = p.node(); break;
    case proto::Argument::kList:
    case proto::Argument::kTuple: {
      const bool list = p.value_case() == proto::Argument::kList;
      a.kind = list ? ArgRecord::Kind::kList : ArgRecord::Kind::kTuple;
      for (const proto::Argument& x : (list ? p.list() : p.tuple()).items()) a.items.push_back(fromProto(x));
      break;
    }
    case proto::Argument::kDtype: a.kind = ArgRecord::Kind::kDtype; a.s = p.dtype(); break;
    case proto::Argument::kDevice: a.kind = ArgRecord::Kind::kDevice; a.s = p.device(); break;
    case proto::Argument::kLayout: a.kind = ArgRecord::Kind::kLayout; a.s = p.layout(); break;
    case proto::Argument::kMemoryFormat: a.kind = ArgRecord::Kind::kMemoryFormat; a.s = p.memory_format(); break;
    case proto::Argument::kSym: a.kind = ArgRecord::Kind::kSym; a.s = p.sym(); break;
    case proto::Argument::kOp: a.kind = ArgRecord::Kind::kOp; a.s = p.op(); break;
  }
  return a;
}

template <typename Msg>
void writeBody(const GraphRecord& g, Msg* f) {
  f->set_name(g.name);
  for (const NodeRecord& n : g.nodes) {
    proto::Node* p = f->add_nodes();
    p->set_name(n.name);
    p->set_kind(static_cast<proto::Node::Kind>(n.kind));
    p->set_target(n.target);
    p->set_opaque(n.opaque);
    for (const ArgRecord& a : n.args) toProto(a, p->add_args());
    for (const auto& kv : n.kwargs) {
      proto::KeywordArgument* k = p->add_kwargs();
      k->set_name(kv.first);
      toProto(kv.second, k->mutable_value());
    }
    for (const TypeRecord& t : n.types) {
      proto::ValueType* v = p->add_types();
      v->set_kind(static_cast<proto::ValueType::Kind>(t.kind));
      v->set_dtype(t.dtype);
      v->set_has_shape(t.has_shape);
      for (const DimRecord& d : t.shape) {
        proto::Dim* pd = v->add_shape();
        if (d.is_sym) pd->set_sym(d.sym); else pd->set_size(d.size);
      }
      v->set_value(t.value);
    }
    p->set_tuple_output(n.tuple_output);
    for (const auto& fr : n.nn_module_stack) {
      proto::ModuleFrame* m = p->add_nn_module_stack();
      m->set_key(fr.at(0));
      m->set_path(fr.at(1));
      m->set_type(fr.at(2));
    }
    p->set_stack_trace(n.stack_trace);
    p->set_annotation(n.annotation);
    for (const auto& kv : n.extra) {
      proto::MetaEntry* e = p->add_extra();
      e->set_key(kv.first);
      e->set_value(kv.second);
    }
  }
  for (const TensorRecord& t : g.tensors) {
    proto::Tensor* p = f->add_tensors();
    p->set_path(t.path);
    p->set_dtype(t.dtype);
    for (int64_t s : t.shape) p->add_shape(s);
    for (int64_t s : t.strides) p->add_strides(s);
    p->set_data(t.data);
    p->set_is_parameter(t.is_parameter);
    p->set_requires_grad(t.requires_grad);
  }
  for (const SubgraphRecord& sub : g.subgraphs) {
    proto::Subgraph* p = f->add_subgraphs();
    p->set_path(sub.path);
    writeBody(sub.graph, p);
  }
}

template <typename Msg>
GraphRecord readBody(const Msg& f) {
  GraphRecord g;
  g.name = f.name();
  for (const proto::Node& p : f.nodes()) {
    NodeRecord n;
    n.name = p.name();
    n.kind = static_cast<int>(p.kind());
    n.target = p.target();
    n.opaque = p.opaque();
    for (const proto::Argument& a : p.args()) n.args.push_back(fromProto(a));
    for (const proto::KeywordArgument& k : p.kwargs()) n.kwargs.emplace_back(k.name(), fromProto(k.value()));
    for (const proto::ValueType& v : p.types()) {
      TypeRecord t;
      t.kind = static_cast<int>(v.kind());
      t.dtype = v.dtype();
      t.has_shape = v.has_shape();
      for (const proto::Dim& d : v.shape()) {
        DimRecord r;
        r.is_sym = d.d_case() == proto::Dim::kSym;
        r.size = d.size();
        r.sym = d.sym();
        t.shape.push_back(std::move(r));
      }
      t.value = v.value();
      n.types.push_back(std::move(t));
    }
    n.tuple_output = p.tuple_output();
    for (const proto::ModuleFrame& m : p.nn_module_stack()) n.nn_module_stack.push_back({m.key(), m.path(), m.type()});
    n.stack_trace = p.stack_trace();
    n.annotation = p.annotation();
    for (const proto::MetaEntry& e : p.extra()) n.extra.emplace_back(e.key(), e.value());
    g.nodes.push_back(std::move(n));
  }
  for (const proto::Tensor& p : f.tensors()) {
    TensorRecord t;
    t.path = p.path();
    t.dtype = p.dtype();
    t.shape.assign(p.shape().begin(), p.shape().end());
    t.strides.assign(p.strides().begin(), p.strides().end());
    t.data = p.data();
    t.is_parameter = p.is_parameter();
    t.requires_grad = p.requires_grad();
    g.tensors.push_back(std::move(t));
  }
  for (const proto::Subgraph& p : f.subgraphs()) g.subgraphs.push_back({p.path(), readBody(p)});
  return g;
}

}  // namespace

std::string encodeGraphFile(const GraphRecord& g, const std::string& producer) {
  proto::GraphFile f;
  f.mutable_header()->set_format_version(kFormatVersion);
  f.mutable_header()->set_producer(producer);
  f.mutable_header()->set_payload_kind("graph");
  writeBody(g, &f);
  std::string out(kMagic, kMagicSize);
  if (!f.AppendToString(&out)) throw std::runtime_error("pt2q: failed to serialize the graph file");
  return out;
}

GraphRecord decodeGraphFile(const std::string& bytes, const std::string& source) {
  if (bytes.size() < kMagicSize || bytes.compare(0, kMagicSize, kMagic, kMagicSize) != 0) {
    throw std::runtime_error("pt2q: " + source + " is not a pt2q graph file (it does not start with \"PT2QGRPH\")");
  }
  proto::GraphFile f;
  // ParseFromArray fails (never crashes) on truncated or corrupted bytes and on nesting deeper
  // than protobuf's recursion limit (100), which bounds argument lists within lists.
  if (!f.ParseFromArray(bytes.data() + kMagicSize, static_cast<int>(bytes.size() - kMagicSize))) {
    throw std::runtime_error("pt2q: " + source + " is truncated or corrupted: its graph does not parse (" +
                             std::to_string(bytes.size()) + " bytes)");
  }
  if (!f.has_header()) throw std::runtime_error("pt2q: " + source + " has no file header");
  const FileHeader h = decodeFileHeader(f.header().SerializeAsString(), source);
  if (h.payload_kind != "graph") {
    throw std::runtime_error("pt2q: " + source + " holds \"" + h.payload_kind + "\", not a graph");
  }
  return readBody(f);
}

}  // namespace pt2q
