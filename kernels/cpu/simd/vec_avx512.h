// 16-lane fp32 vectors on AVX-512 F/BW/VL/DQ. Included inside an ISA namespace by affine_kernels_impl.h,
// which includes the system headers first; this file includes none itself.


struct Vec {
  using F = __m512;
  using M = __mmask16;
  static constexpr int N = 16;
  static F set1(float v) { return _mm512_set1_ps(v); }
  static F load(const float* p) { return _mm512_loadu_ps(p); }
  static F loadBF16(const uint16_t* p) {
    const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
  }
  static F loadF16(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static void store(float* p, F v) { _mm512_storeu_ps(p, v); }
  static __m256i packBF16(F v) {
    // Round to nearest even on the bits; NaN lanes become 0x7fc0 as c10::BFloat16 does.
    const __m512i u = _mm512_castps_si512(v);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb), 16);
    r = _mm512_mask_mov_epi32(r, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), _mm512_set1_epi32(0x7fc0));
    return _mm512_cvtepi32_epi16(r);
  }
  static void storeBF16(uint16_t* p, F v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), packBF16(v)); }
  static void storeF16(uint16_t* p, F v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  // Streaming (non-temporal) stores skip the read-for-ownership of the destination line; the
  // caller guarantees alignment to the store width and calls fence() before returning.
  static constexpr bool kHasStream = true;
  static void streamF32(float* p, F v) { _mm512_stream_ps(p, v); }
  static void streamBF16(uint16_t* p, F v) { _mm256_stream_si256(reinterpret_cast<__m256i*>(p), packBF16(v)); }
  static void streamF16(uint16_t* p, F v) {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  static void streamCodes(int8_t* p, F v) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(p), _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(v)));
  }
  static void streamCodes(uint8_t* p, F v) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(p), _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(v)));
  }
  static void streamCodes(int16_t* p, F v) {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(_mm512_cvtps_epi32(v)));
  }
  static void streamCodes(uint16_t* p, F v) {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(_mm512_cvtps_epi32(v)));
  }
  static void fence() { _mm_sfence(); }
  static F loadCodes(const int8_t* p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  static F loadCodes(const uint8_t* p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  static F loadCodes(const int16_t* p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))));
  }
  static F loadCodes(const uint16_t* p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))));
  }
  // v is integer-valued and inside the code type's range, so truncating narrowing is exact.
  static void storeCodes(int8_t* p, F v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(v)));
  }
  static void storeCodes(uint8_t* p, F v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(v)));
  }
  static void storeCodes(int16_t* p, F v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(_mm512_cvtps_epi32(v)));
  }
  static void storeCodes(uint16_t* p, F v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(_mm512_cvtps_epi32(v)));
  }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F div(F a, F b) { return _mm512_div_ps(a, b); }
  static F roundEven(F a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static F clampNanLow(F v, F lo, F hi) { return _mm512_min_ps(_mm512_max_ps(v, lo), hi); }
  static M inRange(F v, F lo, F hi) {
    return _mm512_cmp_ps_mask(v, lo, _CMP_GE_OQ) & _mm512_cmp_ps_mask(v, hi, _CMP_LE_OQ);
  }
  static void storeMask(uint8_t* p, M m) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm_maskz_set1_epi8(m, 1));
  }
  static F pmin(F acc, F x) { return _mm512_mask_mov_ps(_mm512_min_ps(x, acc), _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x); }
  static F pmax(F acc, F x) { return _mm512_mask_mov_ps(_mm512_max_ps(x, acc), _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x); }
  static float reduceMin(F v) {
    if (_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q)) return NAN;
    return _mm512_reduce_min_ps(v);
  }
  static float reduceMax(F v) {
    if (_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q)) return NAN;
    return _mm512_reduce_max_ps(v);
  }
};
