// Loops of the AVX2 MX kernels over block rows (layout: mx_microkernels.h), the scalar kernels'
// loops of mx_kernels_impl.h with 8 lanes a step. Included at the end of mx_simd_avx2.h.

/// Block row r's (outer index, block index) pairs from rb on, without a division per block.
struct BlockCursor {
  int64_t nblocks, o, j;
  BlockCursor(const MxCall& c, int64_t rb) : nblocks((c.len + c.block - 1) / c.block), o(rb / nblocks), j(rb % nblocks) {}
  void next() {
    if (++j == nblocks) {
      j = 0;
      ++o;
    }
  }
};

/// Lane k of the result: the max |x| of m[k]'s lanes (NaN lanes ignored); nan: lane k all-ones
/// when m[k] saw a NaN. A transposing reduction, three levels of shuffles and maxima.
inline __m256 reduceMaxima8(const Max8* m, __m256& nan) {
  __m256 a[4], n[4];
  for (int i = 0; i < 4; ++i) {
    const Max8 &p = m[2 * i], &q = m[2 * i + 1];
    a[i] = _mm256_max_ps(_mm256_unpacklo_ps(p.amax, q.amax), _mm256_unpackhi_ps(p.amax, q.amax));
    n[i] = _mm256_or_ps(_mm256_unpacklo_ps(p.nan, q.nan), _mm256_unpackhi_ps(p.nan, q.nan));
  }
  const __m256 a01 = _mm256_max_ps(_mm256_shuffle_ps(a[0], a[1], 0x44), _mm256_shuffle_ps(a[0], a[1], 0xEE));
  const __m256 a23 = _mm256_max_ps(_mm256_shuffle_ps(a[2], a[3], 0x44), _mm256_shuffle_ps(a[2], a[3], 0xEE));
  const __m256 n01 = _mm256_or_ps(_mm256_shuffle_ps(n[0], n[1], 0x44), _mm256_shuffle_ps(n[0], n[1], 0xEE));
  const __m256 n23 = _mm256_or_ps(_mm256_shuffle_ps(n[2], n[3], 0x44), _mm256_shuffle_ps(n[2], n[3], 0xEE));
  nan = _mm256_or_ps(_mm256_permute2f128_ps(n01, n23, 0x20), _mm256_permute2f128_ps(n01, n23, 0x31));
  return _mm256_max_ps(_mm256_permute2f128_ps(a01, a23, 0x20), _mm256_permute2f128_ps(a01, a23, 0x31));
}

/// Stores the low byte of the first n (<= 8) lanes.
inline void storeScaleBytes(uint8_t* p, __m256i s, int64_t n) {
  const __m128i w = _mm_packus_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
  alignas(16) uint8_t buf[16];
  _mm_store_si128(reinterpret_cast<__m128i*>(buf), _mm_packus_epi16(w, w));
  std::memcpy(p, buf, static_cast<size_t>(n));
}

// Contiguous blocks (the quantized axis is innermost), 8 at a time: their maxima, then their
// parameters in one vector step (blocks8), then body(b, k, begin, n) for block k of the 8,
// elements [begin, begin + n). Per-block scalar work had cost as much as the elements of a
// 32-element block.
template <FloatKind K, typename Body>
inline void forEachContiguousBlock8(const typename IO<K>::T* x, const MxCall& c, int64_t rb, int64_t re,
                                    uint8_t* scales, Body&& body) {
  BlockCursor at(c, rb);
  for (int64_t r0 = rb; r0 < re; r0 += 8) {
    const int64_t nr = std::min<int64_t>(8, re - r0);
    int64_t begin[8], n[8];
    Max8 m[8];
    for (int64_t k = 0; k < nr; ++k, at.next()) {
      begin[k] = at.o * c.len + at.j * c.block;
      n[k] = std::min(c.block, c.len - at.j * c.block);
      // In registers, then stored: m[k].add in the loop kept m[k] in memory, a store-to-load
      // dependency per step.
      Max8 acc;
      for (int64_t i = 0; i < n[k]; i += 8) acc.add(load8<K>(x + begin[k] + i, n[k] - i));
      m[k] = acc;
    }
    __m256 nan;
    const __m256 amax = reduceMaxima8(m, nan);
    const Blocks8 b = blocks8(amax, nan, c);
    if (scales != nullptr) storeScaleBytes(scales + r0, b.s, nr);
    for (int64_t k = 0; k < nr; ++k) body(b, static_cast<int>(k), begin[k], n[k]);
  }
}

// One block's run of n elements at flat index begin. Everything the loop reads is a local copy:
// captured by reference, the constants were reloaded from memory every step (the stores could
// alias them), which halved the speed.
template <FloatKind K, bool Int, int R>
inline void fakeQuantizeRun8(const typename IO<K>::T* x, typename IO<K>::T* y, int64_t begin, int64_t n, __m256 inv,
                             __m256 scale, __m256 live, __m256 fill, Elem8 k, bool stream, uint32_t key) {
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i rnd = R == 3 ? random8(key, static_cast<uint64_t>(begin + i)) : _mm256_setzero_si256();
    const __m256 q = fakeQuantize8<Int, R>(load8<K>(x + begin + i, n - i), inv, scale, live, fill, k, rnd);
    store8<K>(y + begin + i, q, stream, n - i);
  }
}

template <FloatKind K, bool Int, int R, typename CodeT>
inline void quantizeRun8(const typename IO<K>::T* x, void* codes, int64_t begin, int64_t n, __m256 inv, __m256 live,
                         Elem8 k, const MxCall& c) {
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i rnd = R == 3 ? random8(c.random_key, static_cast<uint64_t>(begin + i)) : _mm256_setzero_si256();
    storeCodes8At<CodeT>(codes, begin + i, encodeLanes8<Int, R>(load8<K>(x + begin + i, n - i), inv, live, k, rnd),
                         std::min<int64_t>(8, n - i), c.pack_bits);
  }
}

template <FloatKind K, bool Int, int R>
void fakeQuantizeContiguous8(const void* xv, void* yv, int64_t rb, int64_t re, const MxCall& c) {
  using T = typename IO<K>::T;
  const T* x = static_cast<const T*>(xv);
  T* y = static_cast<T*>(yv);
  const Elem8 k = elem8(c);
  const bool stream = c.stream_stores;
  forEachContiguousBlock8<K>(x, c, rb, re, nullptr, [&](const Blocks8& b, int lane, int64_t begin, int64_t n) {
    fakeQuantizeRun8<K, Int, R>(x, y, begin, n, broadcastLane(b.inv, lane), broadcastLane(b.scale, lane),
                                broadcastLane(b.live, lane), broadcastLane(b.fill, lane), k, stream, c.random_key);
  });
  if (stream) _mm_sfence();
}

template <FloatKind K, bool Int, int R, typename CodeT>
void quantizeContiguous8(const void* xv, void* cv, uint8_t* scales, int64_t rb, int64_t re, const MxCall& c) {
  using T = typename IO<K>::T;
  const T* x = static_cast<const T*>(xv);
  const Elem8 k = elem8(c);
  forEachContiguousBlock8<K>(x, c, rb, re, scales, [&](const Blocks8& b, int lane, int64_t begin, int64_t n) {
    quantizeRun8<K, Int, R, CodeT>(x, cv, begin, n, broadcastLane(b.inv, lane), broadcastLane(b.live, lane), k, c);
  });
}

/// Lane values of the blocks of a tile of kColumns strided columns.
struct ColumnLanes {
  alignas(32) float inv[kColumns] = {};
  alignas(32) float scale[kColumns] = {};
  alignas(32) float live[kColumns] = {};
  alignas(32) float fill[kColumns] = {};
};

// Strided blocks: each of `inner` columns is a block. As the scalar loop: tiles of kColumns
// columns, so that each pass reads whole cache lines of each row; the maxima accumulate in 8-lane
// vectors across rows (a vector's lanes are 8 blocks), blocks8 gives their lanes, then
// body(t, e, w, n) runs for the columns [w, w + n) (n <= 8) of the tile at flat element e.
template <FloatKind K, typename Body>
inline void forEachColumnStep(const typename IO<K>::T* x, const MxCall& c, int64_t rb, int64_t re, uint8_t* scales,
                              Body&& body) {
  ColumnLanes t;
  Max8 m[kColumns / 8];
  BlockCursor at(c, rb);
  for (int64_t r = rb; r < re; ++r, at.next()) {
    const int64_t l0 = at.j * c.block, l1 = std::min(c.len, l0 + c.block);
    for (int64_t w0 = 0; w0 < c.inner; w0 += kColumns) {
      const int64_t nw = std::min(kColumns, c.inner - w0);
      for (int64_t w = 0; w < nw; w += 8) m[w / 8] = Max8{};
      for (int64_t l = l0; l < l1; ++l) {
        const typename IO<K>::T* row = x + (at.o * c.len + l) * c.inner + w0;
        for (int64_t w = 0; w < nw; w += 8) m[w / 8].add(load8<K>(row + w, nw - w));
      }
      for (int64_t w = 0; w < nw; w += 8) {
        const Blocks8 b = blocks8(m[w / 8].amax, m[w / 8].nan, c);
        _mm256_store_ps(t.inv + w, b.inv);
        _mm256_store_ps(t.scale + w, b.scale);
        _mm256_store_ps(t.live + w, b.live);
        _mm256_store_ps(t.fill + w, b.fill);
        if (scales != nullptr) {
          storeScaleBytes(scales + (at.o * at.nblocks + at.j) * c.inner + w0 + w, b.s, std::min<int64_t>(8, nw - w));
        }
      }
      for (int64_t l = l0; l < l1; ++l) {
        const int64_t e = (at.o * c.len + l) * c.inner + w0;
        for (int64_t w = 0; w < nw; w += 8) body(t, e, w, std::min<int64_t>(8, nw - w));
      }
    }
  }
}

template <FloatKind K, bool Int, int R>
void fakeQuantizeColumns8(const void* xv, void* yv, int64_t rb, int64_t re, const MxCall& c) {
  using T = typename IO<K>::T;
  const T* x = static_cast<const T*>(xv);
  T* y = static_cast<T*>(yv);
  const Elem8 k = elem8(c);
  forEachColumnStep<K>(x, c, rb, re, nullptr, [&](const ColumnLanes& t, int64_t e, int64_t w, int64_t n) {
    const __m256i rnd = R == 3 ? random8(c.random_key, static_cast<uint64_t>(e + w)) : _mm256_setzero_si256();
    const __m256 q = fakeQuantize8<Int, R>(load8<K>(x + e + w, n), _mm256_load_ps(t.inv + w), _mm256_load_ps(t.scale + w),
                                           _mm256_load_ps(t.live + w), _mm256_load_ps(t.fill + w), k, rnd);
    store8<K>(y + e + w, q, c.stream_stores, n);
  });
  if (c.stream_stores) _mm_sfence();
}

template <FloatKind K, bool Int, int R, typename CodeT>
void quantizeColumns8(const void* xv, void* cv, uint8_t* scales, int64_t rb, int64_t re, const MxCall& c) {
  using T = typename IO<K>::T;
  const T* x = static_cast<const T*>(xv);
  const Elem8 k = elem8(c);
  forEachColumnStep<K>(x, c, rb, re, scales, [&](const ColumnLanes& t, int64_t e, int64_t w, int64_t n) {
    const __m256i rnd = R == 3 ? random8(c.random_key, static_cast<uint64_t>(e + w)) : _mm256_setzero_si256();
    storeCodes8At<CodeT>(cv, e + w, encodeLanes8<Int, R>(load8<K>(x + e + w, n), _mm256_load_ps(t.inv + w),
                                                         _mm256_load_ps(t.live + w), k, rnd), n, c.pack_bits);
  });
}

template <FloatKind K, int R>
void fakeQuantizeSimd8(const void* x, void* y, int64_t rb, int64_t re, const MxCall& c) {
  if (c.inner == 1) {
    if (c.is_int) return fakeQuantizeContiguous8<K, true, R>(x, y, rb, re, c);
    return fakeQuantizeContiguous8<K, false, R>(x, y, rb, re, c);
  }
  if (c.is_int) return fakeQuantizeColumns8<K, true, R>(x, y, rb, re, c);
  fakeQuantizeColumns8<K, false, R>(x, y, rb, re, c);
}

template <FloatKind K, int R, typename CodeT>
void quantizeSimd8(const void* x, void* codes, uint8_t* scales, int64_t rb, int64_t re, const MxCall& c) {
  if (c.inner == 1) {
    if (c.is_int) return quantizeContiguous8<K, true, R, CodeT>(x, codes, scales, rb, re, c);
    return quantizeContiguous8<K, false, R, CodeT>(x, codes, scales, rb, re, c);
  }
  if (c.is_int) return quantizeColumns8<K, true, R, CodeT>(x, codes, scales, rb, re, c);
  quantizeColumns8<K, false, R, CodeT>(x, codes, scales, rb, re, c);
}
