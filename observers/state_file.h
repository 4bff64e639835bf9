// Observer state files: named observers (kind, constructor arguments, running statistics)
// saved to and rebuilt from proto/observer_state.proto bytes.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "observers/observer.h"

namespace pt2q {

using NamedObserver = std::pair<std::string, std::unique_ptr<Observer>>;

/// The file bytes of `observers` (name -> observer), statistics copied as dense CPU tensors.
std::string serializeObservers(const std::vector<std::pair<std::string, const Observer*>>& observers);

/// Rebuilds observers from file bytes. Everything is checked before it is used: a foreign,
/// truncated or corrupted file, an unknown class, dtype or qscheme, and statistics whose
/// names, dtypes or sizes do not fit the observer all fail with an error naming `source` and
/// the observer.
std::vector<NamedObserver> deserializeObservers(const std::string& bytes, const std::string& source = "<bytes>");

/// qscheme <-> torch.ao's spelling (torch.per_tensor_affine is "per_tensor_affine").
std::string qschemeName(QScheme q);
std::optional<QScheme> qschemeFromName(const std::string& name);

}  // namespace pt2q
