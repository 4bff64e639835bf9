// Memory side of the AVX2 MX kernels: 8 elements in and out (fp32, bf16 or fp16 in memory,
// fp32 in registers, through Vec of simd/vec_avx2.h), codes out, block maxima. Included by
// mx_simd_avx2.h inside the avx2 namespace. Runs shorter than 8 (a ragged block, the last
// columns of a tile) go through a zero-padded buffer: +0 changes no maximum.

inline __m256 signBit8() { return _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int32_t>(0x80000000u))); }

template <FloatKind K>
inline __m256 load8(const typename IO<K>::T* p) {
  if constexpr (K == FloatKind::kF32) {
    return Vec::load(p);
  } else if constexpr (K == FloatKind::kBF16) {
    return Vec::loadBF16(p);
  } else {
    return Vec::loadF16(p);
  }
}

/// n (0 < n <= 8) elements at p, the other lanes +0.
template <FloatKind K>
inline __m256 load8(const typename IO<K>::T* p, int64_t n) {
  if (n >= 8) return load8<K>(p);
  typename IO<K>::T buf[8] = {};
  std::memcpy(buf, p, static_cast<size_t>(n) * sizeof(buf[0]));
  return load8<K>(buf);
}

/// Stores 8 values; streaming (no read-for-ownership) when asked and p is aligned for it.
template <FloatKind K>
inline void store8(typename IO<K>::T* p, __m256 v, bool stream) {
  constexpr uintptr_t kAlign = K == FloatKind::kF32 ? 32 : 16;
  if (stream && reinterpret_cast<uintptr_t>(p) % kAlign == 0) {
    if constexpr (K == FloatKind::kF32) {
      Vec::streamF32(p, v);
    } else if constexpr (K == FloatKind::kBF16) {
      Vec::streamBF16(p, v);
    } else {
      Vec::streamF16(p, v);
    }
  } else if constexpr (K == FloatKind::kF32) {
    Vec::store(p, v);
  } else if constexpr (K == FloatKind::kBF16) {
    Vec::storeBF16(p, v);
  } else {
    Vec::storeF16(p, v);
  }
}

/// Stores the first n (0 < n <= 8) lanes.
template <FloatKind K>
inline void store8(typename IO<K>::T* p, __m256 v, bool stream, int64_t n) {
  if (n >= 8) return store8<K>(p, v, stream);
  typename IO<K>::T buf[8];
  store8<K>(buf, v, false);
  std::memcpy(p, buf, static_cast<size_t>(n) * sizeof(buf[0]));
}

/// Stores the first n (0 < n <= 8) of 8 codes (int32 lanes already masked to their width, so
/// the unsigned packs never saturate).
template <typename CodeT>
inline void storeCodes8(CodeT* p, __m256i codes, int64_t n) {
  const __m128i w = _mm_packus_epi32(_mm256_castsi256_si128(codes), _mm256_extracti128_si256(codes, 1));
  alignas(16) CodeT buf[8];
  if constexpr (sizeof(CodeT) == 1) {
    const __m128i b = _mm_packus_epi16(w, w);
    if (n >= 8) return _mm_storel_epi64(reinterpret_cast<__m128i*>(p), b);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(buf), b);
  } else {
    if (n >= 8) return _mm_storeu_si128(reinterpret_cast<__m128i*>(p), w);
    _mm_store_si128(reinterpret_cast<__m128i*>(buf), w);
  }
  std::memcpy(p, buf, static_cast<size_t>(n) * sizeof(CodeT));
}

/// Stores the first n (a whole number of packing groups, <= 8) of 8 codes packed (pack_bits 4,
/// 2 or 6, see mx_code_pack.h) at p, the packed byte of the first code's group. As 32-bit lanes
/// of the 16-bit codes, even code low and odd code at bit 16, pairs fold with one shift and OR,
/// and pairs of pairs as 64-bit lanes (as storeCodeWords of the AVX-512 kernels).
inline void storePackedCodes8(uint8_t* p, __m256i codes, int64_t n, int32_t pack_bits) {
  const __m128i w = _mm_packus_epi32(_mm256_castsi256_si128(codes), _mm256_extracti128_si256(codes, 1));
  __m128i b;
  int64_t bytes;
  if (pack_bits == 4) {
    b = _mm_shuffle_epi8(_mm_or_si128(w, _mm_srli_epi32(w, 12)), _mm_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1,
                                                                               -1, -1, -1, -1, -1));
    bytes = n / 2;
  } else if (pack_bits == 2) {
    const __m128i d = _mm_or_si128(w, _mm_srli_epi32(w, 14));
    b = _mm_shuffle_epi8(_mm_or_si128(d, _mm_srli_epi64(d, 28)), _mm_setr_epi8(0, 8, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                                                                              -1, -1, -1, -1, -1));
    bytes = n / 4;
  } else {
    const __m128i d = _mm_and_si128(_mm_or_si128(w, _mm_srli_epi32(w, 10)), _mm_set1_epi32(0xFFF));
    b = _mm_shuffle_epi8(_mm_or_si128(d, _mm_srli_epi64(d, 20)), _mm_setr_epi8(0, 1, 2, 8, 9, 10, -1, -1, -1, -1, -1,
                                                                              -1, -1, -1, -1, -1));
    bytes = n / 4 * 3;
  }
  if (n == 8) {  // fixed-size stores: a memcpy of a runtime length is a call
    if (pack_bits == 4) {
      const int32_t v = _mm_cvtsi128_si32(b);
      std::memcpy(p, &v, 4);
    } else if (pack_bits == 2) {
      const int16_t v = static_cast<int16_t>(_mm_cvtsi128_si32(b));
      std::memcpy(p, &v, 2);
    } else {
      const int64_t v = _mm_cvtsi128_si64(b);
      std::memcpy(p, &v, 6);
    }
    return;
  }
  alignas(16) uint8_t buf[16];
  _mm_store_si128(reinterpret_cast<__m128i*>(buf), b);
  std::memcpy(p, buf, static_cast<size_t>(bytes));
}

/// Codes of elements [e, e + n) (n <= 8): one CodeT each, or packed (MxCall::pack_bits).
template <typename CodeT>
inline void storeCodes8At(void* codes, int64_t e, __m256i v, int64_t n, int32_t pack_bits) {
  if (pack_bits != 0) return storePackedCodes8(static_cast<uint8_t*>(codeAt<CodeT>(codes, e, pack_bits)), v, n, pack_bits);
  storeCodes8(static_cast<CodeT*>(codes) + e, v, n);
}

/// Running max |x| and NaN lanes of 8 lanes (NaN tracked apart: MAXPS returns its second
/// operand when the first is NaN).
struct Max8 {
  __m256 amax = _mm256_setzero_ps();
  __m256 nan = _mm256_setzero_ps();
  void add(__m256 x) {
    amax = _mm256_max_ps(_mm256_andnot_ps(signBit8(), x), amax);
    nan = _mm256_or_ps(nan, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
  }
};

/// The NaN-propagating max |x| of a contiguous run (as columnMaxima of the scalar kernels).
template <FloatKind K>
inline float runMax(const typename IO<K>::T* x, int64_t n) {
  Max8 m;
  for (int64_t i = 0; i < n; i += 8) m.add(load8<K>(x + i, n - i));
  if (_mm256_movemask_ps(m.nan) != 0) return bitsToFloat(0x7FC00000u);
  __m256 v = _mm256_max_ps(m.amax, _mm256_permute2f128_ps(m.amax, m.amax, 1));
  v = _mm256_max_ps(v, _mm256_shuffle_ps(v, v, 0x4E));
  v = _mm256_max_ps(v, _mm256_shuffle_ps(v, v, 0xB1));
  return _mm256_cvtss_f32(v);
}
