// One-lane "vector" for the portable C++ kernels: the same interface as vec_avx2.h and
// vec_avx512.h, so affine_kernels_impl.h is written once. Included inside an ISA namespace by affine_kernels_impl.h,
// which includes the system headers first; this file includes none itself.

struct Vec {
  using F = float;
  using M = bool;
  static constexpr int N = 1;
  static F set1(float v) { return v; }
  static F load(const float* p) { return *p; }
  static F loadBF16(const uint16_t* p) { return bf16ToFloat(*p); }
  static F loadF16(const uint16_t* p) { return f16ToFloat(*p); }
  static void store(float* p, F v) { *p = v; }
  static void storeBF16(uint16_t* p, F v) { *p = floatToBF16(v); }
  static void storeF16(uint16_t* p, F v) { *p = floatToF16(v); }
  template <typename C>
  static F loadCodes(const C* p) { return static_cast<float>(*p); }
  template <typename C>
  static void storeCodes(C* p, F v) { *p = static_cast<C>(v); }
  static F add(F a, F b) { return a + b; }
  static F sub(F a, F b) { return a - b; }
  static F mul(F a, F b) { return a * b; }
  static F div(F a, F b) { return a / b; }
  static F roundEven(F a) { return std::nearbyint(a); }
  // NaN -> lo, like MAXPS with the bound as second operand.
  static F clampNanLow(F v, F lo, F hi) {
    v = (v > lo) ? v : lo;
    return (v < hi) ? v : hi;
  }
  static M inRange(F v, F lo, F hi) { return v >= lo && v <= hi; }
  static void storeMask(uint8_t* p, M m) { *p = m ? 1 : 0; }
  // No streaming stores in portable C++: the stream* calls are plain stores.
  static constexpr bool kHasStream = false;
  static void streamF32(float* p, F v) { store(p, v); }
  static void streamBF16(uint16_t* p, F v) { storeBF16(p, v); }
  static void streamF16(uint16_t* p, F v) { storeF16(p, v); }
  template <typename C>
  static void streamCodes(C* p, F v) { storeCodes(p, v); }
  static void fence() {}
  static F pmin(F acc, F x) { return (std::isnan(x) || x < acc) ? x : acc; }
  static F pmax(F acc, F x) { return (std::isnan(x) || x > acc) ? x : acc; }
  static float reduceMin(F v) { return v; }
  static float reduceMax(F v) { return v; }
};
