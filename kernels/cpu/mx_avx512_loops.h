// Loops of the AVX-512 MX kernels over block rows (see mx_microkernels.h for the layout).
// Included at the end of mx_simd_avx512.h.

// Contiguous blocks (the quantized axis is innermost): 16 blocks at a time, their maxima in one
// transposing reduction, their parameters in one vector step (and their scale bytes stored when
// `scales` is not null), then body(bp, k, begin, n) for block k of the 16, elements
// [begin, begin + n).
template <FloatKind K, typename Body>
inline void forEachContiguousBlock(const char* x, const MxCall& c, int64_t rb, int64_t re, uint8_t* scales,
                                   Body&& body) {
  BlockParams16 bp;
  BlockRuns16 runs;
  for (int64_t r0 = rb; r0 < re; r0 += 16) {
    const int64_t nr = std::min<int64_t>(16, re - r0);
    blockRuns16(c, r0, nr, &runs);
    blockParams16(contiguousMaxima16<K>(x, runs), c, &bp);
    if (scales != nullptr) {
      _mm_mask_storeu_epi8(scales + r0, static_cast<__mmask16>((1u << nr) - 1u), _mm512_cvtepi32_epi8(bp.s));
    }
    for (int64_t k = 0; k < nr; ++k) body(bp, k, runs.begin[k], runs.n[k]);
  }
}

template <FloatKind K, bool Int, int R, bool Stream>
void fakeQuantizeContiguousLoop(const char* x, char* y, int64_t rb, int64_t re, const MxCall& c) {
  constexpr int64_t es = elemBytes<K>();
  const ElemConsts kc = elemConsts(c);
  forEachContiguousBlock<K>(x, c, rb, re, nullptr, [&](const BlockParams16& bp, int64_t k, int64_t begin, int64_t n) {
    const char* xb = x + begin * es;
    char* yb = y + begin * es;
    if ((bp.dead >> k) & 1u) {
      const float fill = ((bp.nan >> k) & 1u) ? bitsToFloat(0x7FC00000u) : 0.0f;
      for (int64_t i = 0; i < n; i += kChunk) fillChunk<K>(yb + i * es, chunkMask(n - i), fill);
      return;
    }
    const __m512 a = _mm512_set1_ps(bp.a[k]);
    const __m512 b = _mm512_set1_ps(bp.b[k]);
    const bool stream = Stream && reinterpret_cast<uintptr_t>(yb) % 64 == 0;
    for (int64_t i = 0; i < n; i += kChunk) {
      const __mmask32 km = chunkMask(n - i);
      __m512 va, vb;
      loadChunk<K>(xb + i * es, km, va, vb);
      __m512i ra = _mm512_setzero_si512(), rb2 = _mm512_setzero_si512();
      if constexpr (R == 3) chunkRandom<K>(c.random_key, static_cast<uint64_t>(begin + i), ra, rb2);
      const __m512 qa = fakeQuantize16<Int, R>(va, a, b, kc, ra);
      const __m512 qb = fakeQuantize16<Int, R>(vb, a, b, kc, rb2);
      if (stream) storeChunk<K, true>(yb + i * es, km, qa, qb); else storeChunk<K, false>(yb + i * es, km, qa, qb);
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
};

template <FloatKind K>
void columnTileParams(const char* x, const MxCall& c, int64_t o, int64_t j, int64_t w0, int64_t nw,
                      ColumnTile* t, uint8_t* scales) {
  const int64_t l0 = j * c.block, l1 = std::min(c.len, l0 + c.block);
  const int64_t nblocks = (c.len + c.block - 1) / c.block;
  for (int64_t w = 0; w < nw; w += kChunk) {
    __m512 ma, mb;
    columnMaxima32<K>(x, c, o, l0, l1, w0 + w, chunkMask(nw - w), ma, mb);
    BlockParams16 bp[2];
    blockParams16(ma, c, &bp[0]);
    blockParams16(mb, c, &bp[1]);
    for (int h = 0; h < 2; ++h) {
      std::memcpy(t->a + w + 16 * h, bp[h].a, sizeof(bp[h].a));
      std::memcpy(t->b + w + 16 * h, bp[h].b, sizeof(bp[h].b));
      t->nan[w / 16 + h] = bp[h].nan;
      t->dead[w / 16 + h] = bp[h].dead;
    }
    // Scale bytes leave in vector form: reading them back from memory right after a vector
    // store stalls store forwarding, which cost more than the whole element pass.
    if (scales != nullptr) {
      _mm256_mask_storeu_epi8(scales + (o * nblocks + j) * c.inner + w0 + w, chunkMask(nw - w),
                              _mm512_cvtepi16_epi8(chunkWords<K>(bp[0].s, bp[1].s)));
    }
  }
}

// Strided blocks: each of `inner` columns is a block. Columns go in tiles of 256 so that every
// pass reads whole cache lines of each row; each lane has its own block parameters. Calls
// body(t, row, w, n, a, b, ra, rb) for every chunk of columns [w, w + n) of element row `row`
// (flat index of the tile's first column), with the chunk loaded and, for stochastic rounding,
// its random bits.
template <FloatKind K, int R, typename Body>
inline void forEachColumnChunk(const char* x, const MxCall& c, int64_t rb, int64_t re, uint8_t* scales, Body&& body) {
  constexpr int64_t es = elemBytes<K>();
  const int64_t nblocks = (c.len + c.block - 1) / c.block;
  ColumnTile t;
  for (int64_t r = rb; r < re; ++r) {
    const int64_t o = r / nblocks, j = r % nblocks;
    const int64_t l0 = j * c.block, l1 = std::min(c.len, l0 + c.block);
    for (int64_t w0 = 0; w0 < c.inner; w0 += ColumnTile::kWidth) {
      const int64_t nw = std::min(ColumnTile::kWidth, c.inner - w0);
      columnTileParams<K>(x, c, o, j, w0, nw, &t, scales);
      for (int64_t l = l0; l < l1; ++l) {
        const int64_t row = (o * c.len + l) * c.inner + w0;
        for (int64_t w = 0; w < nw; w += kChunk) {
          __m512 va, vb;
          loadChunk<K>(x + (row + w) * es, chunkMask(nw - w), va, vb);
          __m512i ra = _mm512_setzero_si512(), rb2 = _mm512_setzero_si512();
          if constexpr (R == 3) chunkRandom<K>(c.random_key, static_cast<uint64_t>(row + w), ra, rb2);
          body(t, row, w, std::min(kChunk, nw - w), va, vb, ra, rb2);
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
  forEachColumnChunk<K, R>(x, c, rb, re, nullptr,
                           [&](const ColumnTile& t, int64_t row, int64_t w, int64_t n, __m512 va, __m512 vb,
                               __m512i ra, __m512i rb2) {
    __m512 qa = fakeQuantize16<Int, R>(va, _mm512_load_ps(t.a + w), _mm512_load_ps(t.b + w), kc, ra);
    __m512 qb = fakeQuantize16<Int, R>(vb, _mm512_load_ps(t.a + w + 16), _mm512_load_ps(t.b + w + 16), kc, rb2);
    qa = _mm512_mask_mov_ps(qa, t.nan[w / 16], vnan);
    qb = _mm512_mask_mov_ps(qb, t.nan[w / 16 + 1], vnan);
    char* out = y + (row + w) * es;
    if (Stream && reinterpret_cast<uintptr_t>(out) % 64 == 0) {
      storeChunk<K, true>(out, chunkMask(n), qa, qb);
    } else {
      storeChunk<K, false>(out, chunkMask(n), qa, qb);
    }
  });
  if constexpr (Stream) _mm_sfence();
}

template <FloatKind K, int R, bool Stream>
void fakeQuantizeContiguousSimd(const void* x, void* y, int64_t rb, int64_t re, const MxCall& c) {
  const char* xc = static_cast<const char*>(x);
  char* yc = static_cast<char*>(y);
  if (c.is_int) return fakeQuantizeContiguousLoop<K, true, R, Stream>(xc, yc, rb, re, c);
  fakeQuantizeContiguousLoop<K, false, R, Stream>(xc, yc, rb, re, c);
}

template <FloatKind K, int R, bool Stream>
void fakeQuantizeColumnsSimd(const void* x, void* y, int64_t rb, int64_t re, const MxCall& c) {
  const char* xc = static_cast<const char*>(x);
  char* yc = static_cast<char*>(y);
  if (c.is_int) return fakeQuantizeColumnsLoop<K, true, R, Stream>(xc, yc, rb, re, c);
  fakeQuantizeColumnsLoop<K, false, R, Stream>(xc, yc, rb, re, c);
}

// ---- mx_quantize: codes and scale bytes instead of values ---------------------------------------

/// Where the codes of element `e` start: CodeT units, or bytes of two codes when packing nibbles.
template <typename CodeT>
inline void* codeAt(void* codes, int64_t e, bool nibbles) {
  return nibbles ? static_cast<void*>(static_cast<uint8_t*>(codes) + e / 2) : static_cast<void*>(static_cast<CodeT*>(codes) + e);
}

template <FloatKind K, bool Int, int R, typename CodeT>
void quantizeLoop(const char* x, void* codes, uint8_t* scales, int64_t rb, int64_t re, const MxCall& c) {
  constexpr int64_t es = elemBytes<K>();
  const ElemConsts kc = elemConsts(c);
  if (c.inner == 1) {
    forEachContiguousBlock<K>(x, c, rb, re, scales, [&](const BlockParams16& bp, int64_t k, int64_t begin, int64_t n) {
      const bool dead = (bp.dead >> k) & 1u;  // NaN and flushed blocks store code 0
      const __m512 a = _mm512_set1_ps(bp.a[k]);
      for (int64_t i = 0; i < n; i += kChunk) {
        __m512i words = _mm512_setzero_si512();
        if (!dead) {
          __m512 va, vb;
          loadChunk<K>(x + (begin + i) * es, chunkMask(n - i), va, vb);
          __m512i ra = _mm512_setzero_si512(), rb2 = _mm512_setzero_si512();
          if constexpr (R == 3) chunkRandom<K>(c.random_key, static_cast<uint64_t>(begin + i), ra, rb2);
          words = chunkWords<K>(encode16<Int, R>(va, a, kc, ra), encode16<Int, R>(vb, a, kc, rb2));
        }
        storeCodeWords<CodeT>(codeAt<CodeT>(codes, begin + i, c.pack_nibbles), std::min(kChunk, n - i), words,
                              c.pack_nibbles, c.stream_stores);
      }
    });
  } else {
    forEachColumnChunk<K, R>(x, c, rb, re, scales,
                             [&](const ColumnTile& t, int64_t row, int64_t w, int64_t n, __m512 va, __m512 vb,
                                 __m512i ra, __m512i rb2) {
      const __m512i ca = _mm512_maskz_mov_epi32(static_cast<__mmask16>(~t.dead[w / 16]),
                                                encode16<Int, R>(va, _mm512_load_ps(t.a + w), kc, ra));
      const __m512i cb = _mm512_maskz_mov_epi32(static_cast<__mmask16>(~t.dead[w / 16 + 1]),
                                                encode16<Int, R>(vb, _mm512_load_ps(t.a + w + 16), kc, rb2));
      storeCodeWords<CodeT>(codeAt<CodeT>(codes, row + w, c.pack_nibbles), n, chunkWords<K>(ca, cb), c.pack_nibbles,
                            c.stream_stores);
    });
  }
  if (c.stream_stores) _mm_sfence();
}

template <FloatKind K, int R, typename CodeT>
void quantizeSimd(const void* x, void* codes, uint8_t* scales, int64_t rb, int64_t re, const MxCall& c) {
  const char* xc = static_cast<const char*>(x);
  if (c.is_int) return quantizeLoop<K, true, R, CodeT>(xc, codes, scales, rb, re, c);
  quantizeLoop<K, false, R, CodeT>(xc, codes, scales, rb, re, c);
}
