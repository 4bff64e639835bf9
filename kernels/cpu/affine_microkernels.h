// Torch-free microkernels of the affine ops and int4 packing: raw pointers and sizes only.
// One table per instruction set (generic C++, AVX2, AVX-512), picked at run time by
// affineKernels(); see kernels/README.md for naming and semantics.
#pragma once

#include <cstdint>
#include <vector>

namespace pt2q::cpu {

/// Floating element types the kernels read and write.
enum class FloatKind : uint8_t { kF32 = 0, kBF16 = 1, kF16 = 2 };
constexpr int kNumFloatKinds = 3;
/// Integer code types (sub-byte codes live in kI8 / kU8 with a narrower range).
enum class CodeKind : uint8_t { kI8 = 0, kU8 = 1, kI16 = 2, kU16 = 3, kI32 = 4 };
constexpr int kNumCodeKinds = 5;
enum class QDomain : uint8_t { kInt, kFloat, kNone };

/// Constants of one call. qmin/qmax are the integer range; for int32 codes they may not be
/// exact in fp32, so kernels clamp in fp32 and then once more in int64 (as the reference does).
struct QuantParams {
  int64_t qmin;
  int64_t qmax;
  QDomain domain;
  /// Write the output with streaming (non-temporal) stores where the ISA has them: faster for
  /// outputs much larger than the last-level cache, slower for outputs read again soon.
  bool stream_stores = false;
};

// Every kernel handles n elements whose qparams are either one value (qp_stride == 0) or one
// per element (qp_stride == 1, per-channel along the innermost dimension). zp may be null
// (no zero point). See Note [Affine kernel semantics] in kernels/README.md for the formulas.
using QuantizeFn = void (*)(const void* x, void* q, int64_t n, const float* scale, const float* zp,
                            int64_t qp_stride, const QuantParams& p);
using DequantizeFn = void (*)(const void* q, void* y, int64_t n, const float* scale, const float* zp,
                              int64_t qp_stride, const QuantParams& p);
/// y = dequantize(quantize(x)) in x's type; mask (nullable) gets 1 where the unclamped code
/// lies in [qmin, qmax].
using FakeQuantizeFn = void (*)(const void* x, void* y, uint8_t* mask, int64_t n, const float* scale,
                                const float* zp, int64_t qp_stride, const QuantParams& p);
/// acc_stride == 0: folds all n elements into *mn / *mx. acc_stride == 1: mn[i] / mx[i]
/// accumulate element i. NaN propagates (as torch.amin / amax).
using MinMaxFn = void (*)(const void* x, int64_t n, float* mn, float* mx, int64_t acc_stride);
/// Packs 2 * n_bytes 4-bit values into n_bytes. Returns the index of the first value out of
/// range ([-8, 7] signed, [0, 15] unsigned), or -1 when all are in range.
using PackInt4Fn = int64_t (*)(const uint8_t* in, uint8_t* out, int64_t n_bytes, bool high_first, bool is_signed);
/// Unpacks n_bytes into 2 * n_bytes values, sign-extending when is_signed.
using UnpackInt4Fn = void (*)(const uint8_t* in, uint8_t* out, int64_t n_bytes, bool high_first, bool is_signed);

enum class Isa : uint8_t { kGeneric = 0, kAvx2 = 1, kAvx512 = 2 };

struct AffineKernels {
  Isa isa;
  const char* name;
  QuantizeFn quantize[kNumFloatKinds][kNumCodeKinds];
  DequantizeFn dequantize[kNumCodeKinds][kNumFloatKinds];
  FakeQuantizeFn fake_quantize[kNumFloatKinds];
  MinMaxFn minmax[kNumFloatKinds];
  PackInt4Fn pack_int4;
  UnpackInt4Fn unpack_int4;
};

/// The best table this CPU supports. PT2Q_CPU_ISA=generic|avx2|avx512 caps the choice
/// (for testing and for bisecting numerical reports).
const AffineKernels& affineKernels();
/// Every table this CPU can run, generic first.
std::vector<const AffineKernels*> availableAffineKernels();

// Per-ISA tables, each defined in its own file compiled with that ISA's flags.
const AffineKernels& affineKernelsGeneric();
const AffineKernels& affineKernelsAvx2();
const AffineKernels& affineKernelsAvx512();

}  // namespace pt2q::cpu
