// The row kernels of pt2q::linear_mx (kernels/cpu/linear_mx_cpu.cpp), torch-free. A weight row is
// read in units of 32 consecutive codes (one unit never straddles a block: the block size is a
// multiple of 32); each unit decodes into two 16-lane fp32 vectors whose lanes follow the order
// mxUnitOrder gives, so x is permuted the same way once per call and every product is a plain
// vector FMA. A block's sum is multiplied by its E8M0 scale once.
#pragma once

#include <cstdint>

namespace pt2q::cpu {

enum class MxUnitKind : uint8_t {
  kInt8,    // 32 bytes, int8 codes: cvt to fp32 (the 2^-6 step is in the scale table)
  kNibble,  // 16 bytes, 2 codes per byte (fp4_e2m1, int4): a 16-entry table lookup (vpermps)
  kSixBit,  // 24 bytes, 4 codes per 3 bytes (fp6_e3m2, fp6_e2m3): a 64-entry table (vpermi2ps x2)
  kFp8,     // 32 bytes, OFP8 codes: sign | magnitude shifted into an fp32, times 2^(127 - bias)
};

struct MxLinearRows {
  MxUnitKind kind = MxUnitKind::kInt8;
  const uint8_t* codes = nullptr;   // [N, row_bytes]
  int64_t row_bytes = 0;
  const uint8_t* scales = nullptr;  // [N, scale_stride] E8M0 bytes
  int64_t scale_stride = 0;
  const float* scale_values = nullptr;  // 256 entries: the fp32 multiplier of each scale byte
  int64_t units = 0;            // whole units at the start of each row that the kernel covers
  int64_t units_per_block = 1;  // block_size / 32
  const float* table = nullptr;  // kNibble: 16 values, kSixBit: 64 values
  int fp8_shift = 20;            // kFp8: 20 (e4m3) or 21 (e5m2)
  float fp8_mult = 1.0f;         // kFp8: 2^(127 - bias)
  const float* x = nullptr;      // [m, units * 32], each unit permuted by mxUnitOrder
  int64_t x_stride = 0;
  int64_t m = 1;                 // 1..4
};

/// out[(n - n0) * m + i] = sum over row n's units of w * x[i], each block's sum times its scale.
using LinearMxRowsFn = void (*)(const MxLinearRows& a, int64_t n0, int64_t n1, float* out);
/// The weight itself over the units of rows [n0, n1), in natural order: out[(n - n0) * ld + k] =
/// value(code) * scale (mx_dequantize's fp32 values), for the GEMM path's tiles (x unused).
using LinearMxDecodeFn = void (*)(const MxLinearRows& a, int64_t n0, int64_t n1, float* out, int64_t ld);

/// Code rows [r0, r1) whose elements have scales of their own (blocks along an earlier axis than
/// the codes' last one): out[(r - r0) * ld + j] = value(code[r][j]) * 2^(s - 127) with
/// s = row_scales(r)[j], row_scales(r) = scales + ((o * blocks + l / block) * qn + q) * len_last
/// for r = (o * len + l) * qn + q; over the first a.units * 32 codes of each row.
/// Uses a.kind / codes / row_bytes / scales / table / fp8_* (a.scale_values is not read).
struct MxInnerRows {
  int64_t len = 1;       // the blocked axis's length
  int64_t blocks = 1;    // scales along it
  int64_t block = 1;
  int64_t qn = 1;        // code rows per position of the blocked axis (inner size / last size)
  int64_t len_last = 0;  // elements of a code row
};
using LinearMxDecodeInnerFn = void (*)(const MxLinearRows& a, const MxInnerRows& g, int64_t r0, int64_t r1,
                                       float* out, int64_t ld);

struct LinearMxKernels {
  LinearMxRowsFn rows;
  LinearMxDecodeFn decode;
  LinearMxDecodeInnerFn decode_inner;
};

/// MXINT8 weights times MXINT8 x with the same blocks along K (a multiple of 4): each block's
/// integer dot product in int32 (`vpdpbusd`, exact), scaled once by s_w * s_x. Output columns
/// are the broadcast operand, x rows the lanes, so the weight is read as mx_quantize stores it:
///   xu  [groups][k / 4][16 rows][4] bytes, code + 128 (rows past M: code 0), packed per call;
///   sx  [groups][blocks][16] fp32, 2^(e - 133) per x block (NaN for e = 255);
///   w   [N, k] int8 codes and their E8M0 scales [N, scale_stride].
/// out[row * ldo + n] = sum over blocks of s_w s_x sum_k w x, for rows [0, m) and columns [n0, n1).
struct MxInt8Gemm {
  const uint8_t* xu = nullptr;
  const float* sx = nullptr;
  int64_t groups = 0;  // 16-row groups of x
  const int8_t* w = nullptr;
  int64_t k = 0;       // a multiple of 4
  int64_t block = 0;   // a multiple of 4, at most kMxInt8GemmMaxBlock
  int64_t blocks = 0;
  const uint8_t* w_scales = nullptr;
  int64_t scale_stride = 0;
  const float* scale_values = nullptr;  // 256 entries: 2^(e - 133), NaN for 255
  float* out = nullptr;
  int64_t m = 0;    // x rows (at most groups * 16)
  int64_t ldo = 0;
};
/// (code + 128) x code sums of one block stay below 2^31 up to this block size.
constexpr int64_t kMxInt8GemmMaxBlock = 65536;
using LinearMxInt8GemmFn = void (*)(const MxInt8Gemm& a, int64_t n0, int64_t n1);

/// Bytes of a unit of 32 codes.
inline int64_t mxUnitBytes(MxUnitKind kind) {
  switch (kind) {
    case MxUnitKind::kNibble: return 16;
    case MxUnitKind::kSixBit: return 24;
    default: return 32;
  }
}

/// The element of a unit held by lane j (0-15: the first vector, 16-31: the second).
inline int mxUnitElement(MxUnitKind kind, int j) {
  const int v = j / 16, i = j % 16;
  switch (kind) {
    case MxUnitKind::kNibble: return 2 * i + v;                  // byte i: low nibble 2i, high 2i+1
    case MxUnitKind::kSixBit: return 4 * (i % 8) + 2 * v + i / 8;  // 3-byte group i % 8 holds 4 codes
    default: return j;
  }
}

/// The vector kernels for `kind`: AVX-512 where this CPU runs them (kSixBit also needs
/// AVX512_VBMI) and PT2Q_CPU_ISA allows it, else AVX2 (+FMA) where allowed, else nullptr (the op
/// then runs its portable loop).
const LinearMxKernels* linearMxKernels(MxUnitKind kind);
/// The MXINT8 x MXINT8 kernel where the CPU has AVX512_VNNI and PT2Q_CPU_ISA allows AVX-512.
LinearMxInt8GemmFn linearMxInt8Gemm();

#if defined(__x86_64__) || defined(_M_X64)
const LinearMxKernels* linearMxKernelsAvx512();
const LinearMxKernels* linearMxKernelsAvx2();
LinearMxInt8GemmFn linearMxInt8GemmVnni();
#endif

}  // namespace pt2q::cpu
