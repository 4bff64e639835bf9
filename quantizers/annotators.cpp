// The annotator registry and running annotators.
#include "quantizers/annotators.h"

#include <c10/util/Exception.h>

namespace pt2q {

const Annotator& AnnotatorRegistry::get(const std::string& name) const {
  auto it = annotators_.find(name);
  if (it == annotators_.end()) {
    std::string known;
    for (const auto& kv : annotators_) known += (known.empty() ? "" : ", ") + kv.first;
    TORCH_CHECK(false, "unknown annotator '", name, "'; the annotators are: ", known);
  }
  return it->second;
}

std::vector<std::string> AnnotatorRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& kv : annotators_) out.push_back(kv.first);
  return out;
}

const AnnotatorRegistry& defaultAnnotatorRegistry() {
  static const AnnotatorRegistry registry = [] {
    AnnotatorRegistry r;
    registerXnnpackAnnotators(r);
    registerEmbeddingAnnotators(r);
    registerX86Annotators(r);
    registerLinearAnnotators(r);
    return r;
  }();
  return registry;
}

void runAnnotators(Graph& graph, const std::vector<std::string>& names, const RoleSpecs& roles,
                   const std::set<std::string>* allowed, const std::string& pattern_filter, bool config_is_none) {
  const AnnotatorRegistry& r = defaultAnnotatorRegistry();
  std::vector<const Annotator*> fns;
  for (const auto& n : names) fns.push_back(&r.get(n));  // unknown names fail before any change
  AnnotatorContext ctx{graph, roles, allowed, pattern_filter, config_is_none};
  for (const Annotator* f : fns) (*f)(ctx);
}

// EmbeddingQuantizer: aten.embedding's weight (args[0]) gets the weight spec.
void registerEmbeddingAnnotators(AnnotatorRegistry& r) {
  r.add("embedding", [](AnnotatorContext& c) {
    for (Node* n : c.graph.nodes()) {
      if (n->kind() != NodeKind::kCallFunction || n->target() != "aten.embedding" || n->args().empty() ||
          !n->args()[0].isNode() || !c.allows(n)) {
        continue;
      }
      TORCH_CHECK(c.roles.weight.kind != QSpecRef::Kind::kNone,
                  "EmbeddingQuantizer: the embedding config has no weight spec");
      Annotation a;
      a.inputs.emplace_back(n->args()[0].node()->name(), c.roles.weight);
      a.annotated = true;
      setAnnotation(n, a);
    }
  });
}

}  // namespace pt2q
