// _C.convert: observers_to_qdq, duplicate_dq, port_metadata, fold_quantize and
// reference_representation over a Graph.
#include "python/bindings/convert.h"

#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include "convert/lower_to_native.h"
#include "convert/observers_to_qdq.h"
#include "convert/reference_representation.h"
#include "graph/ir_text.h"

namespace py = pybind11;

namespace pt2q::python {

void bindConvert(py::module_& m) {
  m.def(
      "observers_to_qdq",
      [](Graph& g, const py::dict& records, const std::set<std::string>& taken) {
        std::map<std::string, ObserverConversion> by_module;
        for (const auto& item : records) {
          const auto module = item.first.cast<std::string>();
          const auto r = item.second.cast<py::dict>();
          ObserverConversion c;
          const auto kind = r["kind"].cast<std::string>();
          using K = ObserverConversion::Kind;
          if (kind == "remove") c.kind = K::kRemove;
          else if (kind == "per_tensor") c.kind = K::kPerTensor;
          else if (kind == "per_channel") c.kind = K::kPerChannel;
          else if (kind == "per_group") c.kind = K::kPerGroup;
          else if (kind == "dynamic_per_token") c.kind = K::kDynamicPerToken;
          else if (kind == "dynamic") c.kind = K::kDynamic;
          else if (kind == "float16") c.kind = K::kFloat16;
          else if (kind == "mx") c.kind = K::kMx;
          else throw py::value_error("observers_to_qdq: unknown kind '" + kind + "'");
          if (c.kind == K::kMx) {
            c.mx.elem_format = r["elem_format"].cast<std::string>();
            c.mx.block_size = r["block_size"].cast<int64_t>();
            c.mx.axis = r["axis"].cast<int64_t>();
            c.mx.rounding = r["rounding"].cast<std::string>();
            c.mx.scale_mode = r["scale_mode"].cast<std::string>();
            c.mx.flush_fp32_subnorms = r["flush_fp32_subnorms"].cast<bool>();
            if (!r["seed"].is_none()) c.mx.seed = r["seed"].cast<int64_t>();
          } else if (c.kind != K::kRemove && c.kind != K::kFloat16) {
            const auto dt = dtypeFromTorchName(r["dtype"].cast<std::string>());
            if (!dt) throw py::value_error("observers_to_qdq: unknown dtype for " + module);
            c.dtype = *dt;
            c.quant_min = r["quant_min"].cast<int64_t>();
            c.quant_max = r["quant_max"].cast<int64_t>();
          }
          if (c.kind == K::kPerTensor) {
            c.scale = r["scale"].cast<double>();
            c.zero_point = r["zero_point"].cast<int64_t>();
          } else if (c.kind == K::kPerChannel || c.kind == K::kPerGroup) {
            c.scales = r["scale"].cast<at::Tensor>();
            c.zero_points = r["zero_point"].cast<at::Tensor>();
            if (c.kind == K::kPerChannel) c.axis = r["axis"].cast<int64_t>();
            if (c.kind == K::kPerGroup) c.group_size = r["group_size"].cast<int64_t>();
          } else if (c.kind == K::kDynamic) {
            c.eps = r["eps"].cast<double>();
            c.symmetric = r["symmetric"].cast<bool>();
          }
          by_module.emplace(module, c);
        }
        return convertObserversToQDQ(g, by_module, taken);
      },
      py::arg("graph"), py::arg("records"), py::arg("taken"),
      "replaces observer calls by quantize/dequantize nodes; returns the constants added");
  m.def("duplicate_dq", &duplicateDequantize, py::arg("graph"), py::arg("annotated"));
  m.def("port_metadata", &portQDQMetadata, py::arg("graph"));
  m.def("fold_quantize", &foldQuantize, py::arg("graph"), py::arg("taken"));
  m.def("lower_to_native", &lowerToNative, py::arg("graph"), py::arg("taken"),
        "rewrites weight-only int8 linears into pt2q.linear_w8a16; returns how many");
  m.def("reference_representation", &rewriteToReferenceRepresentation, py::arg("graph"),
        "rewrites int8 quantize/dequantize patterns into integer arithmetic; returns rewrites per pattern");
}

}  // namespace pt2q::python
