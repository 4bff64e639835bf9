// libFuzzer target: the IR text parser must reject any text with an error, never crash; and
// whatever it accepts must print to a fixed point (print(parse(print(g))) == print(g)).
#include <c10/util/Exception.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "graph/ir_text.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::string printed;
  try {
    printed = pt2q::printGraph(*pt2q::parseGraph(text, "fuzz"));
  } catch (const c10::Error&) {
    return 0;
  }
  // Accepted text must round-trip: a failure here is a printer/parser bug, reported as a crash.
  if (pt2q::printGraph(*pt2q::parseGraph(printed, "fuzz-printed")) != printed) std::abort();
  return 0;
}
