// The benchmarks' and probes' switches: a number from the environment, read on every call (so
// that one process can time both sides of a switch), for the torch-free kernel library and the
// torch glue alike.
#pragma once

#include <cstdint>
#include <cstdlib>

namespace pt2q::cuda {

/// `name` as a number, or `fallback` where it is unset or empty.
inline int64_t envOr(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoll(v) : fallback;
}

}  // namespace pt2q::cuda
