// Memory side of the AVX-512 MX kernels: 32-element chunks in and out, code stores and the
// NaN-propagating block maxima. Included by mx_simd_avx512.h inside the avx512 namespace.
//
// A chunk is 32 consecutive elements held as two fp32 vectors (a, b). fp32 and fp16 keep the
// element order (a = elements 0..15, b = 16..31). bf16 is widened with unpacklo/unpackhi_epi16,
// one instruction per vector, which interleaves each 128-bit lane (a = elements 0-3, 8-11,
// 16-19, 24-27; b = the other four of each eight), and narrowed with packus_epi32, which undoes
// exactly that. Element arithmetic does not care about the order; per-column data of strided
// blocks (scales, random bits) follows it through chunkElement.

constexpr int64_t kChunk = 32;

// For helpers GCC would keep out of line once the loops call them from several places. Out of
// line, the word kernels cost a call per 32 elements with their parameters passed through memory
// (23 % of the time), and blockParams16's masks came back through memory, where a wider load of
// two of them missed store forwarding (10 %).
#define PT2Q_MX_INLINE inline __attribute__((always_inline))
#define PT2Q_MX_LAMBDA_INLINE __attribute__((always_inline))

// With AVX512_BF16 (the avx512_bf16 table) bf16 is narrowed by vcvtne2ps2bf16 (see
// narrowToBF16); the chunk order stays the same.
#if defined(PT2Q_VEC_AVX512_BF16)
constexpr bool kNativeBF16 = true;
#else
constexpr bool kNativeBF16 = false;
#endif

/// The element (0..31) of a chunk held in lane `lane` (0..15 of a, 16..31 of b).
template <FloatKind K>
constexpr int chunkElement(int lane) {
  if constexpr (K != FloatKind::kBF16) {
    return lane;
  } else {
    return ((lane % 16) / 4) * 8 + (lane / 16) * 4 + lane % 4;
  }
}

inline __mmask32 chunkMask(int64_t n) {
  return n >= 32 ? static_cast<__mmask32>(0xFFFFFFFFu) : static_cast<__mmask32>((1u << n) - 1u);
}

template <FloatKind K>
constexpr int64_t elemBytes() {
  return K == FloatKind::kF32 ? 4 : 2;
}

/// 32 bf16 or fp16 values widened to fp32 in chunk lane order.
template <FloatKind K>
inline void widenChunk(__m512i h, __m512& a, __m512& b) {
  if constexpr (K == FloatKind::kBF16) {
    a = _mm512_castsi512_ps(_mm512_unpacklo_epi16(_mm512_setzero_si512(), h));
    b = _mm512_castsi512_ps(_mm512_unpackhi_epi16(_mm512_setzero_si512(), h));
  } else {
    a = _mm512_cvtph_ps(_mm512_castsi512_si256(h));
    b = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1));
  }
}

/// Loads the chunk at p (lanes outside k read as +0).
template <FloatKind K>
inline void loadChunk(const char* p, __mmask32 k, __m512& a, __m512& b) {
  if constexpr (K == FloatKind::kF32) {
    if (k == 0xFFFFFFFFu) {
      a = _mm512_loadu_ps(p);
      b = _mm512_loadu_ps(p + 64);
    } else {
      a = _mm512_maskz_loadu_ps(static_cast<__mmask16>(k), p);
      b = _mm512_maskz_loadu_ps(static_cast<__mmask16>(k >> 16), p + 64);
    }
  } else {
    widenChunk<K>(k == 0xFFFFFFFFu ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi16(k, p), a, b);
  }
}

/// bf16 bits (round to nearest even) in the low half of each 32-bit lane. The kernels only
/// ever produce the canonical NaN 0x7FC00000, which this maps to 0x7FC0 like c10::BFloat16.
inline __m512i roundToBF16(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  return _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), lsb), 16);
}

/// 32 bf16 values of a chunk in element order. `native`: vcvtne2ps2bf16, exact only when no
/// value is an fp32 subnormal (it flushes them), which the caller knows from the block scales.
inline __m512i narrowToBF16(__m512 a, __m512 b, bool native) {
#if defined(PT2Q_VEC_AVX512_BF16)
  if (native) {
    // vcvtne2ps2bf16 concatenates a and b; one word permute restores the element order that
    // packus gives (element 8g + r sits in a's lane 4g + r for r < 4, else in b's 4g + r - 4).
    const __m512i order = _mm512_set_epi16(31, 30, 29, 28, 15, 14, 13, 12, 27, 26, 25, 24, 11, 10, 9, 8, 23, 22, 21, 20,
                                           7, 6, 5, 4, 19, 18, 17, 16, 3, 2, 1, 0);
    return _mm512_permutexvar_epi16(order, (__m512i)_mm512_cvtne2ps_pbh(b, a));
  }
#endif
  (void)native;
  return _mm512_packus_epi32(roundToBF16(a), roundToBF16(b));
}

/// Stores a chunk (lanes in k); streaming when asked, which needs p aligned to 64 bytes and a
/// full chunk. bf16_native: see narrowToBF16.
template <FloatKind K, bool Stream>
inline void storeChunk(char* p, __mmask32 k, __m512 a, __m512 b, bool bf16_native = false) {
  if constexpr (K == FloatKind::kF32) {
    if (k != 0xFFFFFFFFu) {
      _mm512_mask_storeu_ps(p, static_cast<__mmask16>(k), a);
      _mm512_mask_storeu_ps(p + 64, static_cast<__mmask16>(k >> 16), b);
    } else if constexpr (Stream) {
      _mm512_stream_ps(reinterpret_cast<float*>(p), a);
      _mm512_stream_ps(reinterpret_cast<float*>(p + 64), b);
    } else {
      _mm512_storeu_ps(p, a);
      _mm512_storeu_ps(p + 64, b);
    }
  } else {
    __m512i h;
    if constexpr (K == FloatKind::kBF16) {
      h = narrowToBF16(a, b, bf16_native);
    } else {
      h = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtps_ph(a, _MM_FROUND_TO_NEAREST_INT)),
                             _mm512_cvtps_ph(b, _MM_FROUND_TO_NEAREST_INT), 1);
    }
    if (k != 0xFFFFFFFFu) {
      _mm512_mask_storeu_epi16(p, k, h);
    } else if constexpr (Stream) {
      _mm512_stream_si512(reinterpret_cast<__m512i*>(p), h);
    } else {
      _mm512_storeu_si512(p, h);
    }
  }
}

/// One value in every lane of a chunk, e.g. the NaN of a poisoned block.
template <FloatKind K>
inline void fillChunk(char* p, __mmask32 k, float v) {
  const __m512 f = _mm512_set1_ps(v);
  storeChunk<K, false>(p, k, f, f, true);  // 0 and the canonical NaN narrow exactly
}

/// The codes of a chunk (int32 lanes, already masked to their width) as 32 16-bit words in
/// element order.
template <FloatKind K>
inline __m512i chunkWords(__m512i ca, __m512i cb) {
  if constexpr (K == FloatKind::kBF16) {
    return _mm512_packus_epi32(ca, cb);
  } else {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi32_epi16(ca)), _mm512_cvtepi32_epi16(cb), 1);
  }
}

/// Stores the first n (<= 32) codes of a chunk: one byte each, two bytes each (CodeT =
/// uint16_t), or packed (pack_bits, MxCall; n a whole number of groups): 4: element 2i in the
/// low half of byte i; 2: element 4i in bits 0-1 of byte i; 6: four codes per 3 bytes,
/// c0 | c1 << 6 | c2 << 12 | c3 << 18 little-endian. Full chunks at aligned addresses are
/// streamed when `stream` is set (byte and nibble codes).
template <typename CodeT>
inline void storeCodeWords(void* p, int64_t n, __m512i words, int32_t pack_bits, bool stream) {
  const uintptr_t at = reinterpret_cast<uintptr_t>(p);
  // As 32-bit lanes, words hold code pairs: even element low, odd element at bit 16.
  if (pack_bits == 2) {
    // pairs into 4 bits (low | high << 2), then pairs of pairs into a byte as 64-bit lanes
    const __m512i d = _mm512_or_si512(words, _mm512_srli_epi32(words, 14));
    const __m128i bytes = _mm512_cvtepi64_epi8(_mm512_or_si512(d, _mm512_srli_epi64(d, 28)));
    _mm_mask_storeu_epi8(p, static_cast<__mmask16>((1u << (n / 4)) - 1u), bytes);
  } else if (pack_bits == 6) {
    // pairs into 12 bits, pairs of pairs into 24 bits of a 64-bit lane, then 3 of each 4 bytes
    const __m512i d = _mm512_and_si512(_mm512_or_si512(words, _mm512_srli_epi32(words, 10)), _mm512_set1_epi32(0xFFF));
    const __m256i g = _mm512_cvtepi64_epi32(_mm512_or_si512(d, _mm512_srli_epi64(d, 20)));
    const __m256i b = _mm256_shuffle_epi8(g, _mm256_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1, 0, 1,
                                                              2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1));
    const int64_t nb = n / 4 * 3;  // bytes; 12 from each 128-bit half
    const int64_t lo = nb < 12 ? nb : 12;
    _mm_mask_storeu_epi8(p, static_cast<__mmask16>((1u << lo) - 1u), _mm256_castsi256_si128(b));
    if (nb > 12) {
      _mm_mask_storeu_epi8(static_cast<uint8_t*>(p) + 12, static_cast<__mmask16>((1u << (nb - 12)) - 1u),
                           _mm256_extracti128_si256(b, 1));
    }
  } else if (pack_bits == 4) {
    // As 32-bit lanes (even code low, odd code at bit 16): low | (high << 4) is v | (v >> 12).
    const __m128i bytes = _mm512_cvtepi32_epi8(_mm512_or_si512(words, _mm512_srli_epi32(words, 12)));
    if (n == 32 && stream && at % 16 == 0) {
      _mm_stream_si128(static_cast<__m128i*>(p), bytes);
    } else {
      _mm_mask_storeu_epi8(p, static_cast<__mmask16>((1u << (n / 2)) - 1u), bytes);
    }
  } else if constexpr (sizeof(CodeT) == 1) {
    const __m256i bytes = _mm512_cvtepi16_epi8(words);
    if (n == 32 && stream && at % 32 == 0) {
      _mm256_stream_si256(static_cast<__m256i*>(p), bytes);
    } else if (n == 32) {
      _mm256_storeu_si256(static_cast<__m256i*>(p), bytes);
    } else {
      _mm256_mask_storeu_epi8(p, chunkMask(n), bytes);
    }
  } else {
    if (n == 32 && stream && at % 64 == 0) {
      _mm512_stream_si512(static_cast<__m512i*>(p), words);
    } else {
      _mm512_mask_storeu_epi16(p, chunkMask(n), words);
    }
  }
}

/// Stores the codes of 16 consecutive chunks (512 elements) at p in whole 64-byte lines, so that
/// streaming stores never leave a line half written (a partial non-temporal line costs a read of
/// it at the memory controller).
template <typename CodeT>
inline void storeCodeGroup(void* p, const __m512i* words, int32_t pack_bits, bool stream) {
  if (pack_bits == 2 || pack_bits == 6) {
    for (int k = 0; k < 16; ++k) storeCodeWords<CodeT>(static_cast<uint8_t*>(p) + k * kChunk * pack_bits / 8, kChunk, words[k], pack_bits, false);
    return;
  }
  const bool nibbles = pack_bits == 4;
  const bool nt = stream && reinterpret_cast<uintptr_t>(p) % 64 == 0;
  auto line = [&](int q, __m512i v) {
    __m512i* at = static_cast<__m512i*>(p) + q;
    if (nt) _mm512_stream_si512(at, v); else _mm512_storeu_si512(at, v);
  };
  if (nibbles) {
    for (int q = 0; q < 4; ++q) {
      __m128i b[4];
      for (int i = 0; i < 4; ++i) {
        const __m512i w = words[4 * q + i];
        b[i] = _mm512_cvtepi32_epi8(_mm512_or_si512(w, _mm512_srli_epi32(w, 12)));
      }
      const __m256i lo = _mm256_inserti128_si256(_mm256_castsi128_si256(b[0]), b[1], 1);
      const __m256i hi = _mm256_inserti128_si256(_mm256_castsi128_si256(b[2]), b[3], 1);
      line(q, _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1));
    }
  } else if constexpr (sizeof(CodeT) == 1) {
    for (int q = 0; q < 8; ++q) {
      line(q, _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi16_epi8(words[2 * q])),
                                 _mm512_cvtepi16_epi8(words[2 * q + 1]), 1));
    }
  } else {
    for (int q = 0; q < 16; ++q) line(q, words[q]);
  }
}

// ---- block maxima -----------------------------------------------------------------------------
// |x| compared as integers: +Inf (exponent all ones, mantissa 0) is above every finite value and
// every NaN above +Inf, so an integer max is the NaN-propagating max of microxcaling's
// (x > m) || isnan(x), and a block holding NaN or Inf keeps exponent 255 (the NaN scale).

/// The raw |x| bits of a chunk folded to 16 lanes: fp32 bits, or 16-bit bits (bf16/fp16) in the
/// low half of each lane.
template <FloatKind K>
inline __m512i chunkAbsBits16(const char* p, __mmask32 k) {
  if constexpr (K == FloatKind::kF32) {
    __m512 a, b;
    loadChunk<K>(p, k, a, b);
    const __m512i m = _mm512_set1_epi32(0x7FFFFFFF);
    return _mm512_max_epu32(_mm512_and_si512(_mm512_castps_si512(a), m), _mm512_and_si512(_mm512_castps_si512(b), m));
  } else {
    const __m512i h = _mm512_and_si512(k == 0xFFFFFFFFu ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi16(k, p),
                                       _mm512_set1_epi16(0x7FFF));
    return _mm512_max_epu32(_mm512_and_si512(h, _mm512_set1_epi32(0xFFFF)), _mm512_srli_epi32(h, 16));
  }
}

/// fp32 values of 16 lanes of folded |x| bits.
template <FloatKind K>
inline __m512 absBitsToFloat(__m512i v) {
  if constexpr (K == FloatKind::kF32) {
    return _mm512_castsi512_ps(v);
  } else if constexpr (K == FloatKind::kBF16) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
  } else {
    return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(v));
  }
}

/// Lane i of the result is the max over the 16 lanes of v[i]: a transposing reduction, 45
/// instructions for 16 vectors instead of 16 horizontal reductions.
PT2Q_MX_INLINE __m512i transposeMax16(const __m512i* v) {
  __m512i t[8], u[4], w[2];
  for (int i = 0; i < 8; ++i) {
    t[i] = _mm512_max_epu32(_mm512_unpacklo_epi32(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_epi32(v[2 * i], v[2 * i + 1]));
  }
  for (int i = 0; i < 4; ++i) {
    u[i] = _mm512_max_epu32(_mm512_unpacklo_epi64(t[2 * i], t[2 * i + 1]), _mm512_unpackhi_epi64(t[2 * i], t[2 * i + 1]));
  }
  for (int i = 0; i < 2; ++i) {
    w[i] = _mm512_max_epu32(_mm512_shuffle_i32x4(u[2 * i], u[2 * i + 1], 0x88),
                            _mm512_shuffle_i32x4(u[2 * i], u[2 * i + 1], 0xDD));
  }
  return _mm512_max_epu32(_mm512_shuffle_i32x4(w[0], w[1], 0x88), _mm512_shuffle_i32x4(w[0], w[1], 0xDD));
}

/// Element offset and length of the contiguous blocks r0 .. r0 + nr - 1 (nr <= 16): one
/// division per group, not two per block (a 64-bit division costs as much as a block's elements).
struct BlockRuns16 {
  int64_t nr;
  int64_t begin[16];
  int64_t n[16];
};

inline void blockRuns16(const MxCall& c, int64_t r0, int64_t nr, BlockRuns16* out) {
  const int64_t nblocks = (c.len + c.block - 1) / c.block;
  int64_t o = r0 / nblocks, j = r0 % nblocks;
  out->nr = nr;
  for (int64_t k = 0; k < nr; ++k) {
    out->begin[k] = o * c.len + j * c.block;
    out->n[k] = std::min(c.block, c.len - j * c.block);
    if (++j == nblocks) {
      j = 0;
      ++o;
    }
  }
}

/// NaN-propagating max |x| of the blocks of `runs`, lane k for block k (0 past runs.nr). Full:
/// every block is `block` elements long, a multiple of 32, and block k starts at runs.begin[0] +
/// k * block (the axis length is a multiple of the block), so no masks and no per-block lookups.
#ifndef PT2Q_MX_PREFETCH_GROUPS
#define PT2Q_MX_PREFETCH_GROUPS 2
#endif
constexpr int64_t kPrefetchGroups = PT2Q_MX_PREFETCH_GROUPS;

/// Lane k: the NaN-propagating max |x| of the 32 elements at p + 32 k elements, k < 16 (the
/// common case of contiguousMaxima16), straight-line so that the 16 vectors stay in registers.
/// The hardware prefetcher alone leaves each group waiting a full memory latency (reads ran at
/// a third of the bandwidth), so the group after next is requested now.
template <FloatKind K>
PT2Q_MX_INLINE __m512 groupAbsMax16(const char* p) {
  constexpr int64_t es = elemBytes<K>();
  constexpr int64_t kGroupBytes = 16 * kChunk * es;
  for (int64_t off = 0; off < kGroupBytes; off += 64) _mm_prefetch(p + kPrefetchGroups * kGroupBytes + off, _MM_HINT_T0);
  __m512i v[16];
  for (int k = 0; k < 16; ++k) v[k] = chunkAbsBits16<K>(p + k * kChunk * es, ~0u);
  return absBitsToFloat<K>(transposeMax16(v));
}

template <FloatKind K, bool Full>
inline __m512 contiguousMaxima16(const char* x, const BlockRuns16& runs, int64_t block) {
  constexpr int64_t es = elemBytes<K>();
  if (Full && block == kChunk && runs.nr == 16) return groupAbsMax16<K>(x + runs.begin[0] * es);
  __m512i v[16];
  for (int64_t k = 0; k < 16; ++k) {
    v[k] = _mm512_setzero_si512();
    if (k >= runs.nr) continue;
    if constexpr (Full) {
      const char* p = x + (runs.begin[0] + k * block) * es;
      for (int64_t i = 0; i < block; i += kChunk) v[k] = _mm512_max_epu32(v[k], chunkAbsBits16<K>(p + i * es, ~0u));
    } else {
      const char* p = x + runs.begin[k] * es;
      const int64_t n = runs.n[k];
      for (int64_t i = 0; i < n; i += kChunk) v[k] = _mm512_max_epu32(v[k], chunkAbsBits16<K>(p + i * es, chunkMask(n - i)));
    }
  }
  return absBitsToFloat<K>(transposeMax16(v));
}

/// NaN-propagating max |x| as bf16 words (element order) of 32 bf16 columns [w, w + 32), masked
/// by k, over rows [l0, l1) of outer index o; prefetching as columnMaxima32.
inline __m512i columnMaxWords32(const char* x, const MxCall& c, int64_t o, int64_t l0, int64_t l1, int64_t w, __mmask32 k,
                                int64_t ahead) {
  __m512i mh = _mm512_setzero_si512();
  for (int64_t l = l0; l < l1; ++l) {
    const char* p = x + ((o * c.len + l) * c.inner + w) * 2;
    _mm_prefetch(p + ahead, _MM_HINT_T1);
    const __m512i h = k == 0xFFFFFFFFu ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi16(k, p);
    mh = _mm512_max_epu16(mh, _mm512_and_si512(h, _mm512_set1_epi16(0x7FFF)));
  }
  return mh;
}

/// NaN-propagating max |x| of 32 columns [w, w + 32) (lanes of chunk order, masked by k) over
/// rows [l0, l1) of outer index o; a and b receive the chunk's two halves. The same columns
/// `ahead` bytes further on (the next tile) are prefetched: the hardware prefetcher does not
/// follow this many strided rows, and without it the reads ran at a third of the bandwidth.
/// (Reading the tile row by row into accumulators in memory measured slower still.) Into L2,
/// not L1: a bf16 tile and the next fill L1, an fp32 tile alone does; first-axis mx_quantize
/// of 64 MiB on 2 threads measured 1.07-1.31x (2-core Zen 4, two runs of 3 rounds).
template <FloatKind K>
inline void columnMaxima32(const char* x, const MxCall& c, int64_t o, int64_t l0, int64_t l1, int64_t w, __mmask32 k,
                           __m512& a, __m512& b, int64_t ahead) {
  constexpr int64_t es = elemBytes<K>();
  if constexpr (K == FloatKind::kF32) {
    __m512i ma = _mm512_setzero_si512(), mb = _mm512_setzero_si512();
    const __m512i m = _mm512_set1_epi32(0x7FFFFFFF);
    for (int64_t l = l0; l < l1; ++l) {
      __m512 ra, rb;
      const char* p = x + ((o * c.len + l) * c.inner + w) * es;
      _mm_prefetch(p + ahead, _MM_HINT_T1);
      _mm_prefetch(p + ahead + 64, _MM_HINT_T1);
      loadChunk<K>(p, k, ra, rb);
      ma = _mm512_max_epu32(ma, _mm512_and_si512(_mm512_castps_si512(ra), m));
      mb = _mm512_max_epu32(mb, _mm512_and_si512(_mm512_castps_si512(rb), m));
    }
    a = _mm512_castsi512_ps(ma);
    b = _mm512_castsi512_ps(mb);
  } else {
    widenChunk<K>(columnMaxWords32(x, c, o, l0, l1, w, k, ahead), a, b);  // the same lane order as the elements
  }
}
