// _C.quantizers: run annotators on a Graph and read annotations back in structured form.
#include "python/bindings/quantizers.h"

#include <pybind11/stl.h>

#include "quantizers/annotators.h"

namespace py = pybind11;

namespace pt2q::python {
namespace {

QSpecRef refFrom(const std::optional<std::string>& text, const std::string& role) {
  if (!text) return {};
  return parseAnnotation("out = " + *text, "<" + role + " spec>").output;
}

py::object refObject(const QSpecRef& r) {
  switch (r.kind) {
    case QSpecRef::Kind::kNone: return py::none();
    case QSpecRef::Kind::kSpec: return py::make_tuple("spec", r.id);
    case QSpecRef::Kind::kShared:
      return py::make_tuple("shared", r.shared.node,
                            r.shared.isEdge() ? py::object(py::str(r.shared.user)) : py::object(py::none()));
  }
  return py::none();
}

}  // namespace

void bindQuantizers(py::module_& m) {
  m.def(
      "annotate",
      [](Graph& g, const std::vector<std::string>& names, const std::map<std::string, std::optional<std::string>>& roles,
         const std::optional<std::set<std::string>>& allowed, const std::string& pattern_filter,
         bool config_is_none) {
        RoleSpecs r;
        auto get = [&](const char* k) { return roles.count(k) ? roles.at(k) : std::nullopt; };
        r.input_activation = refFrom(get("input_activation"), "input_activation");
        r.output_activation = refFrom(get("output_activation"), "output_activation");
        r.weight = refFrom(get("weight"), "weight");
        r.bias = refFrom(get("bias"), "bias");
        r.transposed_weight = refFrom(get("transposed_weight"), "transposed_weight");
        runAnnotators(g, names, r, allowed ? &*allowed : nullptr, pattern_filter, config_is_none);
      },
      py::arg("graph"), py::arg("annotators"), py::arg("roles"), py::arg("allowed"), py::arg("pattern_filter") = "",
      py::arg("config_is_none") = false,
      "runs annotators by name; roles maps a config role to its printed spec reference (or None)");
  m.def("propagate", &propagateAnnotation, py::arg("graph"));
  m.def("x86_int8_outputs", &annotateX86Int8Outputs, py::arg("graph"));
  m.def("annotators", [] { return defaultAnnotatorRegistry().names(); });
  m.def(
      "parse_annotation",
      [](const std::string& text, const std::string& node) {
        const Annotation a = parseAnnotation(text, node);
        py::list inputs;
        for (const auto& [arg, r] : a.inputs) inputs.append(py::make_tuple(arg, refObject(r)));
        return py::make_tuple(inputs, refObject(a.output), a.allow_implicit_sharing, a.annotated,
                              a.quantized_output);
      },
      "(inputs [(node, ref)], output ref, allow_implicit_sharing, annotated); a ref is None, "
      "('spec', id) or ('shared', node, user or None)");
}

}  // namespace pt2q::python
