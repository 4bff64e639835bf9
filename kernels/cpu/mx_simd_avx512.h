// AVX-512 bodies of the MX / BFP fake-quantize loops: 16 elements per step, masked loads and
// stores for ragged blocks. Included by mx_kernels_impl.h inside the avx512 namespace, after
// mx_numerics.h, whose scalar quantizeElement this mirrors lane for lane (tested bit for bit
// against the numpy specification and the ATen reference).

struct VecParams {
  __m512i emin, m, seed_lanes;
  __m512 max_norm;
  bool is_int;
};

inline VecParams vecParams(const ElemParams& p) {
  VecParams v;
  v.emin = _mm512_set1_epi32(p.emin);
  v.m = _mm512_set1_epi32(p.m);
  v.max_norm = _mm512_set1_ps(p.max_norm);
  v.is_int = p.is_int;
  v.seed_lanes = _mm512_setzero_si512();
  return v;
}

// quantizeElement<R> on 16 lanes; rnd holds the stochastic bits (R == 3 only).
template <int R>
inline __m512 quantizeElements16(__m512 v, const VecParams& p, __m512i rnd) {
  const __m512i b = _mm512_castps_si512(v);
  const __m512i sign = _mm512_and_si512(b, _mm512_set1_epi32(static_cast<int>(0x80000000u)));
  const __m512 av = _mm512_castsi512_ps(_mm512_and_si512(b, _mm512_set1_epi32(0x7FFFFFFF)));
  __m512i se;
  if (p.is_int) {
    se = _mm512_sub_epi32(_mm512_setzero_si512(), p.m);
  } else {
    const __m512i e = _mm512_sub_epi32(_mm512_and_si512(_mm512_srli_epi32(b, 23), _mm512_set1_epi32(0xFF)),
                                       _mm512_set1_epi32(127));
    se = _mm512_sub_epi32(_mm512_max_epi32(e, p.emin), p.m);
  }
  const __m512 up_scale = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_sub_epi32(_mm512_set1_epi32(127), se), 23));
  const __m512 down_scale = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_set1_epi32(127), se), 23));
  const __m512 scaled = _mm512_mul_ps(av, up_scale);
  const __m512 n0 = _mm512_roundscale_ps(scaled, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m512 frac = _mm512_sub_ps(scaled, n0);
  __mmask16 up;
  if constexpr (R == 0) {
    up = _mm512_cmp_ps_mask(frac, _mm512_set1_ps(0.5f), _CMP_GE_OQ);
  } else if constexpr (R == 1) {
    const __mmask16 odd = _mm512_test_epi32_mask(_mm512_cvttps_epi32(n0), _mm512_set1_epi32(1));
    up = _mm512_cmp_ps_mask(frac, _mm512_set1_ps(0.5f), _CMP_GT_OQ) |
         (_mm512_cmp_ps_mask(frac, _mm512_set1_ps(0.5f), _CMP_EQ_OQ) & odd);
  } else if constexpr (R == 2) {
    up = 0;
  } else {
    const __m512i t = _mm512_cvttps_epu32(_mm512_mul_ps(frac, _mm512_set1_ps(4294967296.0f)));
    up = _mm512_cmpgt_epu32_mask(t, rnd);
  }
  const __m512 n = _mm512_mask_add_ps(n0, up, n0, _mm512_set1_ps(1.0f));
  const __m512 q = _mm512_min_ps(_mm512_mul_ps(n, down_scale), p.max_norm);
  const __mmask16 nonzero = _mm512_cmp_ps_mask(q, _mm512_setzero_ps(), _CMP_NEQ_OQ);
  return _mm512_castsi512_ps(_mm512_mask_or_epi32(_mm512_castps_si512(q), nonzero, _mm512_castps_si512(q), sign));
}

template <FloatKind K>
inline __m512 loadMasked(const void* p, __mmask16 k) {
  if constexpr (K == FloatKind::kF32) {
    return _mm512_maskz_loadu_ps(k, p);
  } else {
    const __m256i h = _mm256_maskz_loadu_epi16(k, p);
    if constexpr (K == FloatKind::kBF16) {
      return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    } else {
      return _mm512_cvtph_ps(h);
    }
  }
}

template <FloatKind K>
inline void storeMasked(void* p, __mmask16 k, __m512 v) {
  if constexpr (K == FloatKind::kF32) {
    _mm512_mask_storeu_ps(p, k, v);
  } else if constexpr (K == FloatKind::kBF16) {
    const __m512i u = _mm512_castps_si512(v);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb), 16);
    r = _mm512_mask_mov_epi32(r, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), _mm512_set1_epi32(0x7fc0));
    _mm256_mask_storeu_epi16(p, k, _mm512_cvtepi32_epi16(r));
  } else {
    _mm256_mask_storeu_epi16(p, k, _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
}

template <FloatKind K>
inline __m512 loadFull(const void* p) {
  if constexpr (K == FloatKind::kF32) {
    return _mm512_loadu_ps(p);
  } else {
    const __m256i h = _mm256_loadu_si256(static_cast<const __m256i*>(p));
    if constexpr (K == FloatKind::kBF16) {
      return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    } else {
      return _mm512_cvtph_ps(h);
    }
  }
}

// Full 16-lane store, streaming (non-temporal) when asked; p must then be aligned to the
// store width (64 bytes for fp32, 32 for 16-bit types).
template <FloatKind K, bool Stream>
inline void storeFull(void* p, __m512 v) {
  if constexpr (K == FloatKind::kF32) {
    if constexpr (Stream) _mm512_stream_ps(static_cast<float*>(p), v); else _mm512_storeu_ps(p, v);
  } else {
    __m256i h;
    if constexpr (K == FloatKind::kBF16) {
      const __m512i u = _mm512_castps_si512(v);
      const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
      __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb), 16);
      r = _mm512_mask_mov_epi32(r, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), _mm512_set1_epi32(0x7fc0));
      h = _mm512_cvtepi32_epi16(r);
    } else {
      h = _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT);
    }
    if constexpr (Stream) _mm256_stream_si256(static_cast<__m256i*>(p), h); else _mm256_storeu_si256(static_cast<__m256i*>(p), h);
  }
}

inline __mmask16 laneMask(int64_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1u);
}

// Random bits of 16 consecutive elements starting at `index` (scalar hash: stochastic only).
inline __m512i randomLanes(uint32_t key, uint64_t index) {
  alignas(64) uint32_t r[16];
  for (int i = 0; i < 16; ++i) r[i] = elementRandom(key, index + i);
  return _mm512_load_si512(r);
}


// sharedScaleBits (mx_numerics.h) for 16 blocks at once, plus what the element loops need:
// the scale, its exact reciprocal (0 for dead blocks) and kill flags (1 NaN, 2 flushed).
struct BlockScales16 {
  alignas(64) uint32_t s[16];
  alignas(64) float scale[16];
  alignas(64) float inv[16];
  alignas(64) uint32_t kill[16];
};

inline void blockScales16(__m512 amax, const ElemParams& p, uint8_t scale_mode, bool flush_subnorms,
                          BlockScales16* out) {
  const __m512i b = _mm512_castps_si512(amax);
  const __m512i eb = _mm512_and_si512(_mm512_srli_epi32(b, 23), _mm512_set1_epi32(0xFF));
  const __m512i mant = _mm512_and_si512(b, _mm512_set1_epi32(0x7FFFFF));
  const __mmask16 special = _mm512_cmpeq_epi32_mask(eb, _mm512_set1_epi32(255));
  __m512i sv;
  if (scale_mode == 3) {  // rceil
    const __m512i t = _mm512_castps_si512(_mm512_div_ps(amax, _mm512_set1_ps(p.max_norm)));
    const __m512i te = _mm512_and_si512(_mm512_srli_epi32(t, 23), _mm512_set1_epi32(0xFF));
    const __m512i tm = _mm512_and_si512(t, _mm512_set1_epi32(0x7FFFFF));
    const __mmask16 tm_nz = _mm512_test_epi32_mask(tm, tm);
    const __mmask16 sub_up = _mm512_cmpgt_epi32_mask(tm, _mm512_set1_epi32(0x400000));
    const __m512i normal = _mm512_mask_add_epi32(te, tm_nz, te, _mm512_set1_epi32(1));
    const __mmask16 te_zero = _mm512_cmpeq_epi32_mask(te, _mm512_setzero_si512());
    sv = _mm512_mask_mov_epi32(normal, te_zero, _mm512_maskz_mov_epi32(sub_up, _mm512_set1_epi32(1)));
    sv = _mm512_min_epi32(sv, _mm512_set1_epi32(255));
    sv = _mm512_mask_mov_epi32(sv, _mm512_cmpeq_epi32_mask(te, _mm512_set1_epi32(255)), _mm512_set1_epi32(255));
  } else {
    __m512i e = eb;
    if (scale_mode == 1) {  // ceil
      e = _mm512_mask_add_epi32(eb, _mm512_test_epi32_mask(mant, mant), eb, _mm512_set1_epi32(1));
    } else if (scale_mode == 2) {  // even
      const int32_t shift = 23 - p.m - 1;
      const __m512i r = _mm512_and_si512(_mm512_add_epi32(b, _mm512_set1_epi32(shift >= 0 ? (1 << shift) : 0)),
                                         _mm512_set1_epi32(0x7F800000));
      e = _mm512_srli_epi32(r, 23);
    }
    sv = _mm512_sub_epi32(e, _mm512_set1_epi32(p.emax));  // u + 127
    sv = _mm512_min_epi32(_mm512_max_epi32(sv, _mm512_setzero_si512()), _mm512_set1_epi32(255));
  }
  sv = _mm512_mask_mov_epi32(sv, special, _mm512_set1_epi32(255));
  const __mmask16 nan = _mm512_cmpeq_epi32_mask(sv, _mm512_set1_epi32(255));
  const __mmask16 zero = _mm512_cmpeq_epi32_mask(sv, _mm512_setzero_si512());
  __m512i bits = _mm512_slli_epi32(sv, 23);
  bits = _mm512_mask_mov_epi32(bits, zero, _mm512_set1_epi32(0x00400000));
  bits = _mm512_mask_mov_epi32(bits, nan, _mm512_set1_epi32(0x7FC00000));
  const __m512 scale = _mm512_castsi512_ps(bits);
  __mmask16 flushed = 0;
  if (flush_subnorms) flushed = _mm512_cmpeq_epi32_mask(eb, _mm512_setzero_si512()) & ~nan;
  const __m512 inv = _mm512_maskz_div_ps(static_cast<__mmask16>(~(nan | flushed)), _mm512_set1_ps(1.0f), scale);
  _mm512_store_si512(out->s, sv);
  _mm512_store_ps(out->scale, scale);
  _mm512_store_ps(out->inv, inv);
  _mm512_store_si512(out->kill, _mm512_mask_mov_epi32(_mm512_maskz_mov_epi32(flushed, _mm512_set1_epi32(2)), nan,
                                                      _mm512_set1_epi32(1)));
}

// NaN-propagating |x| maxima of columns [w0, w0 + nw) over rows [l0, l1) of outer index o.
template <FloatKind K>
inline void columnMaxima(const char* x, const MxCall& c, int64_t o, int64_t l0, int64_t l1, int64_t w0, int64_t nw,
                         float* amax) {
  constexpr int64_t es = K == FloatKind::kF32 ? 4 : 2;
  for (int64_t w = 0; w < nw; w += 16) {
    const __mmask16 k = laneMask(nw - w);
    __m512 vmax = _mm512_setzero_ps();
    __mmask16 nan_seen = 0;
    for (int64_t l = l0; l < l1; ++l) {
      const __m512 a = _mm512_abs_ps(loadMasked<K>(x + ((o * c.len + l) * c.inner + w0 + w) * es, k));
      nan_seen |= _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q);
      vmax = _mm512_max_ps(vmax, a);
    }
    _mm512_store_ps(amax + w, _mm512_mask_mov_ps(vmax, nan_seen, _mm512_castsi512_ps(_mm512_set1_epi32(0x7FC00000))));
  }
}

// NaN-propagating |x| max of a contiguous run of n elements.
template <FloatKind K>
inline float runMax(const char* x, int64_t n) {
  constexpr int64_t es = K == FloatKind::kF32 ? 4 : 2;
  __m512 vmax = _mm512_setzero_ps();
  __mmask16 nan_seen = 0;
  for (int64_t i = 0; i < n; i += 16) {
    const __m512 a = _mm512_abs_ps(i + 16 <= n ? loadFull<K>(x + i * es) : loadMasked<K>(x + i * es, laneMask(n - i)));
    nan_seen |= _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q);
    vmax = _mm512_max_ps(vmax, a);
  }
  return nan_seen ? bitsToFloat(0x7FC00000u) : _mm512_reduce_max_ps(vmax);
}

// Scales of the contiguous blocks r0 .. r0 + nr - 1 (nr <= 16; the axis is innermost).
template <FloatKind K>
inline void contiguousScales16(const char* x, const MxCall& c, const ElemParams& p, int64_t r0, int64_t nr,
                               BlockScales16* bs) {
  constexpr int64_t es = K == FloatKind::kF32 ? 4 : 2;
  const int64_t nblocks = (c.len + c.block - 1) / c.block;
  alignas(64) float amax[16] = {};
  for (int64_t k = 0; k < nr; ++k) {
    const int64_t r = r0 + k, o = r / nblocks, j = r % nblocks;
    amax[k] = runMax<K>(x + (o * c.len + j * c.block) * es, std::min(c.block, c.len - j * c.block));
  }
  blockScales16(_mm512_load_ps(amax), p, c.scale_mode, c.flush_fp32_subnorms, bs);
}

// Contiguous blocks (the quantized axis is innermost).
template <FloatKind K, int R, bool Stream>
void fakeQuantizeContiguousSimd(const void* xv, void* yv, int64_t rb, int64_t re, const MxCall& c) {
  constexpr int64_t es = K == FloatKind::kF32 ? 4 : 2;
  const char* x = static_cast<const char*>(xv);
  char* y = static_cast<char*>(yv);
  const ElemParams p{c.is_int, c.emin, c.m, c.emax, c.max_norm};
  const VecParams vp = vecParams(p);
  const int64_t nblocks = (c.len + c.block - 1) / c.block;
  const __m512 vnan = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FC00000));
  BlockScales16 bs;
  // 16 blocks at a time: their maxima, then their scales in one vector step, then elements.
  for (int64_t r0 = rb; r0 < re; r0 += 16) {
    const int64_t nr = std::min<int64_t>(16, re - r0);
    contiguousScales16<K>(x, c, p, r0, nr, &bs);
    for (int64_t k = 0; k < nr; ++k) {
      const int64_t r = r0 + k, o = r / nblocks, j = r % nblocks;
      const int64_t begin = o * c.len + j * c.block;
      const int64_t n = std::min(c.block, c.len - j * c.block);
      const __m512 scale = _mm512_set1_ps(bs.scale[k]);
      const __m512 inv = _mm512_set1_ps(bs.inv[k]);
      const uint32_t kill = bs.kill[k];
      auto compute = [&](__m512 xin, int64_t at) {
        if (kill == 1) return vnan;
        if (kill == 2) return _mm512_setzero_ps();
        const __m512i rnd = R == 3 ? randomLanes(c.random_key, static_cast<uint64_t>(at)) : _mm512_setzero_si512();
        return _mm512_mul_ps(quantizeElements16<R>(_mm512_mul_ps(xin, inv), vp, rnd), scale);
      };
      // Streaming stores need aligned destinations: only when the block starts aligned.
      const bool aligned = (reinterpret_cast<uintptr_t>(y + begin * es) % (16 * es)) == 0;
      int64_t i = 0;
      for (; i + 16 <= n; i += 16) {
        const __m512 q = compute(loadFull<K>(x + (begin + i) * es), begin + i);
        if (Stream && aligned) storeFull<K, true>(y + (begin + i) * es, q); else storeFull<K, false>(y + (begin + i) * es, q);
      }
      if (i < n) {
        const __mmask16 km = laneMask(n - i);
        storeMasked<K>(y + (begin + i) * es, km, compute(loadMasked<K>(x + (begin + i) * es, km), begin + i));
      }
    }
  }
  if constexpr (Stream) _mm_sfence();
}

// Strided blocks: each of `inner` columns is a block. Columns go in tiles of 256 (1 KiB of
// fp32 per row) so that every pass reads whole cache lines of each row; 16 lanes per step,
// each lane with its own scale.
template <FloatKind K, int R, bool Stream>
void fakeQuantizeColumnsSimd(const void* xv, void* yv, int64_t rb, int64_t re, const MxCall& c) {
  constexpr int64_t es = K == FloatKind::kF32 ? 4 : 2;
  constexpr int64_t kTile = 256;
  const char* x = static_cast<const char*>(xv);
  char* y = static_cast<char*>(yv);
  const ElemParams p{c.is_int, c.emin, c.m, c.emax, c.max_norm};
  const VecParams vp = vecParams(p);
  const int64_t nblocks = (c.len + c.block - 1) / c.block;
  const __m512 vnan = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FC00000));
  alignas(64) float amax[kTile], scale[kTile], inv[kTile];
  alignas(64) uint32_t kill[kTile];
  for (int64_t r = rb; r < re; ++r) {
    const int64_t o = r / nblocks, j = r % nblocks;
    const int64_t l0 = j * c.block, l1 = std::min(c.len, l0 + c.block);
    for (int64_t w0 = 0; w0 < c.inner; w0 += kTile) {
      const int64_t nw = std::min(kTile, c.inner - w0);
      columnMaxima<K>(x, c, o, l0, l1, w0, nw, amax);
      for (int64_t w = 0; w < nw; w += 16) {
        BlockScales16 bs;
        blockScales16(_mm512_load_ps(amax + w), p, c.scale_mode, c.flush_fp32_subnorms, &bs);
        std::memcpy(scale + w, bs.scale, sizeof(bs.scale));
        std::memcpy(inv + w, bs.inv, sizeof(bs.inv));
        std::memcpy(kill + w, bs.kill, sizeof(bs.kill));
      }
      for (int64_t l = l0; l < l1; ++l) {
        const int64_t row = (o * c.len + l) * c.inner + w0;
        const bool aligned = (reinterpret_cast<uintptr_t>(y + row * es) % (16 * es)) == 0;
        for (int64_t w = 0; w < nw; w += 16) {
          const __mmask16 k = laneMask(nw - w);
          const __m512 vscale = _mm512_load_ps(scale + w);
          const __m512i vkill = _mm512_load_si512(kill + w);
          const __m512 v = _mm512_mul_ps(loadMasked<K>(x + (row + w) * es, k), _mm512_load_ps(inv + w));
          const __m512i rnd = R == 3 ? randomLanes(c.random_key, static_cast<uint64_t>(row + w)) : _mm512_setzero_si512();
          __m512 q = _mm512_mul_ps(quantizeElements16<R>(v, vp, rnd), vscale);
          q = _mm512_mask_mov_ps(q, _mm512_cmpeq_epi32_mask(vkill, _mm512_set1_epi32(2)), _mm512_setzero_ps());
          q = _mm512_mask_mov_ps(q, _mm512_cmpeq_epi32_mask(vkill, _mm512_set1_epi32(1)), vnan);
          if (k == 0xFFFF && Stream && aligned) {
            storeFull<K, true>(y + (row + w) * es, q);
          } else {
            storeMasked<K>(y + (row + w) * es, k, q);
          }
        }
      }
    }
  }
  if constexpr (Stream) _mm_sfence();
}

// ---- mx_quantize: codes instead of values ---------------------------------------------------

struct CodeParams {
  bool is_int;
  __m128i m_count;        // shift counts for _mm512_s{l,r}l_epi32
  __m128i sign_count;     // ebits + m
  __m128i mant_shift;     // 23 - m
  __m512i emin, bias_minus_127, mant_mask, code_mask;
  __m512 int_scale;       // 2^m (integer codes)
  __m512 sub_scale;       // 2^(m - emin) (float subnormal codes)
};

inline CodeParams codeParams(const ElemParams& p, int32_t ebits, int32_t bits) {
  CodeParams c;
  c.is_int = p.is_int;
  c.m_count = _mm_cvtsi32_si128(p.m);
  c.sign_count = _mm_cvtsi32_si128(ebits + p.m);
  c.mant_shift = _mm_cvtsi32_si128(23 - p.m);
  c.emin = _mm512_set1_epi32(p.emin);
  c.bias_minus_127 = _mm512_set1_epi32((ebits > 0 ? (1 << (ebits - 1)) - 1 : 1) - 127);
  c.mant_mask = _mm512_set1_epi32((1 << p.m) - 1);
  c.code_mask = _mm512_set1_epi32(bits >= 32 ? -1 : static_cast<int32_t>((1u << bits) - 1u));
  c.int_scale = _mm512_set1_ps(bitsToFloat(static_cast<uint32_t>(127 + p.m) << 23));
  c.sub_scale = _mm512_set1_ps(bitsToFloat(static_cast<uint32_t>(127 + p.m - p.emin) << 23));
  return c;
}

// encodeElement (mx_numerics.h) on 16 lanes.
inline __m512i encodeElements16(__m512 q, const CodeParams& c) {
  const __m512i b = _mm512_castps_si512(q);
  const __m512i a = _mm512_and_si512(b, _mm512_set1_epi32(0x7FFFFFFF));
  const __mmask16 neg = _mm512_movepi32_mask(b);
  if (c.is_int) {
    const __m512i n = _mm512_cvttps_epi32(_mm512_mul_ps(_mm512_castsi512_ps(a), c.int_scale));
    const __m512i v = _mm512_mask_sub_epi32(n, neg, _mm512_setzero_si512(), n);
    return _mm512_and_si512(v, c.code_mask);
  }
  const __m512i e = _mm512_srli_epi32(a, 23);  // biased
  const __m512i eu = _mm512_sub_epi32(e, _mm512_set1_epi32(127));
  const __mmask16 normal = _mm512_cmpge_epi32_mask(eu, c.emin);
  const __m512i expf = _mm512_maskz_add_epi32(normal, e, c.bias_minus_127);
  const __m512i mant_norm = _mm512_and_si512(_mm512_srl_epi32(a, c.mant_shift), c.mant_mask);
  const __m512i mant_sub = _mm512_cvttps_epi32(_mm512_mul_ps(_mm512_castsi512_ps(a), c.sub_scale));
  const __m512i mant = _mm512_mask_mov_epi32(mant_sub, normal, mant_norm);
  const __m512i sign = _mm512_sll_epi32(_mm512_srli_epi32(b, 31), c.sign_count);
  const __m512i code = _mm512_or_si512(sign, _mm512_or_si512(_mm512_sll_epi32(expf, c.m_count), mant));
  const __mmask16 nonzero = _mm512_test_epi32_mask(a, a);
  return _mm512_maskz_mov_epi32(nonzero, _mm512_and_si512(code, c.code_mask));
}

// 16 four-bit codes (one per int32 lane) to 8 bytes, element 2i in the low nibble of byte i;
// `n` (even, <= 16) codes are stored.
inline void storeNibbles(uint8_t* p, int64_t n, __m512i codes) {
  // As 8 int64 lanes (even code low, odd code high): low | (high << 4) is v | (v >> 28).
  const __m512i pairs = _mm512_or_si512(codes, _mm512_srli_epi64(codes, 28));
  const __m128i bytes = _mm512_cvtepi64_epi8(pairs);
  _mm_mask_storeu_epi8(p, static_cast<__mmask16>((1u << (n / 2)) - 1u), bytes);
}

template <typename CodeT>
inline void storeCodesMasked(CodeT* p, __mmask16 k, __m512i codes) {
  if constexpr (sizeof(CodeT) == 1) {
    _mm_mask_storeu_epi8(p, k, _mm512_cvtepi32_epi8(codes));
  } else {
    _mm256_mask_storeu_epi16(p, k, _mm512_cvtepi32_epi16(codes));
  }
}

// Contiguous blocks (inner == 1) in batches of 16; otherwise columns in tiles of 256, 16 lanes
// per step, each lane with its own block scale.
template <FloatKind K, int R, typename CodeT>
void quantizeSimd(const void* xv, void* cv, uint8_t* scales, int64_t rb, int64_t re, const MxCall& c) {
  constexpr int64_t es = K == FloatKind::kF32 ? 4 : 2;
  constexpr int64_t kTile = 256;
  const char* x = static_cast<const char*>(xv);
  CodeT* codes = static_cast<CodeT*>(cv);
  const ElemParams p{c.is_int, c.emin, c.m, c.emax, c.max_norm};
  const VecParams vp = vecParams(p);
  const CodeParams cp = codeParams(p, c.ebits, c.code_bits);
  const int64_t nblocks = (c.len + c.block - 1) / c.block;
  alignas(64) float amax[kTile], inv[kTile];
  if (c.inner == 1) {
    // Contiguous blocks, 16 at a time: maxima, then scales in one vector step, then codes.
    BlockScales16 bs;
    for (int64_t r0 = rb; r0 < re; r0 += 16) {
      const int64_t nr = std::min<int64_t>(16, re - r0);
      contiguousScales16<K>(x, c, p, r0, nr, &bs);
      for (int64_t k = 0; k < nr; ++k) {
        const int64_t r = r0 + k, o = r / nblocks, j = r % nblocks;
        const int64_t begin = o * c.len + j * c.block;
        const int64_t n = std::min(c.block, c.len - j * c.block);
        scales[r] = static_cast<uint8_t>(bs.s[k]);
        const bool dead = bs.kill[k] != 0;  // NaN and flushed blocks store code 0
        const __m512 vinv = _mm512_set1_ps(bs.inv[k]);
        for (int64_t i = 0; i < n; i += 16) {
          const __mmask16 km = laneMask(n - i);
          __m512i code = _mm512_setzero_si512();
          if (!dead) {
            const __m512i rnd =
                R == 3 ? randomLanes(c.random_key, static_cast<uint64_t>(begin + i)) : _mm512_setzero_si512();
            const __m512 v = _mm512_mul_ps(loadMasked<K>(x + (begin + i) * es, km), vinv);
            code = encodeElements16(quantizeElements16<R>(v, vp, rnd), cp);
          }
          if (c.pack_nibbles) {
            storeNibbles(reinterpret_cast<uint8_t*>(codes) + (begin + i) / 2, std::min<int64_t>(16, n - i), code);
          } else {
            storeCodesMasked<CodeT>(codes + begin + i, km, code);
          }
        }
      }
    }
    return;
  }
  for (int64_t r = rb; r < re; ++r) {
    const int64_t o = r / nblocks, j = r % nblocks;
    const int64_t l0 = j * c.block, l1 = std::min(c.len, l0 + c.block);
    for (int64_t w0 = 0; w0 < c.inner; w0 += kTile) {
      const int64_t nw = std::min(kTile, c.inner - w0);
      columnMaxima<K>(x, c, o, l0, l1, w0, nw, amax);
      for (int64_t w = 0; w < nw; w += 16) {
        BlockScales16 bs;
        blockScales16(_mm512_load_ps(amax + w), p, c.scale_mode, c.flush_fp32_subnorms, &bs);
        std::memcpy(inv + w, bs.inv, sizeof(bs.inv));  // 0 for NaN and flushed blocks
        for (int64_t i = 0; i < 16 && w + i < nw; ++i) {
          scales[(o * nblocks + j) * c.inner + w0 + w + i] = static_cast<uint8_t>(bs.s[i]);
        }
      }
      for (int64_t l = l0; l < l1; ++l) {
        const int64_t row = (o * c.len + l) * c.inner + w0;
        for (int64_t w = 0; w < nw; w += 16) {
          const __mmask16 k = laneMask(nw - w);
          const __m512 vinv = _mm512_load_ps(inv + w);
          const __mmask16 live = _mm512_cmp_ps_mask(vinv, _mm512_setzero_ps(), _CMP_NEQ_OQ);
          const __m512i rnd = R == 3 ? randomLanes(c.random_key, static_cast<uint64_t>(row + w)) : _mm512_setzero_si512();
          // Dead lanes (NaN / flushed blocks) quantize 0 and store code 0.
          const __m512 v = _mm512_maskz_mul_ps(live, loadMasked<K>(x + (row + w) * es, k), vinv);
          const __m512i code = _mm512_maskz_mov_epi32(live, encodeElements16(quantizeElements16<R>(v, vp, rnd), cp));
          storeCodesMasked<CodeT>(codes + row + w, k, code);
        }
      }
    }
  }
}
