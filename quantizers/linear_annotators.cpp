// The annotator of pt2q's native-linear quantizers (Int8WeightOnlyQuantizer, Int4WeightOnlyQuantizer,
// Int8DynActInt8WeightQuantizer, Int8DynActInt4WeightQuantizer; python/pt2q/quantizer/
// linear_quantizers.py). Their configs hold a weight spec and, for the dynamic schemes, a per-token
// input spec; there is no output spec, since the weight-only ops return float and the dynamic ones
// quantize x inside the op. Annotations, before and after "native_linear":
//   %y = aten.linear(%x, %w, %b)
//   %y = aten.linear(%x, %w, %b) {annotation = "in %w = spec#0{...}; in %x = spec#1{...}; annotated"}
// (`in %x` only with an input spec.) The bias stays float: the native ops take it as it is.
#include <c10/util/Exception.h>

#include "quantizers/annotators.h"

namespace pt2q {

void registerLinearAnnotators(AnnotatorRegistry& r) {
  r.add("native_linear", [](AnnotatorContext& c) {
    TORCH_CHECK(c.roles.weight.kind != QSpecRef::Kind::kNone,
                "native_linear annotator: the quantization config has no weight spec");
    for (Node* n : c.graph.nodes()) {
      // A node another quantizer annotated first is left alone, whatever it holds (the Python
      // quantizers' rule: an existing quantization_annotation wins).
      if (n->kind() != NodeKind::kCallFunction || n->target() != "aten.linear" || !n->meta().annotation.empty() ||
          !c.allows(n)) {
        continue;
      }
      const auto& args = n->args();
      if (args.size() < 2 || !args[1].isNode()) continue;
      Annotation a;
      a.inputs.emplace_back(args[1].node()->name(), c.roles.weight);
      if (c.roles.input_activation.kind != QSpecRef::Kind::kNone && args[0].isNode()) {
        // x and the weight the same node (F.linear(x, x)): one edge, the input spec (as a dict
        // keyed by node keeps the later entry).
        const std::string& x = args[0].node()->name();
        if (x == a.inputs[0].first) {
          a.inputs[0].second = c.roles.input_activation;
        } else {
          a.inputs.emplace_back(x, c.roles.input_activation);
        }
      }
      a.annotated = true;
      setAnnotation(n, a);
    }
  });
}

}  // namespace pt2q
