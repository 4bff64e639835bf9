// libFuzzer target: the .pt2q graph loader must reject any bytes with an error, never crash.
#include <c10/util/Exception.h>

#include <cstdint>
#include <string>

#include "graph/serialize.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    pt2q::deserializeGraph(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
  } catch (const c10::Error&) {
  }
  return 0;
}
