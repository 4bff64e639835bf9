// The passes of convert/ in the pass registry (pt2q-opt, runPasses). observers-to-qdq needs
// qparams from Python observers and is called directly instead.
#include "convert/lower_to_native.h"
#include "convert/observers_to_qdq.h"
#include "convert/reference_representation.h"
#include "graph/pass.h"

namespace pt2q {
namespace {

class DuplicateDQPass final : public Pass {
 public:
  PassResult run(Graph& g) override {
    std::set<std::string> annotated;
    for (Node* n : g.nodes()) {
      if (!n->meta().annotation.empty()) annotated.insert(n->name());
    }
    PassResult r;
    r.num_rewrites = duplicateDequantize(g, annotated);
    r.changed = r.num_rewrites > 0;
    return r;
  }
};

class PortMetadataPass final : public Pass {
 public:
  PassResult run(Graph& g) override {
    portQDQMetadata(g);
    return {true, 0};
  }
};

class FoldQuantizePass final : public Pass {
 public:
  PassResult run(Graph& g) override {
    PassResult r;
    r.num_rewrites = static_cast<int64_t>(foldQuantize(g, {}).size());
    r.changed = r.num_rewrites > 0;
    return r;
  }
};

class LowerToNativePass final : public Pass {
 public:
  PassResult run(Graph& g) override {
    PassResult r;
    r.num_rewrites = lowerToNative(g, {});
    r.changed = r.num_rewrites > 0;
    return r;
  }
};

class ReferenceRepresentationPass final : public Pass {
 public:
  PassResult run(Graph& g) override {
    PassResult r;
    for (const auto& [name, n] : rewriteToReferenceRepresentation(g)) r.num_rewrites += n;
    r.changed = r.num_rewrites > 0;
    return r;
  }
};

}  // namespace

void registerConvertPasses(PassRegistry& registry) {
  registry.add({"duplicate-dq", "One dequantize per annotated consumer (convert_pt2e's DuplicateDQPass)",
                [] { return std::make_unique<DuplicateDQPass>(); }});
  registry.add({"port-qdq-metadata", "Quantize/dequantize nodes take their annotated node's stack trace",
                [] { return std::make_unique<PortMetadataPass>(); }});
  registry.add({"fold-quantize", "Fold quantize ops on constant weights into _frozen_param constants",
                [] { return std::make_unique<FoldQuantizePass>(); }});
  registry.add({"lower-to-native", "Quantized linears (dequantized int8/int4 weight, optionally per-token dynamic input) into "
                "pt2q.linear_w8a16/w4a16/w8a8/w4a8",
                [] { return std::make_unique<LowerToNativePass>(); }});
  registry.add({"reference-representation",
                "int8 quantize/dequantize patterns as integer arithmetic (use_reference_representation)",
                [] { return std::make_unique<ReferenceRepresentationPass>(); }});
}

}  // namespace pt2q
