// Passes over the IR and the registry pt2q-opt and the pipelines look them up in.
#pragma once

#include <functional>
#include <iosfwd>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace pt2q {

/// What a pass did.
struct PassResult {
  bool changed = false;
  int64_t num_rewrites = 0;
};

/// A transformation of a graph. A pass either finishes or leaves the graph as it was.
class Pass {
 public:
  virtual ~Pass() = default;
  virtual PassResult run(Graph& graph) = 0;
};

/// A registered pass: its flag (kebab-case, also the name of its IR test file), a one-line
/// summary, and a factory.
struct PassInfo {
  std::string flag;
  std::string summary;
  std::function<std::unique_ptr<Pass>()> factory;
};

/// Passes by flag. Filled by explicit register*Passes() calls, never by static initializers.
class PassRegistry {
 public:
  void add(PassInfo info);
  const PassInfo* find(const std::string& flag) const;
  std::vector<const PassInfo*> all() const;

 private:
  std::map<std::string, PassInfo> passes_;
};

/// The registry with every pass pt2q has (graph passes for now).
const PassRegistry& defaultPassRegistry();

/// How runPasses runs.
struct PassRunOptions {
  bool verify_each = true;         // verify() after every pass (see Note [Verify after every pass])
  std::ostream* print_after = nullptr;  // print the IR after every pass here
};

/// Runs the passes named by `flags` in order. An unknown flag fails before any pass runs, naming
/// it and the known ones.
PassResult runPasses(Graph& graph, const std::vector<std::string>& flags, const PassRunOptions& options = {},
                     const PassRegistry& registry = defaultPassRegistry());

/// Erases nodes whose value is unused and that have no effect: operator calls whose schema
/// writes nothing, or writes only into temporaries that nothing else reads (an in-place call on a
/// fresh tensor whose only user it is, also through views and earlier in-place calls), getitem,
/// and get_attr nodes. Other opaque calls and call_module nodes are kept (their effects are
/// unknown), as are placeholders, and writes into graph inputs and constants.
///
///   Before:  %a = aten.relu(%x)        // no users
///            %b = aten.neg(%x)
///            return (%b,)
///   After:   %b = aten.neg(%x)
///            return (%b,)
std::unique_ptr<Pass> createDeadCodeEliminationPass();

/// Value-preserving algebraic rewrites (patterns in graph/simplify_patterns.cpp):
///
///   neg-neg:       %b = aten.neg(aten.neg(%x))          ->  %x
///   relu-relu:     %b = aten.relu(aten.relu(%x))        ->  aten.relu(%x)
///   eval-dropout:  %y = aten.dropout(%x, %p, false)     ->  %x      (not when train is true)
std::unique_ptr<Pass> createSimplifyPass();
class RewritePatternSet;
void populateSimplifyPatterns(RewritePatternSet& patterns);

/// Registers the passes of graph/ (dead-code-elimination, simplify).
void registerGraphPasses(PassRegistry& registry);

}  // namespace pt2q
