// _C.observers: construction from torch.ao's arguments (dtype and qscheme by name), observe,
// calculate_qparams, merge, and the running statistics.
#include "python/bindings/observers.h"

#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include "graph/ir_text.h"
#include "observers/observer.h"
#include "observers/state_file.h"
#include "python/bindings/py_warnings.h"

namespace py = pybind11;

namespace pt2q::python {
namespace {

QScheme qschemeOrThrow(const std::string& q) {
  if (auto v = qschemeFromName(q)) return *v;
  throw py::value_error("unknown qscheme '" + q + "'");
}

c10::ScalarType dtypeFromName(const std::string& d) {
  // torch.ao spells the 8-bit types quint8/qint8 too; they observe as uint8/int8.
  if (d == "quint8") return c10::kByte;
  if (d == "qint8") return c10::kChar;
  if (d == "qint32") return c10::kInt;
  if (auto t = dtypeFromTorchName(d)) return *t;
  throw py::value_error("unknown dtype '" + d + "'");
}

}  // namespace

void bindObservers(py::module_& m) {
  py::class_<Observer>(m, "Observer", "A calibration observer (observers/observer.h)")
      .def(py::init([](const std::string& cls, const std::string& dtype, const std::string& qscheme,
                       std::optional<int64_t> quant_min, std::optional<int64_t> quant_max, bool reduce_range,
                       int64_t ch_axis, double averaging_constant, double eps, int64_t bins, double scale,
                       int64_t zero_point) {
             ObserverSpec s;
             s.dtype = dtypeFromName(dtype);
             s.qscheme = qschemeOrThrow(qscheme);
             s.quant_min = quant_min;
             s.quant_max = quant_max;
             s.reduce_range = reduce_range;
             s.ch_axis = ch_axis;
             s.averaging_constant = averaging_constant;
             s.eps = static_cast<float>(eps);
             s.bins = bins;
             s.scale = scale;
             s.zero_point = zero_point;
             return makeObserver(cls, s);
           }),
           py::arg("cls"), py::arg("dtype") = "quint8", py::arg("qscheme") = "per_tensor_affine",
           py::arg("quant_min") = py::none(), py::arg("quant_max") = py::none(), py::arg("reduce_range") = false,
           py::arg("ch_axis") = 0, py::arg("averaging_constant") = 0.01,
           py::arg("eps") = 1.1920928955078125e-07, py::arg("bins") = 2048, py::arg("scale") = 1.0,
           py::arg("zero_point") = 0)
      .def("observe", [](Observer& o, const at::Tensor& x) { withPythonWarnings([&] { o.observe(x); }); })
      .def("calculate_qparams", [](const Observer& o) {
        const QParams q = withPythonWarnings([&] { return o.computeQParams(); });
        return py::make_tuple(q.scale, q.zero_point);
      })
      .def("merge", &Observer::merge)
      .def_property_readonly("min_val", &Observer::minVal)
      .def_property_readonly("max_val", &Observer::maxVal)
      .def_property_readonly("kind", &Observer::kind)
      .def_property_readonly("qrange", [](const Observer& o) { return calculateQminQmax(o.spec()); })
      .def("state", &Observer::state, "the running statistics as [(torch.ao buffer name, tensor)]")
      .def("set_state", &Observer::setState)
      .def_property_readonly("dtype", [](const Observer& o) { return std::string(dtypeTorchName(o.spec().dtype)); })
      .def_property_readonly("qscheme", [](const Observer& o) { return qschemeName(o.spec().qscheme); })
      .def("_quantization_error", [](const Observer& o, int64_t s, int64_t e) {
        return histogramQuantizationError(o, s, e);
      });
  m.def(
      "serialize",
      [](const std::vector<std::pair<std::string, const Observer*>>& observers) {
        const std::string bytes = serializeObservers(observers);
        return py::bytes(bytes);
      },
      "observer state file bytes of [(name, Observer)]");
  m.def(
      "deserialize",
      [](const std::string& bytes, const std::string& source) {
        py::list out;
        for (auto& [name, o] : deserializeObservers(bytes, source)) out.append(py::make_tuple(name, std::move(o)));
        return out;
      },
      py::arg("data"), py::arg("source") = "<bytes>", "[(name, Observer)] from observer state file bytes");
}

}  // namespace pt2q::python
