// Sub-byte MX codes packed as kernels/README.md ("MX code layout") lays them out: 4-bit codes two
// per byte (element 2i in the low half of byte i), 2-bit codes four per byte (element 4i in bits
// 0-1), 6-bit codes four per 3 bytes (c0 | c1 << 6 | c2 << 12 | c3 << 18, little-endian). Used by
// the quantize kernels that pack as they store (MxCall::pack_bits) and by the second pass of
// mx_cpu.cpp for the calls they cannot.
#pragma once

#include <cstdint>

namespace pt2q::cpu {

/// Where the codes of element `e` start: CodeT units, or the packed byte of its group (pack_bits
/// 4, 2 or 6; e is the first element of a group).
template <typename CodeT>
inline void* codeAt(void* codes, int64_t e, int32_t pack_bits) {
  uint8_t* b = static_cast<uint8_t*>(codes);
  switch (pack_bits) {
    case 4: return b + e / 2;
    case 2: return b + e / 4;
    case 6: return b + e / 4 * 3;
    default: return static_cast<CodeT*>(codes) + e;
  }
}

/// Packs n codes of one byte each (n a whole number of groups) into dst, in simple loops the
/// compiler vectorizes.
inline void packCodeRun(const uint8_t* src, int64_t n, int32_t pack_bits, uint8_t* dst) {
  if (pack_bits == 4) {
    for (int64_t g = 0; g < n / 2; ++g) dst[g] = static_cast<uint8_t>(src[2 * g] | (src[2 * g + 1] << 4));
  } else if (pack_bits == 2) {
    for (int64_t g = 0; g < n / 4; ++g) {
      dst[g] = static_cast<uint8_t>(src[4 * g] | (src[4 * g + 1] << 2) | (src[4 * g + 2] << 4) | (src[4 * g + 3] << 6));
    }
  } else if (pack_bits == 6) {
    for (int64_t g = 0; g < n / 4; ++g) {
      const uint32_t w = src[4 * g] | (src[4 * g + 1] << 6) | (src[4 * g + 2] << 12) | (uint32_t(src[4 * g + 3]) << 18);
      dst[3 * g] = w & 0xFF;
      dst[3 * g + 1] = (w >> 8) & 0xFF;
      dst[3 * g + 2] = (w >> 16) & 0xFF;
    }
  }
}

}  // namespace pt2q::cpu
