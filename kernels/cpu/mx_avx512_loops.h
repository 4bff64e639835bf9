// Loops of the AVX-512 MX kernels over block rows (see mx_microkernels.h for the layout).
// Included at the end of mx_simd_avx512.h.

// Contiguous blocks (the quantized axis is innermost): 16 blocks at a time, their maxima in one
// transposing reduction, their parameters in one vector step (and their scale bytes stored when
// `scales` is not null), then body(bp, k, begin, n) for block k of the 16, elements
// [begin, begin + n). Full: see contiguousMaxima16 (the common case, compiled without masks);
// then 16 blocks of exactly 32 elements starting at element `begin` first go to
// word_group(begin) (mx_words_group_avx512.h), then to group(bp, begin); either handles them all
// and returns true, or returns false, having written nothing, to leave them to the next.
template <FloatKind K, bool Full, typename WordGroup, typename Group, typename Body>
inline void forEachContiguousBlock(const char* x, const MxCall& c, int64_t rb, int64_t re, uint8_t* scales,
                                   WordGroup&& word_group, Group&& group, Body&& body) {
  BlockParams16 bp;
  BlockRuns16 runs;
  for (int64_t r0 = rb; r0 < re; r0 += 16) {
    const int64_t nr = std::min<int64_t>(16, re - r0);
    if constexpr (Full) {
      if (nr == 16 && c.block == kChunk && word_group(r0 * kChunk)) continue;
    }
    if constexpr (Full) {
      runs.nr = nr;
      runs.begin[0] = r0 * c.block;
    } else {
      blockRuns16(c, r0, nr, &runs);
    }
    blockParams16(contiguousMaxima16<K, Full>(x, runs, c.block), c, &bp);
    if (scales != nullptr) {
      _mm_mask_storeu_epi8(scales + r0, static_cast<__mmask16>((1u << nr) - 1u), _mm512_cvtepi32_epi8(bp.s));
    }
    if constexpr (Full) {
      if (nr == 16 && c.block == kChunk && group(bp, r0 * kChunk)) continue;
    }
    for (int64_t k = 0; k < nr; ++k) {
      if constexpr (Full) {
        body(bp, k, (r0 + k) * c.block, c.block);
      } else {
        body(bp, k, runs.begin[k], runs.n[k]);
      }
    }
  }
}

/// Whether the contiguous blocks of a call are Full (see contiguousMaxima16).
inline bool fullBlocks(const MxCall& c) {
  return c.len % c.block == 0 && c.block % kChunk == 0;
}

template <FloatKind K, bool Int, int R, bool Stream, bool Full>
void fakeQuantizeContiguousLoop(const char* x, char* y, int64_t rb, int64_t re, const MxCall& c) {
  constexpr int64_t es = elemBytes<K>();
  const ElemConsts kc = elemConsts(c);
  // 16 live blocks of 32: each block's parameters are a lane permute of the group's vectors.
  // bf16: the word kernels (mx_words_avx512.h) on fast blocks.
  const bool word_kernels = wordsApply<K, Int, R>(c);
  const WordConsts wc = word_kernels ? wordConsts(c, kc) : WordConsts{};
  WordParams16 wp;
  auto group = [&](const BlockParams16& bp, int64_t begin) {
    // flushed blocks need nothing: b makes them +0; groups of fast blocks took word_group
    if (R == 3 || bp.nan != 0) return false;
    const bool fast = !Int && R == 0 && kc.fast_fake && bp.fast == 0xFFFF;
    const __m512 av = _mm512_load_ps(bp.a), bv = _mm512_load_ps(bp.b), thrv = fast ? _mm512_load_ps(bp.thr) : av;
    const bool stream = Stream && reinterpret_cast<uintptr_t>(y + begin * es) % 64 == 0;
    const bool native = bp.normal_out == 0xFFFF;
    for (int k = 0; k < 16; ++k) {
      const __m512i lane = _mm512_set1_epi32(k);
      const __m512 a = _mm512_permutexvar_ps(lane, av), b = _mm512_permutexvar_ps(lane, bv);
      const int64_t at = (begin + k * kChunk) * es;
      __m512 va, vb;
      loadChunk<K>(x + at, ~0u, va, vb);
      __m512 qa, qb;
      if (fast) {
        const __m512 thr = _mm512_permutexvar_ps(lane, thrv);
        qa = fakeQuantizeFloatFast16(va, a, b, thr, kc);
        qb = fakeQuantizeFloatFast16(vb, a, b, thr, kc);
      } else {
        qa = fakeQuantize16<Int, R>(va, a, b, kc, _mm512_setzero_si512());
        qb = fakeQuantize16<Int, R>(vb, a, b, kc, _mm512_setzero_si512());
      }
      if (stream) {
        storeChunk<K, true>(y + at, ~0u, qa, qb, native);
      } else {
        storeChunk<K, false>(y + at, ~0u, qa, qb, native);
      }
    }
    return true;
  };
  auto word_group = [&](int64_t begin) PT2Q_MX_LAMBDA_INLINE {
    return word_kernels && fakeQuantizeWordGroup<R, Int, Stream>(x + begin * es, y + begin * es, c, wc);
  };
  forEachContiguousBlock<K, Full>(x, c, rb, re, nullptr, word_group, group, [&](const BlockParams16& bp, int64_t k,
                                                                                int64_t begin, int64_t n) {
    if (word_kernels && k == 0) wordParams16(bp, c, &wp);  // body runs k = 0, 1, ... for each group
    const char* xb = x + begin * es;
    char* yb = y + begin * es;
    if ((bp.dead >> k) & 1u) {
      const float fill = ((bp.nan >> k) & 1u) ? bitsToFloat(0x7FC00000u) : 0.0f;
      for (int64_t i = 0; i < n; i += kChunk) fillChunk<K>(yb + i * es, chunkMask(n - i), fill);
      return;
    }
    const __m512 a = _mm512_set1_ps(bp.a[k]);
    const __m512 b = _mm512_set1_ps(bp.b[k]);
    const bool fast = !Int && R == 0 && kc.fast_fake && ((bp.fast >> k) & 1u);
    const __m512 thr = fast ? _mm512_set1_ps(bp.thr[k]) : a;
    const bool stream = Stream && reinterpret_cast<uintptr_t>(yb) % 64 == 0;
    const bool native = (bp.normal_out >> k) & 1u;
    const bool on_words = word_kernels && ((bp.fast >> k) & 1u);
    const WordVecs wv = on_words ? blockWordVecs(wp, k) : WordVecs{};
    for (int64_t i = 0; i < n; i += kChunk) {
      const __mmask32 km = Full ? ~0u : chunkMask(n - i);
      if (on_words) {
        storeWordChunk(yb + i * es, km, fakeQuantizeWords<R, Int>(_mm512_maskz_loadu_epi16(km, xb + i * es), wv, wc), stream);
        continue;
      }
      __m512 va, vb;
      loadChunk<K>(xb + i * es, km, va, vb);
      __m512i ra = _mm512_setzero_si512(), rb2 = _mm512_setzero_si512();
      if constexpr (R == 3) chunkRandom<K>(c.random_key, static_cast<uint64_t>(begin + i), ra, rb2);
      __m512 qa, qb;
      if (fast) {
        qa = fakeQuantizeFloatFast16(va, a, b, thr, kc);
        qb = fakeQuantizeFloatFast16(vb, a, b, thr, kc);
      } else {
        qa = fakeQuantize16<Int, R>(va, a, b, kc, ra);
        qb = fakeQuantize16<Int, R>(vb, a, b, kc, rb2);
      }
      if (stream) {
        storeChunk<K, true>(yb + i * es, km, qa, qb, native);
      } else {
        storeChunk<K, false>(yb + i * es, km, qa, qb, native);
      }
    }
  });
  if constexpr (Stream) _mm_sfence();
}

// Parameters of the strided blocks of 256 columns (8 chunks) of block row (o, j), in chunk lane
// order; scale bytes written to `scales` when it is not null.
struct ColumnTile {
  static constexpr int64_t kWidth = 256;
  alignas(64) float a[kWidth];
  alignas(64) float b[kWidth];
  __mmask16 nan[kWidth / 16];
  __mmask16 dead[kWidth / 16];
  __mmask16 fast[kWidth / 16];  // see BlockParams16
  __mmask16 normal_out[kWidth / 16];
  alignas(64) int32_t k1[kWidth];
  alignas(64) float thr[kWidth];
  alignas(64) float pmul[kWidth];
  // The word kernels' parameters (WordParams16) in element order, and the dead lanes' mask in
  // element order, when `words` (bf16 float formats: wordsApply); where `table` (Fp4Table on),
  // whether each chunk's live lanes can take the table.
  bool words;
  bool table;
  bool all_words;  // every chunk of the tile takes the word path of mx_quantize
  alignas(64) uint16_t wk1[kWidth];
  alignas(64) uint16_t wthr[kWidth];
  alignas(64) uint16_t we1[kWidth];
  alignas(64) uint16_t whs[kWidth];
  alignas(64) uint16_t wb[kWidth];
  alignas(64) uint16_t wbase[kWidth];
  __mmask32 wdead[kWidth / 32];
  bool wtable[kWidth / 32];

  /// The word parameters of lanes [w, w + 32) from those of its two halves; order(lo, hi) puts
  /// the low words of two WordParams16 arrays in element order.
  template <typename Order>
  void setWords(int64_t w, const WordParams16 (&wp)[2], Order&& order) {
    _mm512_store_si512(wk1 + w, order(wp[0].k1, wp[1].k1));
    _mm512_store_si512(wthr + w, order(wp[0].thr, wp[1].thr));
    _mm512_store_si512(we1 + w, order(wp[0].e1, wp[1].e1));
    _mm512_store_si512(whs + w, order(wp[0].hs, wp[1].hs));
    _mm512_store_si512(wb + w, order(wp[0].b, wp[1].b));
    _mm512_store_si512(wbase + w, order(wp[0].base, wp[1].base));
  }

  WordVecs wordVecs(int64_t w) const {
    return {_mm512_load_si512(wk1 + w), _mm512_load_si512(wthr + w), _mm512_load_si512(we1 + w), _mm512_load_si512(whs + w),
            _mm512_load_si512(wb + w)};
  }
};

/// The words of 32 lanes held in chunk order as the low halves of two int32 vectors (WordParams16's
/// pairs), in element order.
inline __m512i chunkOrderWords(const int32_t* a, const int32_t* b) {
  const __m512i lo = _mm512_set1_epi32(0xFFFF);
  return _mm512_packus_epi32(_mm512_and_si512(_mm512_load_si512(a), lo), _mm512_and_si512(_mm512_load_si512(b), lo));
}

/// The words of 32 lanes held in element order as the low halves of two int32 vectors (lanes
/// 0-15, 16-31), in element order.
PT2Q_MX_INLINE __m512i elementOrderWords(__m512i lo, __m512i hi) {
  const __m512i even = _mm512_setr_epi32(0x00020000, 0x00060004, 0x000A0008, 0x000E000C, 0x00120010, 0x00160014,
                                         0x001A0018, 0x001E001C, 0x00220020, 0x00260024, 0x002A0028, 0x002E002C,
                                         0x00320030, 0x00360034, 0x003A0038, 0x003E003C);
  return _mm512_permutex2var_epi16(lo, even, hi);
}

/// The word kernels' parameters of 32 columns [w, w + 32) of a tile (at most nw live) from
/// their max |x| (a0: columns w to w + 15, a1: the next 16), and their scale bytes: the whole of
/// what the word path reads, without BlockParams16's fp32 vectors. False, having written
/// nothing, unless every column is fast (then columnTileParams's general step takes them).
PT2Q_MX_INLINE bool columnWordParams(__m512 a0, __m512 a1, const MxCall& c, int64_t w, int64_t nw, ColumnTile* t,
                                     uint8_t* scales) {
  const __m512i s0 = scaleBytes16(a0, c), s1 = scaleBytes16(a1, c);
  if ((fastBlocks16(s0, deadBlocks16(a0, s0, c), c) & fastBlocks16(s1, deadBlocks16(a1, s1, c), c)) != 0xFFFF) return false;
  WordParams16 wp[2];
  wordParams16(s0, _mm512_scalef_ps(_mm512_set1_ps(c.max_norm), _mm512_cvtepi32_ps(_mm512_sub_epi32(s0, _mm512_set1_epi32(127)))),
               true, c, &wp[0]);
  wordParams16(s1, _mm512_scalef_ps(_mm512_set1_ps(c.max_norm), _mm512_cvtepi32_ps(_mm512_sub_epi32(s1, _mm512_set1_epi32(127)))),
               true, c, &wp[1]);
  t->setWords(w, wp, [](const int32_t* lo, const int32_t* hi) {
    return elementOrderWords(_mm512_load_si512(lo), _mm512_load_si512(hi));
  });
  t->fast[w / 16] = t->fast[w / 16 + 1] = 0xFFFF;  // lane order does not matter: all ones
  t->dead[w / 16] = t->dead[w / 16 + 1] = 0;
  t->wdead[w / 32] = 0;
  t->wtable[w / 32] = fp4TableApplies(t->table, s0, 0xFFFF, c) && fp4TableApplies(t->table, s1, 0xFFFF, c);
  if (scales != nullptr) {
    _mm256_mask_storeu_epi8(scales, chunkMask(nw - w), _mm512_cvtepi16_epi8(elementOrderWords(s0, s1)));
  }
  return true;
}

template <FloatKind K>
void columnTileParams(const char* x, const MxCall& c, int64_t o, int64_t j, int64_t w0, int64_t nw,
                      ColumnTile* t, uint8_t* scales) {
  const int64_t l0 = j * c.block, l1 = std::min(c.len, l0 + c.block);
  const int64_t nblocks = (c.len + c.block - 1) / c.block;
  t->all_words = t->words;
  for (int64_t w = 0; w < nw; w += kChunk) {
    uint8_t* scales_at = scales == nullptr ? nullptr : scales + (o * nblocks + j) * c.inner + w0 + w;
    __m512 ma, mb;
    if constexpr (K == FloatKind::kBF16) {
      const __m512i mh = columnMaxWords32(x, c, o, l0, l1, w0 + w, chunkMask(nw - w), ColumnTile::kWidth * 2);
      if (t->words) {
        const __m512 a0 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(mh)), 16));
        const __m512 a1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(mh, 1)), 16));
        if (columnWordParams(a0, a1, c, w, nw, t, scales_at)) continue;
      }
      widenChunk<K>(mh, ma, mb);  // the same lane order as the elements
    } else {
      columnMaxima32<K>(x, c, o, l0, l1, w0 + w, chunkMask(nw - w), ma, mb, ColumnTile::kWidth * elemBytes<K>());
      if (K == FloatKind::kF32 && t->words && columnWordParams(ma, mb, c, w, nw, t, scales_at)) continue;
    }
    BlockParams16 bp[2];
    blockParams16(ma, c, &bp[0]);
    blockParams16(mb, c, &bp[1]);
    for (int h = 0; h < 2; ++h) {
      std::memcpy(t->a + w + 16 * h, bp[h].a, sizeof(bp[h].a));
      std::memcpy(t->b + w + 16 * h, bp[h].b, sizeof(bp[h].b));
      t->nan[w / 16 + h] = bp[h].nan;
      t->dead[w / 16 + h] = bp[h].dead;
      t->fast[w / 16 + h] = bp[h].fast;
      t->normal_out[w / 16 + h] = bp[h].normal_out;
      if (!c.is_int) {
        std::memcpy(t->k1 + w + 16 * h, bp[h].k1, sizeof(bp[h].k1));
        std::memcpy(t->thr + w + 16 * h, bp[h].thr, sizeof(bp[h].thr));
        std::memcpy(t->pmul + w + 16 * h, bp[h].pmul, sizeof(bp[h].pmul));
      }
    }
    if (t->words) {
      WordParams16 wp[2];
      wordParams16(bp[0], c, &wp[0]);
      wordParams16(bp[1], c, &wp[1]);
      // the two halves of bp in chunk lane order (bf16: interleaved, see widenChunk) to element order
      auto words = [&](const int32_t* lo, const int32_t* hi) {
        if constexpr (K == FloatKind::kBF16) return chunkOrderWords(lo, hi);
        return elementOrderWords(_mm512_load_si512(lo), _mm512_load_si512(hi));
      };
      t->setWords(w, wp, words);
      const __m512i one = _mm512_set1_epi32(1);
      alignas(64) int32_t dead[2][16];
      _mm512_store_si512(dead[0], _mm512_maskz_mov_epi32(bp[0].dead, one));
      _mm512_store_si512(dead[1], _mm512_maskz_mov_epi32(bp[1].dead, one));
      const __m512i dw = words(dead[0], dead[1]);
      t->wdead[w / 32] = _mm512_test_epi16_mask(dw, dw);
      t->wtable[w / 32] = fp4TableApplies(t->table, bp[0].s, static_cast<__mmask16>(~bp[0].dead), c) &&
                          fp4TableApplies(t->table, bp[1].s, static_cast<__mmask16>(~bp[1].dead), c);
    }
    t->all_words = t->all_words && ((bp[0].fast | bp[0].dead) & (bp[1].fast | bp[1].dead)) == 0xFFFF;
    // Scale bytes leave in vector form: reading them back from memory right after a vector
    // store stalls store forwarding, which cost more than the whole element pass.
    if (scales_at != nullptr) {
      _mm256_mask_storeu_epi8(scales_at, chunkMask(nw - w), _mm512_cvtepi16_epi8(chunkWords<K>(bp[0].s, bp[1].s)));
    }
  }
}

// Strided blocks: each of `inner` columns is a block. Columns go in tiles of 256 so that every
// pass reads whole cache lines of each row; each lane has its own block parameters. Calls
// body(t, row, w, n, a, b, ra, rb, h) for every chunk of columns [w, w + n) of element row `row`
// (flat index of the tile's first column), with the chunk loaded (h: its 16-bit elements as
// loaded, element order; fp32: topWords where `words`, else unused) and, for stochastic
// rounding, its random bits. `words`: the tiles carry the word kernels' parameters; `table`:
// and which chunks can take Fp4Table.
// Each row of a tile first goes to row_body(t, row, nw), which handles all its chunks and
// returns true, or returns false, having written nothing, to leave them to body.
template <FloatKind K, int R, typename RowBody, typename Body>
inline void forEachColumnChunk(const char* x, const MxCall& c, int64_t rb, int64_t re, uint8_t* scales, bool words,
                               bool table, RowBody&& row_body, Body&& body) {
  constexpr int64_t es = elemBytes<K>();
  const int64_t nblocks = (c.len + c.block - 1) / c.block;
  ColumnTile t;
  t.words = words;
  t.table = table;
  for (int64_t r = rb; r < re; ++r) {
    const int64_t o = r / nblocks, j = r % nblocks;
    const int64_t l0 = j * c.block, l1 = std::min(c.len, l0 + c.block);
    for (int64_t w0 = 0; w0 < c.inner; w0 += ColumnTile::kWidth) {
      const int64_t nw = std::min(ColumnTile::kWidth, c.inner - w0);
      columnTileParams<K>(x, c, o, j, w0, nw, &t, scales);
      for (int64_t l = l0; l < l1; ++l) {
        const int64_t row = (o * c.len + l) * c.inner + w0;
        if (row_body(t, row, nw)) {
          for (int64_t b = 0; b < nw * es; b += 64) _mm_prefetch(x + (row + ColumnTile::kWidth) * es + b, _MM_HINT_T1);
          continue;
        }
        for (int64_t w = 0; w < nw; w += kChunk) {
          // The next tile's lines of this row, into L2: 32 row streams at once outrun the
          // hardware prefetcher. On the 2-core Zen 5 VM this made first-axis mx_quantize 1.5x
          // (fp32) and 1.1x (bf16) faster, and fake-quantize 1.1x (A/B in one session).
          for (int64_t b = 0; b < kChunk * es; b += 64) {
            _mm_prefetch(x + (row + w + ColumnTile::kWidth) * es + b, _MM_HINT_T1);
          }
          __m512 va, vb;
          __m512i h = _mm512_setzero_si512();
          if constexpr (K == FloatKind::kF32) {
            loadChunk<K>(x + (row + w) * es, chunkMask(nw - w), va, vb);
            if (words) h = topWords(va, vb);
          } else {
            h = _mm512_maskz_loadu_epi16(chunkMask(nw - w), x + (row + w) * es);
            widenChunk<K>(h, va, vb);
          }
          __m512i ra = _mm512_setzero_si512(), rb2 = _mm512_setzero_si512();
          if constexpr (R == 3) chunkRandom<K>(c.random_key, static_cast<uint64_t>(row + w), ra, rb2);
          body(t, row, w, std::min(kChunk, nw - w), va, vb, ra, rb2, h);
        }
      }
    }
  }
}

template <FloatKind K, bool Int, int R, bool Stream>
void fakeQuantizeColumnsLoop(const char* x, char* y, int64_t rb, int64_t re, const MxCall& c) {
  constexpr int64_t es = elemBytes<K>();
  const ElemConsts kc = elemConsts(c);
  const __m512 vnan = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FC00000));
  // integers stay on fp32 lanes here: on words they measured 0.9x (2-core Zen 4)
  const bool word_kernels = !Int && wordsApply<K, Int, R>(c);
  const WordConsts wc = word_kernels ? wordConsts(c, kc) : WordConsts{};
  forEachColumnChunk<K, R>(x, c, rb, re, nullptr, word_kernels, false,
                           [](const ColumnTile&, int64_t, int64_t) { return false; },
                           [&](const ColumnTile& t, int64_t row, int64_t w, int64_t n, __m512 va, __m512 vb,
                               __m512i ra, __m512i rb2, __m512i h) {
    if (word_kernels && (t.fast[w / 16] & t.fast[w / 16 + 1]) == 0xFFFF) {
      char* out = y + (row + w) * es;
      storeWordChunk(out, chunkMask(n), fakeQuantizeWords<R, Int>(h, t.wordVecs(w), wc),
                     Stream && reinterpret_cast<uintptr_t>(out) % 64 == 0);
      return;
    }
    __m512 qa = fakeQuantize16<Int, R>(va, _mm512_load_ps(t.a + w), _mm512_load_ps(t.b + w), kc, ra);
    __m512 qb = fakeQuantize16<Int, R>(vb, _mm512_load_ps(t.a + w + 16), _mm512_load_ps(t.b + w + 16), kc, rb2);
    qa = _mm512_mask_mov_ps(qa, t.nan[w / 16], vnan);
    qb = _mm512_mask_mov_ps(qb, t.nan[w / 16 + 1], vnan);
    char* out = y + (row + w) * es;
    const bool native = (t.normal_out[w / 16] & t.normal_out[w / 16 + 1]) == 0xFFFF;
    if (Stream && reinterpret_cast<uintptr_t>(out) % 64 == 0) {
      storeChunk<K, true>(out, chunkMask(n), qa, qb, native);
    } else {
      storeChunk<K, false>(out, chunkMask(n), qa, qb, native);
    }
  });
  if constexpr (Stream) _mm_sfence();
}

template <FloatKind K, int R, bool Stream>
void fakeQuantizeContiguousSimd(const void* x, void* y, int64_t rb, int64_t re, const MxCall& c) {
  const char* xc = static_cast<const char*>(x);
  char* yc = static_cast<char*>(y);
  if (fullBlocks(c)) {
    if (c.is_int) return fakeQuantizeContiguousLoop<K, true, R, Stream, true>(xc, yc, rb, re, c);
    return fakeQuantizeContiguousLoop<K, false, R, Stream, true>(xc, yc, rb, re, c);
  }
  if (c.is_int) return fakeQuantizeContiguousLoop<K, true, R, Stream, false>(xc, yc, rb, re, c);
  fakeQuantizeContiguousLoop<K, false, R, Stream, false>(xc, yc, rb, re, c);
}

template <FloatKind K, int R, bool Stream>
void fakeQuantizeColumnsSimd(const void* x, void* y, int64_t rb, int64_t re, const MxCall& c) {
  const char* xc = static_cast<const char*>(x);
  char* yc = static_cast<char*>(y);
  if (c.is_int) return fakeQuantizeColumnsLoop<K, true, R, Stream>(xc, yc, rb, re, c);
  fakeQuantizeColumnsLoop<K, false, R, Stream>(xc, yc, rb, re, c);
}

// ---- mx_quantize: codes and scale bytes instead of values ---------------------------------------

template <FloatKind K, bool Int, int R, typename CodeT, bool Full>
void quantizeContiguousLoop(const char* x, void* codes, uint8_t* scales, int64_t rb, int64_t re, const MxCall& c) {
  constexpr int64_t es = elemBytes<K>();
  const ElemConsts kc = elemConsts(c);
  // 16 live blocks of 32 (float formats: all on the fast path): parameters by lane permutes.
  const bool word_kernels = quantizeWordsApply<K, Int, R>(c);  // mx_words_avx512.h
  const WordConsts wc = word_kernels ? wordConsts(c, kc) : WordConsts{};
  const Fp4Table fp4 = word_kernels ? fp4Table(c) : Fp4Table{};
  WordParams16 wp;
  auto group = [&](const BlockParams16& bp, int64_t begin) {
    // word_kernels: a group of fast blocks took word_group
    if (R == 3 || bp.dead != 0 || (!Int && bp.fast != 0xFFFF) || word_kernels) return false;
    const __m512 av = _mm512_load_ps(bp.a), thrv = _mm512_load_ps(bp.thr), pmulv = _mm512_load_ps(bp.pmul);
    const __m512i k1v = _mm512_load_si512(bp.k1);
    __m512i words[16];
    for (int k = 0; k < 16; ++k) {
      const __m512i lane = _mm512_set1_epi32(k);
      __m512 va, vb;
      loadChunk<K>(x + (begin + k * kChunk) * es, ~0u, va, vb);
      if constexpr (Int) {
        const __m512 a = _mm512_permutexvar_ps(lane, av);
        words[k] = chunkWords<K>(encode16<Int, R>(va, a, kc, _mm512_setzero_si512()),
                                 encode16<Int, R>(vb, a, kc, _mm512_setzero_si512()));
      } else {
        const __m512i k1 = _mm512_permutexvar_epi32(lane, k1v);
        const __m512 thr = _mm512_permutexvar_ps(lane, thrv), pmul = _mm512_permutexvar_ps(lane, pmulv);
        words[k] = chunkWords<K>(encodeFloatFast16<R>(va, k1, thr, pmul, kc), encodeFloatFast16<R>(vb, k1, thr, pmul, kc));
      }
    }
    storeCodeGroup<CodeT>(codeAt<CodeT>(codes, begin, c.pack_bits), words, c.pack_bits, c.stream_stores);
    return true;
  };
  auto word_group = [&](int64_t begin) PT2Q_MX_LAMBDA_INLINE {
    return word_kernels &&
           quantizeWordGroup<K, R, Int, CodeT>(x + begin * es, codeAt<CodeT>(codes, begin, c.pack_bits), scales + begin / kChunk, c, wc,
                                       fp4);
  };
  forEachContiguousBlock<K, Full>(x, c, rb, re, scales, word_group, group, [&](const BlockParams16& bp, int64_t k,
                                                                               int64_t begin, int64_t n) {
    const bool dead = (bp.dead >> k) & 1u;  // NaN and flushed blocks store code 0
    const bool fast = !Int && R != 3 && ((bp.fast >> k) & 1u);
    const __m512 a = _mm512_set1_ps(bp.a[k]);
    const __m512i k1 = _mm512_set1_epi32(bp.k1[k]);
    const __m512 thr = _mm512_set1_ps(bp.thr[k]), pmul = _mm512_set1_ps(bp.pmul[k]);
    if (word_kernels && k == 0) wordParams16(bp, c, &wp);  // body runs k = 0, 1, ... for each group
    const WordVecs wv = word_kernels && fast ? blockWordVecs(wp, k) : WordVecs{};
    for (int64_t i = 0; i < n; i += kChunk) {
      __m512i words = _mm512_setzero_si512();
      if (!dead) {
        const __mmask32 km = Full ? ~0u : chunkMask(n - i);
        __m512 va, vb;
        if (word_kernels && fast) {
          words = encodeWords<R, Int>(loadWords<K>(x + (begin + i) * es, km), wv, wc);
        } else if (fast) {
          loadChunk<K>(x + (begin + i) * es, km, va, vb);
          words = chunkWords<K>(encodeFloatFast16<R>(va, k1, thr, pmul, kc), encodeFloatFast16<R>(vb, k1, thr, pmul, kc));
        } else {
          loadChunk<K>(x + (begin + i) * es, km, va, vb);
          __m512i ra = _mm512_setzero_si512(), rb2 = _mm512_setzero_si512();
          if constexpr (R == 3) chunkRandom<K>(c.random_key, static_cast<uint64_t>(begin + i), ra, rb2);
          words = chunkWords<K>(encode16<Int, R>(va, a, kc, ra), encode16<Int, R>(vb, a, kc, rb2));
        }
      }
      storeCodeWords<CodeT>(codeAt<CodeT>(codes, begin + i, c.pack_bits), Full ? kChunk : std::min(kChunk, n - i), words,
                            c.pack_bits, c.stream_stores);
    }
  });
  if (c.stream_stores) _mm_sfence();
}

template <FloatKind K, bool Int, int R, typename CodeT>
void quantizeColumnsLoop(const char* x, void* codes, uint8_t* scales, int64_t rb, int64_t re, const MxCall& c) {
  const ElemConsts kc = elemConsts(c);
  const bool word_kernels = !Int && quantizeWordsApply<K, Int, R>(c);  // see fakeQuantizeColumnsLoop
  const WordConsts wc = word_kernels ? wordConsts(c, kc) : WordConsts{};
  const Fp4Table fp4 = word_kernels ? fp4Table(c) : Fp4Table{};
  constexpr int64_t es = elemBytes<K>();
  // A row of a tile whose chunks all take the word path, 4 chunks at a time, its codes stored as
  // whole 64-byte lines (nibbles or bytes) as the word groups do.
  const bool lines = c.pack_bits == 4 || (c.pack_bits == 0 && sizeof(CodeT) == 1);
  // the codes of chunk w of a tile on the word path, words h (dead lanes: code 0)
  auto wordCodes = [&](const ColumnTile& t, int64_t w, __m512i h) PT2Q_MX_LAMBDA_INLINE {
    const __m512i code = t.wtable[w / 32] ? encodeFp4Table(h, _mm512_load_si512(t.wbase + w), fp4)
                                          : encodeWords<R, Int>(h, t.wordVecs(w), wc);
    return _mm512_maskz_mov_epi16(~t.wdead[w / 32], code);
  };
  auto row_body = [&](const ColumnTile& t, int64_t row, int64_t nw) PT2Q_MX_LAMBDA_INLINE {
    if (!word_kernels || !lines || !t.all_words || nw % (4 * kChunk) != 0) return false;
    auto* out = static_cast<uint8_t*>(codeAt<CodeT>(codes, row, c.pack_bits));
    const bool stream = c.stream_stores && reinterpret_cast<uintptr_t>(out) % 64 == 0;
    auto encode = [&](int64_t w) PT2Q_MX_LAMBDA_INLINE {
      return wordCodes(t, w, loadWords<K>(x + (row + w) * es, ~0u));
    };
    for (int64_t w = 0; w < nw; w += 4 * kChunk) {
      if (c.pack_bits == 4) {
        storeLine(out + w / 2, nibbleLine(encode(w), encode(w + 32), encode(w + 64), encode(w + 96)), stream);
      } else {
        storeLine(out + w, byteLine(encode(w), encode(w + 32)), stream);
        storeLine(out + w + 64, byteLine(encode(w + 64), encode(w + 96)), stream);
      }
    }
    return true;
  };
  forEachColumnChunk<K, R>(x, c, rb, re, scales, word_kernels, fp4.on, row_body,
                           [&](const ColumnTile& t, int64_t row, int64_t w, int64_t n, __m512 va, __m512 vb,
                               __m512i ra, __m512i rb2, __m512i h) {
    if (word_kernels && ((t.fast[w / 16] | t.dead[w / 16]) & (t.fast[w / 16 + 1] | t.dead[w / 16 + 1])) == 0xFFFF) {
      storeCodeWords<CodeT>(codeAt<CodeT>(codes, row + w, c.pack_bits), n, wordCodes(t, w, h), c.pack_bits,
                            c.stream_stores);
      return;
    }
    // Dead lanes store code 0; a vector whose live lanes are all fast takes the fast path.
    auto codes16 = [&](__m512 v, int64_t at, __m512i rnd) {
      const __mmask16 live = static_cast<__mmask16>(~t.dead[at / 16]);
      if (!Int && R != 3 && (t.fast[at / 16] | t.dead[at / 16]) == 0xFFFF) {
        return _mm512_maskz_mov_epi32(live, encodeFloatFast16<R>(v, _mm512_load_si512(t.k1 + at),
                                                                 _mm512_load_ps(t.thr + at), _mm512_load_ps(t.pmul + at), kc));
      }
      return _mm512_maskz_mov_epi32(live, encode16<Int, R>(v, _mm512_load_ps(t.a + at), kc, rnd));
    };
    const __m512i ca = codes16(va, w, ra);
    const __m512i cb = codes16(vb, w + 16, rb2);
    storeCodeWords<CodeT>(codeAt<CodeT>(codes, row + w, c.pack_bits), n, chunkWords<K>(ca, cb), c.pack_bits,
                          c.stream_stores);
  });
  if (c.stream_stores) _mm_sfence();
}

template <FloatKind K, int R, typename CodeT>
void quantizeSimd(const void* x, void* codes, uint8_t* scales, int64_t rb, int64_t re, const MxCall& c) {
  const char* xc = static_cast<const char*>(x);
  if (c.inner != 1) {
    if (c.is_int) return quantizeColumnsLoop<K, true, R, CodeT>(xc, codes, scales, rb, re, c);
    return quantizeColumnsLoop<K, false, R, CodeT>(xc, codes, scales, rb, re, c);
  }
  if (fullBlocks(c)) {
    if (c.is_int) return quantizeContiguousLoop<K, true, R, CodeT, true>(xc, codes, scales, rb, re, c);
    return quantizeContiguousLoop<K, false, R, CodeT, true>(xc, codes, scales, rb, re, c);
  }
  if (c.is_int) return quantizeContiguousLoop<K, true, R, CodeT, false>(xc, codes, scales, rb, re, c);
  quantizeContiguousLoop<K, false, R, CodeT, false>(xc, codes, scales, rb, re, c);
}
