// pt2q._C: the extension module. It only calls one bind*() per area; loading it loads
// libpt2q, whose static initializers register torch.ops.pt2q.*.
#include <pybind11/pybind11.h>

#include "python/bindings/convert.h"
#include "python/bindings/graph.h"
#include "python/bindings/info.h"
#include "python/bindings/observers.h"
#include "python/bindings/prepare.h"
#include "python/bindings/quantizers.h"
#include "python/bindings/reference.h"

PYBIND11_MODULE(_C, m) {
  m.doc() = "pt2q C++ core";
  auto info = m.def_submodule("info", "build and runtime facts");
  pt2q::python::bindInfo(info);
  auto reference = m.def_submodule("reference", "reference (plain ATen) implementations of the ops");
  pt2q::python::bindReference(reference);
  auto graph = m.def_submodule("graph", "the pt2q IR: Graph, Node, text form");
  pt2q::python::bindGraph(graph);
  auto observers = m.def_submodule("observers", "calibration observers (observers/observer.h)");
  pt2q::python::bindObservers(observers);
  auto prepare = m.def_submodule("prepare", "the passes of prepare_pt2e (observers/sharing.h, insert_observers.h)");
  pt2q::python::bindPrepare(prepare);
  auto convert = m.def_submodule("convert", "the passes of convert_pt2e (convert/observers_to_qdq.h)");
  pt2q::python::bindConvert(convert);
  auto quantizers = m.def_submodule("quantizers", "annotators of the built-in quantizers (quantizers/annotators.h)");
  pt2q::python::bindQuantizers(quantizers);
}
