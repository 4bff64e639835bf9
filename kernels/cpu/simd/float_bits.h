// Scalar fp32 <-> bf16 / fp16 conversions (round to nearest even, NaN kept quiet), bit-exact
// with c10::BFloat16 / c10::Half. Included inside an ISA namespace (see affine_kernels_impl.h)
// so that copies compiled with different -m flags never merge at link time; it includes no
// headers itself (affine_kernels_impl.h includes them at file scope first).

// PT2Q_NUMERIC: `inline` on the CPU; kernels/cuda defines it as __host__ __device__ inline
// before including this header, so the GPU runs the same source.
#ifndef PT2Q_NUMERIC
#define PT2Q_NUMERIC inline
#endif

PT2Q_NUMERIC float bitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

PT2Q_NUMERIC uint32_t floatToBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

PT2Q_NUMERIC float bf16ToFloat(uint16_t h) { return bitsToFloat(uint32_t(h) << 16); }

PT2Q_NUMERIC uint16_t floatToBF16(float f) {
  const uint32_t u = floatToBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;  // NaN, as c10::BFloat16
  const uint32_t rounding_bias = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding_bias) >> 16);
}

PT2Q_NUMERIC float f16ToFloat(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t man = h & 0x3ffu;
  if (exp == 0x1f) return bitsToFloat(sign | 0x7f800000u | (man << 13));  // Inf / NaN
  if (exp != 0) return bitsToFloat(sign | ((exp + 112) << 23) | (man << 13));
  if (man == 0) return bitsToFloat(sign);
  // Subnormal half: value = man * 2^-24, exact in fp32.
  const float v = static_cast<float>(man) * 5.9604644775390625e-08f;
  return (sign != 0) ? -v : v;
}

PT2Q_NUMERIC uint16_t floatToF16(float f) {
  const uint32_t u = floatToBits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7e00u | static_cast<uint16_t>((a >> 13) & 0x3ffu);  // NaN
  if (a >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65520: Inf
  if (a < 0x38800000u) {
    // Result is subnormal or zero: scale to units of 2^-24 and round to nearest even.
    // Multiplying by 2^24 is exact here, and nearbyint under the default mode is RNE.
    const float scaled = bitsToFloat(a) * 16777216.0f;
    uint32_t m = static_cast<uint32_t>(scaled);
    const float frac = scaled - static_cast<float>(m);
    if (frac > 0.5f || (frac == 0.5f && (m & 1u))) ++m;
    return sign | static_cast<uint16_t>(m);
  }
  // Normal: rebias the exponent, then round the 13 dropped mantissa bits to nearest even.
  const uint32_t rebased = a - (112u << 23);
  const uint32_t rounded = rebased + 0xfffu + ((rebased >> 13) & 1u);
  return sign | static_cast<uint16_t>(rounded >> 13);
}
