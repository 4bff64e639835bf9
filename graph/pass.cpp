// The pass registry and runner (see pass.h).
#include "graph/pass.h"

#include <c10/util/Exception.h>

#include <ostream>

#include "graph/ir_text.h"
#include "graph/verifier.h"

namespace pt2q {

void PassRegistry::add(PassInfo info) {
  TORCH_CHECK(!passes_.count(info.flag), "PassRegistry: the pass flag '", info.flag, "' is registered twice");
  passes_.emplace(info.flag, std::move(info));
}

const PassInfo* PassRegistry::find(const std::string& flag) const {
  auto it = passes_.find(flag);
  return it == passes_.end() ? nullptr : &it->second;
}

std::vector<const PassInfo*> PassRegistry::all() const {
  std::vector<const PassInfo*> out;
  for (const auto& kv : passes_) out.push_back(&kv.second);
  return out;
}

// Defined by the layers above graph/ (observers/, convert/), all in libpt2q.
void registerObserverPasses(PassRegistry& registry);
void registerConvertPasses(PassRegistry& registry);

const PassRegistry& defaultPassRegistry() {
  static const PassRegistry registry = [] {
    PassRegistry r;
    registerGraphPasses(r);
    registerObserverPasses(r);
    registerConvertPasses(r);
    return r;
  }();
  return registry;
}

// Note [Verify after every pass]
// A pass that breaks an invariant is caught where it ran, with its name in the message, rather
// than passes later where the broken graph is finally used.
PassResult runPasses(Graph& graph, const std::vector<std::string>& flags, const PassRunOptions& options,
                     const PassRegistry& registry) {
  std::vector<const PassInfo*> infos;
  for (const std::string& f : flags) {
    const PassInfo* info = registry.find(f);
    if (info == nullptr) {
      std::string known;
      for (const PassInfo* p : registry.all()) known += (known.empty() ? "" : ", ") + p->flag;
      TORCH_CHECK(false, "unknown pass '", f, "'; the passes are: ", known);
    }
    infos.push_back(info);
  }
  PassResult total;
  for (const PassInfo* info : infos) {
    const PassResult r = info->factory()->run(graph);
    total.changed |= r.changed;
    total.num_rewrites += r.num_rewrites;
    if (options.verify_each) {
      const std::string e = verifyMessage(graph);
      TORCH_CHECK(e.empty(), "pass '", info->flag, "' left an invalid graph: ", e);
    }
    if (options.print_after != nullptr) {
      *options.print_after << "# IR after " << info->flag << "\n" << printGraph(graph);
    }
  }
  return total;
}

}  // namespace pt2q
