// MX / BFP element formats: microxcaling's table (mx/formats.py), integer widths 2..16 for BFP.
#include "kernels/mx/mx_format.h"

#include <cmath>

namespace pt2q::mx {
namespace {

ElemFormat floatFormat(const std::string& name, int ebits, int mbits, float max_norm) {
  ElemFormat f;
  f.name = name;
  f.ebits = ebits;
  f.mbits = mbits;
  f.max_norm = max_norm;
  f.emax = static_cast<int>(std::floor(std::log2(max_norm)));
  return f;
}

}  // namespace

bool parseElemFormat(const std::string& name, ElemFormat* out) {
  if (name == "fp8_e5m2") return *out = floatFormat(name, 5, 4, 57344.0f), true;
  if (name == "fp8_e4m3") return *out = floatFormat(name, 4, 5, 448.0f), true;
  if (name == "fp6_e3m2") return *out = floatFormat(name, 3, 4, 28.0f), true;
  if (name == "fp6_e2m3") return *out = floatFormat(name, 2, 5, 7.5f), true;
  if (name == "fp4_e2m1" || name == "fp4") return *out = floatFormat("fp4_e2m1", 2, 3, 6.0f), true;
  if (name.size() >= 4 && name.compare(0, 3, "int") == 0) {
    const std::string digits = name.substr(3);
    if (digits.empty() || digits.size() > 2 || digits.find_first_not_of("0123456789") != std::string::npos) {
      return false;
    }
    const int w = std::stoi(digits);
    if (w < 2 || w > 16) return false;
    ElemFormat f;
    f.name = name;
    f.ebits = 0;
    f.mbits = w;
    f.emax = 0;
    // Sign-magnitude: magnitudes 0 .. 2^(w-1)-1 in steps of 2^-(w-2).
    f.max_norm = std::ldexp(static_cast<float>((1 << (w - 1)) - 1), -(w - 2));
    *out = f;
    return true;
  }
  return false;
}

const char* elemFormatNames() {
  return "int8, int4, int2 (BFP: int2..int16), fp8_e5m2, fp8_e4m3, fp6_e3m2, fp6_e2m3, fp4_e2m1";
}

namespace {

uint32_t hash32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

}  // namespace

uint32_t streamKey(uint64_t seed) {
  return hash32(static_cast<uint32_t>(seed) ^ hash32(static_cast<uint32_t>(seed >> 32) + 0x9e3779b9u));
}

bool parseRounding(const std::string& s, Rounding* out) {
  if (s == "nearest") return *out = Rounding::kNearest, true;
  if (s == "even") return *out = Rounding::kEven, true;
  if (s == "floor") return *out = Rounding::kFloor, true;
  if (s == "stochastic") return *out = Rounding::kStochastic, true;
  return false;
}

bool parseScaleMode(const std::string& s, ScaleMode* out) {
  if (s == "floor") return *out = ScaleMode::kFloor, true;
  if (s == "ceil") return *out = ScaleMode::kCeil, true;
  if (s == "even") return *out = ScaleMode::kEven, true;
  if (s == "rceil") return *out = ScaleMode::kRceil, true;
  return false;
}

}  // namespace pt2q::mx
