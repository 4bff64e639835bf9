// linear_mx's row kernel (linear_mx_microkernels.h: LinearMxRowsFn), written once for the ISA
// files x86_avx2/linear_mx_avx2.cpp and x86_avx512/linear_mx_avx512.cpp. Included inside their
// anonymous namespace after they define:
//   struct Lanes {                      // the ISA's fp32 vector
//     using F = ...;                    //   its type
//     static constexpr int kVecs;       //   vectors per 32-code unit (32 / lanes)
//     static constexpr int kRows1, kRows2;  // weight rows per pass for 1-2 and for 3-4 x rows
//     zero(), set1(v), load(p), fmadd(a, b, c), add(a, b), sum(v)
//   };
//   struct Decoder { explicit Decoder(const MxLinearRows&);
//                    template <MxUnitKind K> void unitOf(const uint8_t*, F (&)[kVecs]) const; };
//   constexpr int64_t kUnit = 32, kPrefetchBytes;
// Each unit is decoded once per weight row and multiplied into every x row (x permuted by the
// caller into the decoder's lane order); a block's sums go into two FMA chains, then are scaled
// once by the block's E8M0 multiplier. The unit kind is a template argument: with a switch per
// unit GCC kept the accumulators in memory (M = 4 ran 2x slower).

/// Decoder::unitOf for a kind known at run time (the decode paths).
inline void decodeUnit(const Decoder& d, MxUnitKind kind, const uint8_t* p, Lanes::F (&w)[Lanes::kVecs]) {
  switch (kind) {
    case MxUnitKind::kInt8: return d.unitOf<MxUnitKind::kInt8>(p, w);
    case MxUnitKind::kNibble: return d.unitOf<MxUnitKind::kNibble>(p, w);
    case MxUnitKind::kSixBit: return d.unitOf<MxUnitKind::kSixBit>(p, w);
    case MxUnitKind::kFp8: return d.unitOf<MxUnitKind::kFp8>(p, w);
  }
}

template <int R, int MX, MxUnitKind K>
void rowsOf(const MxLinearRows& a, const Decoder& d, int64_t n, float* out) {
  using F = Lanes::F;
  constexpr int kV = Lanes::kVecs;
  const int64_t ub = mxUnitBytes(a.kind);
  const uint8_t* row[R];
  for (int r = 0; r < R; ++r) row[r] = a.codes + (n + r) * a.row_bytes;
  F tot[R][MX];
  for (auto& t : tot) {
    for (auto& v : t) v = Lanes::zero();
  }
  for (int64_t u0 = 0, b = 0; u0 < a.units; u0 += a.units_per_block, ++b) {
    F acc[R][MX][2];
    for (auto& x : acc) {
      for (auto& y : x) y[0] = y[1] = Lanes::zero();
    }
    const int64_t u1 = u0 + a.units_per_block < a.units ? u0 + a.units_per_block : a.units;
    for (int64_t u = u0; u < u1; ++u) {
      for (int r = 0; r < R; ++r) {
        if (((u * ub) & 63) < ub) _mm_prefetch(reinterpret_cast<const char*>(row[r] + u * ub + kPrefetchBytes), _MM_HINT_T0);
        F w[kV];
        d.template unitOf<K>(row[r] + u * ub, w);
        for (int i = 0; i < MX; ++i) {
          const float* xu = a.x + i * a.x_stride + u * kUnit;
          for (int q = 0; q < kV; q += 2) {
            acc[r][i][0] = Lanes::fmadd(w[q], Lanes::load(xu + q * (kUnit / kV)), acc[r][i][0]);
            acc[r][i][1] = Lanes::fmadd(w[q + 1], Lanes::load(xu + (q + 1) * (kUnit / kV)), acc[r][i][1]);
          }
        }
      }
    }
    for (int r = 0; r < R; ++r) {
      const F s = Lanes::set1(a.scale_values[a.scales[(n + r) * a.scale_stride + b]]);
      for (int i = 0; i < MX; ++i) tot[r][i] = Lanes::fmadd(Lanes::add(acc[r][i][0], acc[r][i][1]), s, tot[r][i]);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int i = 0; i < MX; ++i) out[r * a.m + i] = Lanes::sum(tot[r][i]);
  }
}

// Rows at a time: enough independent FMA chains to cover their latency, within the registers.
template <int MX, MxUnitKind K>
void rowsRange(const MxLinearRows& a, int64_t n0, int64_t n1, float* out) {
  constexpr int kRows = MX <= 2 ? Lanes::kRows1 : Lanes::kRows2;
  const Decoder d(a);
  int64_t n = n0;
  for (; n + kRows <= n1; n += kRows) rowsOf<kRows, MX, K>(a, d, n, out + (n - n0) * a.m);
  for (; n < n1; ++n) rowsOf<1, MX, K>(a, d, n, out + (n - n0) * a.m);
}

template <MxUnitKind K>
void rowsOfKind(const MxLinearRows& a, int64_t n0, int64_t n1, float* out) {
  switch (a.m) {
    case 1: rowsRange<1, K>(a, n0, n1, out); break;
    case 2: rowsRange<2, K>(a, n0, n1, out); break;
    case 3: rowsRange<3, K>(a, n0, n1, out); break;
    default: rowsRange<4, K>(a, n0, n1, out); break;
  }
}

void rows(const MxLinearRows& a, int64_t n0, int64_t n1, float* out) {
  switch (a.kind) {
    case MxUnitKind::kInt8: rowsOfKind<MxUnitKind::kInt8>(a, n0, n1, out); break;
    case MxUnitKind::kNibble: rowsOfKind<MxUnitKind::kNibble>(a, n0, n1, out); break;
    case MxUnitKind::kSixBit: rowsOfKind<MxUnitKind::kSixBit>(a, n0, n1, out); break;
    case MxUnitKind::kFp8: rowsOfKind<MxUnitKind::kFp8>(a, n0, n1, out); break;
  }
}
