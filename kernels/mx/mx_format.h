// MX / BFP element formats and block-scale parameters: parsing and the per-format constants
// shared by every implementation (reference, CPU, Meta). Torch-free.
#pragma once

#include <cstdint>
#include <string>

namespace pt2q::mx {

/// An element format as microxcaling defines it: `mbits` counts sign + implicit bit + stored
/// mantissa bits, integers have ebits == 0 (a fixed-point grid of step 2^-(mbits-2)).
struct ElemFormat {
  std::string name;
  int ebits = 0;
  int mbits = 0;
  int emax = 0;         // floor(log2(max_norm)): the exponent the block max is aligned to
  float max_norm = 0;   // largest magnitude; results saturate here
  bool is_int() const { return ebits == 0; }
  int stored_mbits() const { return mbits - 2; }                          // m
  int bias() const { return is_int() ? 1 : (1 << (ebits - 1)) - 1; }      // element exponent bias
  int emin() const { return is_int() ? 0 : 1 - bias(); }                  // smallest normal exponent
  int code_bits() const { return is_int() ? mbits : 1 + ebits + stored_mbits(); }
};

/// Parses microxcaling's names: int8, int4, int2 (and BFP widths int2..int16), fp8_e5m2,
/// fp8_e4m3, fp6_e3m2, fp6_e2m3, fp4_e2m1 (alias fp4). Returns false for anything else.
bool parseElemFormat(const std::string& name, ElemFormat* out);

/// The list of accepted names, for error messages.
const char* elemFormatNames();

enum class Rounding : uint8_t { kNearest, kEven, kFloor, kStochastic };
enum class ScaleMode : uint8_t { kFloor, kCeil, kEven, kRceil };

bool parseRounding(const std::string& s, Rounding* out);

/// The stochastic-rounding stream key of a seed (kernels/README.md, Note [MX numerics]);
/// the kernels mix it with each element's index.
uint32_t streamKey(uint64_t seed);
bool parseScaleMode(const std::string& s, ScaleMode* out);

}  // namespace pt2q::mx
