// Whether a pointer is aligned for a vector load: the kernels' "takes" checks (host side).
#pragma once

#include <cstdint>

namespace pt2q::cuda {

inline bool aligned(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

}  // namespace pt2q::cuda
