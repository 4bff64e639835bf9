// MX / BFP numerics on raw fp32 bits, per block and per element: the shared scale (E8M0) of a
// block and the element rounding. Torch-free; included inside an ISA namespace (see
// cpu/mx_kernels_impl.h) after <cmath>, <cstdint> and simd/float_bits.h.
//
// See Note [MX numerics] in kernels/README.md. This is microxcaling's C++/CUDA semantics
// (mx/cpp/mx.cuh, quantize.cuh) written on values instead of mantissa shifts (bit casts are
// floatToBits / bitsToFloat of simd/float_bits.h):
//   element step  = 2^(se), se = (int ? 0 : max(e, emin)) - m     (e = exponent of |v|)
//   n             = round_mode(|v| / step), q = min(n * step, max_norm), sign restored, +0 for 0
// Every operation is exact in fp32 except the division v = a / X (X a power of two, so exact
// unless the quotient is an fp32 subnormal, where both round the same way).

// PT2Q_NUMERIC: `inline` on the CPU; kernels/cuda defines it as __host__ __device__ inline
// before including this header, so the GPU runs the same source.
#ifndef PT2Q_NUMERIC
#define PT2Q_NUMERIC inline
#endif

/// Per-format constants in the form the kernels use.
struct ElemParams {
  bool is_int;
  int32_t emin;    // smallest normal element exponent (0 for ints)
  int32_t m;       // stored mantissa bits (ints: mbits - 2)
  int32_t emax;    // exponent the block max is aligned to by the floor/ceil/even scale modes
  float max_norm;
};

/// Biased E8M0 exponent (0..254) of a block's shared scale, or 255 for a NaN scale (any
/// NaN/Inf in the block, or an exponent beyond 2^127). `amax` is the NaN-propagating max |a|.
PT2Q_NUMERIC uint32_t sharedScaleBits(float amax, const ElemParams& p, uint8_t scale_mode) {
  const uint32_t b = floatToBits(amax);
  const uint32_t eb = (b >> 23) & 0xFFu;
  const uint32_t mant = b & 0x7FFFFFu;
  if (eb == 255u) return 255u;
  int32_t u;
  switch (scale_mode) {
    case 1:  // ceil (torchao CEIL): round the block max up to a power of two first
      u = static_cast<int32_t>(eb) - 127 + (mant != 0 ? 1 : 0) - p.emax;
      break;
    case 2: {  // even (torchao EVEN): round the block max to the element's mantissa width first
      const int32_t shift = 23 - p.m - 1;
      const uint32_t r = (b + (shift >= 0 ? (1u << shift) : 0u)) & 0x7F800000u;
      u = static_cast<int32_t>(r >> 23) - 127 - p.emax;
      break;
    }
    case 3: {  // rceil (torchao RCEIL, cuBLAS): 2^ceil(log2(amax / max_norm)), in fp32
      const uint32_t t = floatToBits(amax / p.max_norm);
      const uint32_t te = (t >> 23) & 0xFFu, tm = t & 0x7FFFFFu;
      if (te == 255u) return 255u;
      const uint32_t byte = (te == 0) ? (tm > 0x400000u ? 1u : 0u) : te + (tm != 0 ? 1u : 0u);
      return byte > 254u ? 255u : byte;
    }
    default:  // floor: the OCP rule, microxcaling's bit extraction
      u = static_cast<int32_t>(eb) - 127 - p.emax;
      break;
  }
  const int32_t s = u + 127;
  if (s > 254) return 255u;  // beyond 2^127: NaN scale
  if (s < 0) return 0u;      // clamped to 2^-127
  return static_cast<uint32_t>(s);
}

/// The value of an E8M0 byte: 2^(s-127); byte 0 is 2^-127 (an fp32 subnormal); 255 is NaN.
PT2Q_NUMERIC float scaleValue(uint32_t s) {
  if (s == 255u) return bitsToFloat(0x7FC00000u);
  return s == 0u ? bitsToFloat(0x00400000u) : bitsToFloat(s << 23);
}

/// hash32 after its first step (x ^ (x >> 16)): kernels that hash runs of consecutive indices
/// share that step across a run whose indices differ only in their low 16 bits.
PT2Q_NUMERIC uint32_t hash32Tail(uint32_t x) {
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

/// 32 random bits for element `index` of a stream, independent of how work is split.
PT2Q_NUMERIC uint32_t hash32(uint32_t x) {
  return hash32Tail(x ^ (x >> 16));
}

PT2Q_NUMERIC uint32_t streamKey(uint64_t seed) {
  return hash32(static_cast<uint32_t>(seed) ^ hash32(static_cast<uint32_t>(seed >> 32) + 0x9e3779b9u));
}

PT2Q_NUMERIC uint32_t elementRandom(uint32_t key, uint64_t index) {
  return hash32(static_cast<uint32_t>(index) ^ hash32(static_cast<uint32_t>(index >> 32) ^ key));
}

/// Rounds v (already divided by the block scale, finite) to the element grid. R: 0 nearest (ties
/// away), 1 even, 2 floor (toward zero), 3 stochastic (up with probability frac, from rnd).
// Worked on the signed value: trunc, the fraction and the clamp are symmetric about zero, so
// this is the magnitude's rounding with the sign put back, and n0 + 0 turns a -0 into the +0
// the format wants, without separate sign handling (four instructions an element fewer on the
// GPU, where the stochastic kernels were issue-bound).
// The element step 2^se and its reciprocal are built as fp32 bit patterns from v's exponent
// field: eb = max(field, emin's field) is the exponent of 2^max(e, emin), so 2^se has the bits
// eb - (m << 23) and 2^-se the bits ((254 + m) << 23) - eb, the same words mod 2^32 as
// (127 + se) << 23 and (127 - se) << 23 (three instructions an element fewer on the GPU than
// extracting e, taking the max and shifting twice).
template <int R>
PT2Q_NUMERIC float quantizeElement(float v, const ElemParams& p, uint32_t rnd) {
  const uint32_t b = floatToBits(v);
  uint32_t step_bits, inv_bits;
  if (p.is_int) {
    step_bits = static_cast<uint32_t>(127 - p.m) << 23;
    inv_bits = static_cast<uint32_t>(127 + p.m) << 23;
  } else {
    const uint32_t field = b & 0x7F800000u, emin_field = static_cast<uint32_t>(p.emin + 127) << 23;
    const uint32_t eb = field > emin_field ? field : emin_field;
    step_bits = eb - (static_cast<uint32_t>(p.m) << 23);
    inv_bits = (static_cast<uint32_t>(254 + p.m) << 23) - eb;
  }
  const float scaled = v * bitsToFloat(inv_bits);
  const float n0 = std::trunc(scaled);
  const float frac = std::fabs(scaled - n0);
  bool up;
  if constexpr (R == 0) {
    up = frac >= 0.5f;
  } else if constexpr (R == 1) {
    up = frac > 0.5f || (frac == 0.5f && (static_cast<int32_t>(n0) & 1));
  } else if constexpr (R == 2) {
    up = false;
  } else {
    up = static_cast<uint32_t>(frac * 4294967296.0f) > rnd;
  }
  // 1 with v's sign: (b & sign) | 1.0f. On the GPU one lop3, which C compiles to two (a lop3
  // instruction takes one immediate; ptxas keeps the other in a register).
#if defined(__CUDA_ARCH__)
  uint32_t one_bits;
  asm("lop3.b32 %0, %1, 0x80000000, 0x3F800000, 0xEA;" : "=r"(one_bits) : "r"(b));
  const float one = bitsToFloat(one_bits);
#else
  const float one = bitsToFloat((b & 0x80000000u) | 0x3F800000u);
#endif
  float q = (n0 + (up ? one : 0.0f)) * bitsToFloat(step_bits);
  q = q < p.max_norm ? q : p.max_norm;
  return q > -p.max_norm ? q : -p.max_norm;
}

/// The stored bits of an element value q (on the grid, |q| <= max_norm), `bits` wide:
/// integers as two's complement of sign * n (q = n * 2^-m); floats as sign | exponent (bias
/// 2^(ebits-1) - 1) | mantissa, exponent 0 for subnormals.
PT2Q_NUMERIC uint32_t encodeElement(float q, const ElemParams& p, int32_t ebits, int32_t bits) {
  const uint32_t b = floatToBits(q);
  const uint32_t sign = b >> 31;
  const uint32_t a = b & 0x7FFFFFFFu;
  const uint32_t mask = (bits >= 32) ? 0xFFFFFFFFu : ((1u << bits) - 1u);
  if (p.is_int) {
    const int32_t n = static_cast<int32_t>(bitsToFloat(a) * bitsToFloat(static_cast<uint32_t>(127 + p.m) << 23));
    return static_cast<uint32_t>(sign ? -n : n) & mask;
  }
  if (a == 0) return 0u;
  const int32_t e = static_cast<int32_t>(a >> 23) - 127;
  const int32_t bias = (1 << (ebits - 1)) - 1;
  uint32_t expf, mant;
  if (e >= p.emin) {
    expf = static_cast<uint32_t>(e + bias);
    mant = (a >> (23 - p.m)) & ((1u << p.m) - 1u);
  } else {
    expf = 0;
    mant = static_cast<uint32_t>(bitsToFloat(a) * bitsToFloat(static_cast<uint32_t>(127 + p.m - p.emin) << 23));
  }
  return ((sign << (ebits + p.m)) | (expf << p.m) | mant) & mask;
}
