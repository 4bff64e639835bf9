// The word kernels (mx_words_avx512.h) on 16 contiguous blocks of 32 elements at a time, the
// common case along the last axis: bf16, and fp32 for mx_quantize (quantizeWordsApply).
// Included by mx_simd_avx512.h after mx_words_avx512.h.
//
// The general loop (forEachContiguousBlock) widens each block to fp32 lanes for its maximum,
// computes every fp32-lane parameter (BlockParams16) and gathers the codes of 16 blocks in a
// stack array for storeCodeGroup. A group whose blocks all take the word kernels needs none of
// that: its maxima are reduced as 16-bit words (bf16), its parameters come from the scale bytes
// alone, and its codes are packed in registers into whole 64-byte lines. A group with a NaN,
// flushed or tiny-scale block returns false, having written nothing, and the general loop
// takes it.

/// Lane k: max |x| as bf16 bits (integer order: NaN above +Inf above every finite value) of the
/// 32 bf16 elements at p + 64 k, k < 16. A transposing reduction on words: four unpack levels
/// leave block 8i + w in word w of every 128-bit lane of v[i], two lane shuffles finish.
PT2Q_MX_INLINE __m512i groupMaxWords16(const char* p) {
  // the group after next requested now, as contiguousMaxima16 does
  for (int64_t off = 0; off < 1024; off += 64) _mm_prefetch(p + kPrefetchGroups * 1024 + off, _MM_HINT_T0);
  const __m512i abs = _mm512_set1_epi16(0x7FFF);
  auto load = [&](int k) { return _mm512_and_si512(_mm512_loadu_si512(p + 64 * k), abs); };
  __m512i t[8], u[4], v[2];
  for (int i = 0; i < 8; ++i) {
    const __m512i a = load(2 * i), b = load(2 * i + 1);
    t[i] = _mm512_max_epu16(_mm512_unpacklo_epi16(a, b), _mm512_unpackhi_epi16(a, b));
  }
  for (int i = 0; i < 4; ++i) {
    u[i] = _mm512_max_epu16(_mm512_unpacklo_epi32(t[2 * i], t[2 * i + 1]), _mm512_unpackhi_epi32(t[2 * i], t[2 * i + 1]));
  }
  for (int i = 0; i < 2; ++i) {
    v[i] = _mm512_max_epu16(_mm512_unpacklo_epi64(u[2 * i], u[2 * i + 1]), _mm512_unpackhi_epi64(u[2 * i], u[2 * i + 1]));
  }
  // lanes: v0 (l0 | l1), v0 (l2 | l3), v1 (l0 | l1), v1 (l2 | l3); then blocks 0-7 | 8-15
  const __m512i w = _mm512_max_epu16(_mm512_shuffle_i32x4(v[0], v[1], 0x88), _mm512_shuffle_i32x4(v[0], v[1], 0xDD));
  const __m512i y = _mm512_max_epu16(_mm512_shuffle_i32x4(w, w, 0x88), _mm512_shuffle_i32x4(w, w, 0xDD));
  return _mm512_cvtepu16_epi32(_mm512_castsi512_si256(y));
}

/// Lane k: the NaN-propagating max |x| (fp32) of the 32 elements at p + 32 k elements, k < 16.
template <FloatKind K>
PT2Q_MX_INLINE __m512 groupMax16(const char* p) {
  if constexpr (K == FloatKind::kBF16) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(groupMaxWords16(p), 16));
  } else {
    return groupAbsMax16<K>(p);
  }
}

/// The scale bytes of a group from its maxima, and whether all 16 blocks are fast.
PT2Q_MX_INLINE bool groupScaleBytes16(__m512 amax, const MxCall& c, __m512i* sv) {
  *sv = scaleBytes16(amax, c);
  return fastBlocks16(*sv, deadBlocks16(amax, *sv, c), c) == 0xFFFF;
}

/// Stores a 64-byte line, streaming when asked (p then 64-byte aligned).
PT2Q_MX_INLINE void storeLine(void* p, __m512i v, bool stream) {
  if (stream) {
    _mm512_stream_si512(static_cast<__m512i*>(p), v);
  } else {
    _mm512_storeu_si512(p, v);
  }
}

/// Stores the 32 words of a chunk at p, lanes in k; a full chunk as storeLine does.
PT2Q_MX_INLINE void storeWordChunk(void* p, __mmask32 k, __m512i v, bool stream) {
  if (k != 0xFFFFFFFFu) {
    _mm512_mask_storeu_epi16(p, k, v);
  } else {
    storeLine(p, v, stream);
  }
}

/// Codes of 4 chunks (words, each < 16) as the 64 bytes of their nibbles: vpmaddwd makes each
/// pair one dword (even + 16 odd), two packs narrow the dwords to bytes, which leaves 128-bit
/// lane l holding dwords l of chunks 0-3; one dword permute puts the chunks back in order.
PT2Q_MX_INLINE __m512i nibbleLine(__m512i w0, __m512i w1, __m512i w2, __m512i w3) {
  const __m512i pair = _mm512_set1_epi32(0x00100001);
  const __m512i p01 = _mm512_packus_epi32(_mm512_madd_epi16(w0, pair), _mm512_madd_epi16(w1, pair));
  const __m512i p23 = _mm512_packus_epi32(_mm512_madd_epi16(w2, pair), _mm512_madd_epi16(w3, pair));
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  return _mm512_permutexvar_epi32(order, _mm512_packus_epi16(p01, p23));
}

/// Codes of 2 chunks (words, each < 256) as 64 bytes: a pack leaves 128-bit lane l holding
/// qwords l of both chunks; one qword permute puts them back in order.
PT2Q_MX_INLINE __m512i byteLine(__m512i w0, __m512i w1) {
  return _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7), _mm512_packus_epi16(w0, w1));
}

/// Stores the codes of 16 chunks, encode(k) the words of chunk k, at the group's first code in
/// whole 64-byte lines (streamed when asked), or per chunk for 2-, 6- and 16-bit codes.
template <typename CodeT, typename Encode>
PT2Q_MX_INLINE void storeGroupCodes(void* codes, const MxCall& c, Encode&& encode) {
  const bool stream = c.stream_stores && reinterpret_cast<uintptr_t>(codes) % 64 == 0;
  auto* out = static_cast<uint8_t*>(codes);
  if (c.pack_bits == 4) {
    for (int k = 0; k < 16; k += 4) storeLine(out + 16 * k, nibbleLine(encode(k), encode(k + 1), encode(k + 2), encode(k + 3)), stream);
  } else if (c.pack_bits != 0 || sizeof(CodeT) != 1) {  // 2- and 6-bit codes
    for (int k = 0; k < 16; ++k) storeCodeWords<CodeT>(codeAt<CodeT>(codes, 32 * k, c.pack_bits), kChunk, encode(k), c.pack_bits, false);
  } else {
    for (int k = 0; k < 16; k += 2) storeLine(out + 32 * k, byteLine(encode(k), encode(k + 1)), stream);
  }
}

/// mx_quantize of the 16 blocks of 32 elements (bf16, or fp32 through topWords) at x: codes at
/// `codes` (the group's first code), scale bytes at `scales`. False, with nothing written,
/// unless every block is fast.
template <FloatKind K, int R, bool Int, typename CodeT>
PT2Q_MX_INLINE bool quantizeWordGroup(const char* x, void* codes, uint8_t* scales, const MxCall& c,
                                      const WordConsts& wc, const Fp4Table& fp4) {
  __m512i sv;
  if (!groupScaleBytes16(groupMax16<K>(x), c, &sv)) return false;
  WordParams16 wp;
  wordParams16(sv, _mm512_setzero_ps(), false, c, &wp);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(scales), _mm512_cvtepi32_epi8(sv));
  const bool table = fp4TableApplies(fp4.on, sv, 0xFFFF, c);
  storeGroupCodes<CodeT>(codes, c, [&](int k) PT2Q_MX_LAMBDA_INLINE {
    const __m512i xk = loadWords<K>(x + k * kChunk * elemBytes<K>(), ~0u);
    if (table) return encodeFp4Table(xk, _mm512_set1_epi32(wp.base[k]), fp4);
    return encodeWords<R, Int>(xk, blockWordVecs(wp, k), wc);
  });
  return true;
}

/// mx_fake_quantize of the 16 blocks of 32 bf16 elements at x into y. False, with nothing
/// written, unless every block is fast.
template <int R, bool Int, bool Stream>
PT2Q_MX_INLINE bool fakeQuantizeWordGroup(const char* x, char* y, const MxCall& c, const WordConsts& wc) {
  __m512i sv;
  if (!groupScaleBytes16(groupMax16<FloatKind::kBF16>(x), c, &sv)) return false;
  const __m512 b = _mm512_scalef_ps(_mm512_set1_ps(c.max_norm), _mm512_cvtepi32_ps(_mm512_sub_epi32(sv, _mm512_set1_epi32(127))));
  WordParams16 wp;
  wordParams16(sv, b, true, c, &wp);
  const bool stream = Stream && reinterpret_cast<uintptr_t>(y) % 64 == 0;
  for (int k = 0; k < 16; ++k) {
    storeLine(y + 64 * k, fakeQuantizeWords<R, Int>(_mm512_loadu_si512(x + 64 * k), blockWordVecs(wp, k), wc), stream);
  }
  return true;
}
