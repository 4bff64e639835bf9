// _C.prepare: computeSharing and insertObservers over a Graph. Edges and outputs cross as
// (node, user) tuples, user None for an output.
#include "python/bindings/prepare.h"

#include <pybind11/stl.h>

#include "observers/insert_observers.h"
#include "observers/sharing.h"
#include "quantizers/annotation.h"

namespace py = pybind11;

namespace pt2q::python {
namespace {

py::object keyObject(const EdgeOrNode& k) {
  return py::make_tuple(k.node, k.isEdge() ? py::object(py::str(k.user)) : py::object(py::none()));
}

py::object specObject(const QSpecRef& r) {
  return r.kind == QSpecRef::Kind::kSpec ? py::object(py::int_(r.id)) : py::object(py::none());
}

}  // namespace

void bindPrepare(py::module_& m) {
  m.def(
      "compute_sharing",
      [](const Graph& g) {
        const SharingPlan p = computeSharing(g);
        py::list keys, specs;
        for (const EdgeOrNode& k : p.keys) keys.append(keyObject(k));
        for (const QSpecRef& r : p.group_spec) specs.append(specObject(r));
        return py::make_tuple(keys, p.group, specs);
      },
      "(keys, group of each key, spec id (or None) of each group) of the graph's annotations");
  m.def(
      "insert_observers",
      [](Graph& g, const std::vector<std::tuple<std::string, std::optional<std::string>, int>>& instance_of,
         const std::set<std::string>& taken, const std::set<std::string>& buffers) {
        std::map<EdgeOrNode, int> inst;
        for (const auto& [node, user, i] : instance_of) inst[{node, user.value_or("")}] = i;
        py::list out;
        for (const InsertedObserver& o : insertObservers(g, inst, taken, buffers)) {
          out.append(py::make_tuple(o.node, o.attr, o.instance));
        }
        return out;
      },
      py::arg("graph"), py::arg("instance_of"), py::arg("taken"), py::arg("buffers"),
      "inserts observer nodes; returns [(node name, attribute, instance)] in insertion order");
  m.def(
      "normalize_annotation",
      [](const std::string& text, const std::string& node) { return printAnnotation(parseAnnotation(text, node)); },
      "parses and reprints an annotation (checks its syntax)");
}

}  // namespace pt2q::python
