// _C.graph: Graph and Node for the FX bridge (python/pt2q/fx_bridge.py). Arguments cross as
// Python values; dtypes, devices, layouts, memory formats and symbolic sizes cross as
// Literal(kind, text) so that this file needs none of torch's Python object types.
#include "python/bindings/graph.h"

#include <pybind11/stl.h>
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/csrc/utils/pybind.h>

#include "graph/graph.h"
#include "graph/interpreter.h"
#include "graph/ir_text.h"
#include "graph/pass.h"
#include "graph/serialize.h"
#include "graph/verifier.h"
#include "python/bindings/py_warnings.h"

namespace py = pybind11;

namespace pt2q::python {
namespace {

/// A dtype / device / layout / memory format / symbolic size / operator, by its text-form spelling.
struct Literal {
  std::string kind;  // "dtype", "device", "layout", "memory_format", "sym", "op"
  std::string text;  // "float32", "cuda:0", "strided", "channels_last", "s0 + 1", "aten.mm.default"
};

Argument toArgument(py::handle o, const Node* at) {
  if (o.is_none()) return {};
  if (py::isinstance<py::bool_>(o)) return Argument(o.cast<bool>());
  if (py::isinstance<py::int_>(o)) return Argument(o.cast<int64_t>());
  if (py::isinstance<py::float_>(o)) return Argument(o.cast<double>());
  if (py::isinstance<py::str>(o)) return Argument(o.cast<std::string>());
  if (py::isinstance<Node>(o)) return Argument(o.cast<Node*>());
  if (py::isinstance<py::list>(o) || py::isinstance<py::tuple>(o)) {
    std::vector<Argument> items;
    for (py::handle x : o) items.push_back(toArgument(x, at));
    if (py::isinstance<py::list>(o)) return Argument(ArgList{std::move(items)});
    return Argument(ArgTuple{std::move(items)});
  }
  if (py::isinstance<Literal>(o)) {
    const Literal& l = o.cast<const Literal&>();
    if (l.kind == "sym") return Argument(SymExpr{l.text});
    if (l.kind == "op") return Argument(OpRef{l.text});
    if (l.kind == "device") return Argument(c10::Device(l.text));
    if (l.kind == "dtype") {
      if (auto d = dtypeFromTorchName(l.text)) return Argument(*d);
    } else if (l.kind == "layout") {
      if (auto v = layoutFromName(l.text)) return Argument(*v);
    } else if (l.kind == "memory_format") {
      if (auto v = memoryFormatFromName(l.text)) return Argument(*v);
    }
    throw py::value_error("unknown " + l.kind + " '" + l.text + "'");
  }
  throw py::type_error("the IR cannot hold an argument of Python type " +
                       py::str(py::type::handle_of(o).attr("__qualname__")).cast<std::string>());
}

py::object fromArgument(const Argument& a) {
  if (a.isNone()) return py::none();
  if (a.is<bool>()) return py::bool_(a.as<bool>());
  if (a.is<int64_t>()) return py::int_(a.as<int64_t>());
  if (a.is<double>()) return py::float_(a.as<double>());
  if (a.is<std::string>()) return py::str(a.as<std::string>());
  if (a.isNode()) return py::cast(a.node(), py::return_value_policy::reference);
  if (a.is<ArgList>() || a.is<ArgTuple>()) {
    const auto& items = a.is<ArgList>() ? a.as<ArgList>().items : a.as<ArgTuple>().items;
    py::list out;
    for (const Argument& x : items) out.append(fromArgument(x));
    if (a.is<ArgList>()) return out;
    return py::tuple(out);
  }
  if (a.is<c10::ScalarType>()) return py::cast(Literal{"dtype", dtypeTorchName(a.as<c10::ScalarType>())});
  if (a.is<c10::Device>()) return py::cast(Literal{"device", a.as<c10::Device>().str()});
  if (a.is<c10::Layout>()) return py::cast(Literal{"layout", layoutName(a.as<c10::Layout>())});
  if (a.is<c10::MemoryFormat>()) return py::cast(Literal{"memory_format", memoryFormatName(a.as<c10::MemoryFormat>())});
  if (a.is<OpRef>()) return py::cast(Literal{"op", a.as<OpRef>().name});
  return py::cast(Literal{"sym", a.as<SymExpr>().expr});
}

NodeKind kindFromName(const std::string& k) {
  for (NodeKind v : {NodeKind::kPlaceholder, NodeKind::kGetAttr, NodeKind::kCallFunction, NodeKind::kCallModule,
                     NodeKind::kOutput}) {
    if (k == nodeKindName(v)) return v;
  }
  throw py::value_error("unknown node kind '" + k + "'");
}

// A value type as a tuple: (kind, dtype torch name or None, shape list or None, expr or None),
// kind one of "tensor", "sym_int", "sym_float", "sym_bool"; symbolic dims are Literal("sym", e).
py::tuple typeToPy(const ValueType& t) {
  static const char* kinds[] = {"tensor", "sym_int", "sym_float", "sym_bool"};
  py::object shape = py::none();
  if (t.shape) {
    py::list dims;
    for (const Dim& d : *t.shape) {
      if (std::holds_alternative<int64_t>(d)) {
        dims.append(std::get<int64_t>(d));
      } else {
        dims.append(py::cast(Literal{"sym", std::get<SymExpr>(d).expr}));
      }
    }
    shape = dims;
  }
  return py::make_tuple(kinds[static_cast<int>(t.kind)],
                        t.dtype ? py::object(py::str(dtypeTorchName(*t.dtype))) : py::none(), shape,
                        t.value ? py::object(py::str(t.value->expr)) : py::none());
}

ValueType typeFromPy(const py::tuple& t) {
  ValueType v;
  const std::string kind = t[0].cast<std::string>();
  v.kind = kind == "sym_int"     ? ValueType::Kind::kSymInt
           : kind == "sym_float" ? ValueType::Kind::kSymFloat
           : kind == "sym_bool"  ? ValueType::Kind::kSymBool
                                 : ValueType::Kind::kTensor;
  if (!t[1].is_none()) {
    v.dtype = dtypeFromTorchName(t[1].cast<std::string>());
    if (!v.dtype) throw py::value_error("unknown dtype " + t[1].cast<std::string>());
  }
  if (!t[2].is_none()) {
    std::vector<Dim> dims;
    for (py::handle d : t[2]) {
      if (py::isinstance<Literal>(d)) {
        dims.emplace_back(SymExpr{d.cast<const Literal&>().text});
      } else {
        dims.emplace_back(d.cast<int64_t>());
      }
    }
    v.shape = std::move(dims);
  }
  if (!t[3].is_none()) v.value = SymExpr{t[3].cast<std::string>()};
  return v;
}

std::vector<std::pair<std::string, Argument>> kwargsFromPy(const py::dict& kwargs, const Node* at) {
  std::vector<std::pair<std::string, Argument>> out;
  for (auto kv : kwargs) out.emplace_back(kv.first.cast<std::string>(), toArgument(kv.second, at));
  return out;
}

}  // namespace

void bindGraph(py::module_& m) {
  py::class_<Literal>(m, "Literal", "A dtype, device, layout, memory format or symbolic size, by name")
      .def(py::init<std::string, std::string>(), py::arg("kind"), py::arg("text"))
      .def_readonly("kind", &Literal::kind)
      .def_readonly("text", &Literal::text)
      .def("__eq__", [](const Literal& a, const Literal& b) { return a.kind == b.kind && a.text == b.text; })
      .def("__repr__", [](const Literal& l) { return "Literal(" + l.kind + ", " + l.text + ")"; });

  // Nodes are owned by their graph: a Python Node is a reference, valid while the node exists.
  py::class_<Node, std::unique_ptr<Node, py::nodelete>>(m, "Node")
      .def_property_readonly("name", &Node::name)
      .def_property_readonly("kind", [](const Node& n) { return nodeKindName(n.kind()); })
      .def_property_readonly("target", &Node::target)
      .def_property_readonly("is_opaque", &Node::isOpaque)
      .def_property_readonly("args", [](const Node& n) {
        py::list out;
        for (const Argument& a : n.args()) out.append(fromArgument(a));
        return py::tuple(out);
      })
      .def_property_readonly("kwargs", [](const Node& n) {
        py::dict out;
        for (const auto& kv : n.kwargs()) out[py::str(kv.first)] = fromArgument(kv.second);
        return out;
      })
      .def_property_readonly("inputs", [](const Node& n) { return n.inputs(); }, py::return_value_policy::reference)
      .def_property_readonly("users", &Node::users, py::return_value_policy::reference)
      .def("set_args", [](Node& n, const py::tuple& args, const py::dict& kwargs) {
        std::vector<Argument> a;
        for (py::handle x : args) a.push_back(toArgument(x, &n));
        n.setArgs(std::move(a), kwargsFromPy(kwargs, &n));
      }, py::arg("args"), py::arg("kwargs") = py::dict())
      .def_property("types",
          [](const Node& n) {
            py::list out;
            for (const ValueType& t : n.meta().types) out.append(typeToPy(t));
            return out;
          },
          [](Node& n, const py::list& types) {
            n.meta().types.clear();
            for (py::handle t : types) n.meta().types.push_back(typeFromPy(t.cast<py::tuple>()));
          })
      .def_property("tuple_output", [](const Node& n) { return n.meta().tuple_output; },
                    [](Node& n, bool v) { n.meta().tuple_output = v; })
      .def_property("nn_module_stack",
          [](const Node& n) {
            py::list out;
            for (const ModuleFrame& f : n.meta().nn_module_stack) out.append(py::make_tuple(f.key, f.path, f.type));
            return out;
          },
          [](Node& n, const std::vector<std::tuple<std::string, std::string, std::string>>& frames) {
            n.meta().nn_module_stack.clear();
            for (const auto& [k, p, t] : frames) n.meta().nn_module_stack.push_back({k, p, t});
          })
      .def_property("stack_trace", [](const Node& n) { return n.meta().stack_trace; },
                    [](Node& n, const std::string& s) { n.meta().stack_trace = s; })
      .def_property("annotation", [](const Node& n) { return n.meta().annotation; },
                    [](Node& n, const std::string& s) { n.meta().annotation = s; })
      .def_property("extra", [](const Node& n) { return n.meta().extra; },
                    [](Node& n, const std::vector<std::pair<std::string, std::string>>& kv) { n.meta().extra = kv; })
      .def("__str__", [](const Node& n) { return printNode(n); })
      .def("__repr__", [](const Node& n) { return "<pt2q Node %" + n.name() + ">"; });

  // dynamic_attr: the FX bridge keeps its Python-side tables (opaque callables, the root module,
  // the original node meta) on the Graph object.
  py::class_<Graph, std::shared_ptr<Graph>>(m, "Graph", "The pt2q IR (graph/graph.h)", py::dynamic_attr())
      .def(py::init<>())
      .def_property("name", &Graph::name, &Graph::setName)
      .def("nodes", &Graph::nodes, py::return_value_policy::reference_internal)
      .def("find_node", &Graph::findNode, py::return_value_policy::reference_internal)
      .def_property_readonly("output", &Graph::output, py::return_value_policy::reference_internal)
      .def("add_placeholder", &Graph::addPlaceholder, py::return_value_policy::reference_internal)
      .def("create",
           [](Graph& g, const std::string& kind, const std::string& target, const py::tuple& args,
              const py::dict& kwargs, const std::string& name, Node* before) {
             std::vector<Argument> a;
             for (py::handle x : args) a.push_back(toArgument(x, nullptr));
             return g.create(kindFromName(kind), target, std::move(a), kwargsFromPy(kwargs, nullptr), name, before);
           },
           py::arg("kind"), py::arg("target"), py::arg("args") = py::tuple(), py::arg("kwargs") = py::dict(),
           py::arg("name") = "", py::arg("before") = nullptr, py::return_value_policy::reference_internal,
           "Creates a node before `before` (default: before the output node).")
      .def("set_output", [](Graph& g, const py::object& v) { return g.setOutput(toArgument(v, nullptr)); },
           py::return_value_policy::reference_internal)
      .def("erase", &Graph::erase)
      .def("replace_all_uses_with", &Graph::replaceAllUsesWith)
      .def("set_constant", [](Graph& g, const std::string& path, const at::Tensor& t) { g.constants()[path] = t; })
      .def("constants", [](const Graph& g) { return g.constants(); })
      .def("set_subgraph", [](Graph& g, const std::string& path, std::shared_ptr<Graph> sub) {
        sub->setName(path);
        g.subgraphs()[path] = std::move(sub);
      })
      .def("subgraphs", [](const Graph& g) { return g.subgraphs(); })
      .def("verify", [](const Graph& g) { verify(g); })
      .def("__str__", [](const Graph& g) { return printGraph(g); })
      .def("run_passes", [](Graph& g, const std::vector<std::string>& flags) {
        const PassResult r = withPythonWarnings([&] { return runPasses(g, flags); });
        return py::make_tuple(r.changed, r.num_rewrites);
      });

  py::class_<Interpreter>(m, "Interpreter", "Runs a Graph through the dispatcher (graph/interpreter.h)")
      .def(py::init<const Graph&>(), py::keep_alive<1, 2>())
      .def("run", [](const Interpreter& interp, const py::args& args) {
        std::vector<c10::IValue> inputs;
        for (py::handle a : args) {
          if (THPVariable_Check(a.ptr())) {
            inputs.emplace_back(a.cast<at::Tensor>());
          } else if (py::isinstance<py::bool_>(a)) {
            inputs.emplace_back(a.cast<bool>());
          } else if (py::isinstance<py::int_>(a)) {
            inputs.emplace_back(a.cast<int64_t>());
          } else if (py::isinstance<py::float_>(a)) {
            inputs.emplace_back(a.cast<double>());
          } else if (a.is_none()) {
            inputs.emplace_back();
          } else {
            throw py::type_error("Interpreter.run takes tensors, ints, floats, bools and None");
          }
        }
        c10::IValue out = withPythonWarnings([&] {
          py::gil_scoped_release nogil;
          return interp.run(std::move(inputs));
        });
        return torch::jit::toPyObject(std::move(out));
      });

  m.def("save", &saveGraph, py::arg("graph"), py::arg("path"), "Writes a .pt2q graph file (graph/serialize.h).");
  m.def("load", [](const std::string& path) { return std::shared_ptr<Graph>(loadGraph(path)); }, py::arg("path"),
        "Reads a .pt2q graph file; never runs code.");
  m.def("serialize", [](const Graph& g) { return py::bytes(serializeGraph(g)); });
  m.def("deserialize", [](const py::bytes& b, const std::string& source) {
    return std::shared_ptr<Graph>(deserializeGraph(std::string(b), source));
  }, py::arg("data"), py::arg("source") = "<bytes>");

  m.def("parse", [](const std::string& text, const std::string& source) {
    return std::shared_ptr<Graph>(parseGraph(text, source));
  }, py::arg("text"), py::arg("source") = "<text>", "Parses the IR text form (docs/ir_text.md).");
}

}  // namespace pt2q::python
