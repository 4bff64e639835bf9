// 8-lane fp32 vectors on AVX2 + FMA + F16C. Included inside an ISA namespace by affine_kernels_impl.h,
// which includes the system headers first; this file includes none itself.


struct Vec {
  using F = __m256;
  using M = __m256;  // all-ones lanes
  static constexpr int N = 8;
  static F set1(float v) { return _mm256_set1_ps(v); }
  static F load(const float* p) { return _mm256_loadu_ps(p); }
  static F loadBF16(const uint16_t* p) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
  }
  static F loadF16(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static void store(float* p, F v) { _mm256_storeu_ps(p, v); }
  static void storeBF16(uint16_t* p, F v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), packBF16(v)); }
  static __m128i packBF16(F v) {
    // Round to nearest even on the bits; NaN lanes become 0x7fc0 as c10::BFloat16 does.
    const __m256i u = _mm256_castps_si256(v);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb), 16);
    const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    r = _mm256_blendv_epi8(r, _mm256_set1_epi32(0x7fc0), nan);
    const __m128i lo = _mm256_castsi256_si128(r), hi = _mm256_extracti128_si256(r, 1);
    return _mm_packus_epi32(lo, hi);
  }
  static void storeF16(uint16_t* p, F v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  static F loadCodes(const int8_t* p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
  static F loadCodes(const uint8_t* p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
  static F loadCodes(const int16_t* p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  static F loadCodes(const uint16_t* p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  // v is integer-valued and inside the code type's range, so the packs never saturate.
  static __m128i packedHalves(F v, bool is_unsigned16) {
    const __m256i i = _mm256_cvtps_epi32(v);
    const __m128i lo = _mm256_castsi256_si128(i), hi = _mm256_extracti128_si256(i, 1);
    return is_unsigned16 ? _mm_packus_epi32(lo, hi) : _mm_packs_epi32(lo, hi);
  }
  static void storeCodes(int8_t* p, F v) {
    const __m128i w = packedHalves(v, false);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm_packs_epi16(w, w));
  }
  static void storeCodes(uint8_t* p, F v) {
    const __m128i w = packedHalves(v, false);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm_packus_epi16(w, w));
  }
  static void storeCodes(int16_t* p, F v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), packedHalves(v, false)); }
  static void storeCodes(uint16_t* p, F v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), packedHalves(v, true)); }
  // Streaming (non-temporal) stores skip the read-for-ownership of the destination line; the
  // caller guarantees alignment to the store width and calls fence() before returning.
  static constexpr bool kHasStream = true;
  static void streamF32(float* p, F v) { _mm256_stream_ps(p, v); }
  static void streamBF16(uint16_t* p, F v) { _mm_stream_si128(reinterpret_cast<__m128i*>(p), packBF16(v)); }
  static void streamF16(uint16_t* p, F v) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  static void streamCodes(int8_t* p, F v) {
    const __m128i w = packedHalves(v, false);
    _mm_stream_si64(reinterpret_cast<long long*>(p), _mm_cvtsi128_si64(_mm_packs_epi16(w, w)));
  }
  static void streamCodes(uint8_t* p, F v) {
    const __m128i w = packedHalves(v, false);
    _mm_stream_si64(reinterpret_cast<long long*>(p), _mm_cvtsi128_si64(_mm_packus_epi16(w, w)));
  }
  static void streamCodes(int16_t* p, F v) { _mm_stream_si128(reinterpret_cast<__m128i*>(p), packedHalves(v, false)); }
  static void streamCodes(uint16_t* p, F v) { _mm_stream_si128(reinterpret_cast<__m128i*>(p), packedHalves(v, true)); }
  static void fence() { _mm_sfence(); }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static F sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F div(F a, F b) { return _mm256_div_ps(a, b); }
  static F roundEven(F a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static F clampNanLow(F v, F lo, F hi) { return _mm256_min_ps(_mm256_max_ps(v, lo), hi); }
  static M inRange(F v, F lo, F hi) {
    return _mm256_and_ps(_mm256_cmp_ps(v, lo, _CMP_GE_OQ), _mm256_cmp_ps(v, hi, _CMP_LE_OQ));
  }
  static void storeMask(uint8_t* p, M m) {
    const __m256i ones = _mm256_and_si256(_mm256_castps_si256(m), _mm256_set1_epi32(1));
    const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(ones), _mm256_extracti128_si256(ones, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm_packs_epi16(w, w));
  }
  // NaN-propagating min/max: MINPS returns its second operand when either is NaN.
  static F pmin(F acc, F x) { return _mm256_blendv_ps(_mm256_min_ps(x, acc), x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q)); }
  static F pmax(F acc, F x) { return _mm256_blendv_ps(_mm256_max_ps(x, acc), x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q)); }
  static float reduceMin(F v) {
    alignas(32) float t[8];
    _mm256_store_ps(t, v);
    float r = t[0];
    for (int i = 1; i < 8; ++i) r = (std::isnan(t[i]) || t[i] < r) ? t[i] : r;
    return r;
  }
  static float reduceMax(F v) {
    alignas(32) float t[8];
    _mm256_store_ps(t, v);
    float r = t[0];
    for (int i = 1; i < 8; ++i) r = (std::isnan(t[i]) || t[i] > r) ? t[i] : r;
    return r;
  }
};
