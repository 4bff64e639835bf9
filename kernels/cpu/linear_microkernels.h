// Torch-free microkernels of the quantized linear ops: raw pointers and sizes only, one table
// per instruction set, picked at run time like the affine kernels (same PT2Q_CPU_ISA cap).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/cpu/affine_microkernels.h"

namespace pt2q::cpu {

/// One block of 4 weight rows in the "n4k16" layout (kernels/README.md) against `x_rows` (1 or
/// 2) rows of x, fp32 and zero-padded to chunks * 16 values, `x_stride` apart:
///   out[m * 4 + r] = sum_g scales[r * s_stride + g] * sum_{k in group g} w[r][k] * x[m][k]
/// with groups of `group_chunks` chunks (the whole row when per channel). Products accumulate in
/// fp32 (16 or 8 lanes, then a tree sum).
using LinearW8Block4Fn = void (*)(const int8_t* w, const float* x, int64_t x_stride, int64_t x_rows, int64_t chunks,
                                  int64_t group_chunks, const float* scales, int64_t s_stride, float* out);

/// The same for 4-bit weights in the "n4k32" layout: chunks of 32 k-values, nibbles holding
/// u = v + 8, and out = sum_g s * sum u * x (the caller subtracts s * (8 + zp) * sum x).
using LinearW4Block4Fn = LinearW8Block4Fn;

/// Rows [n0, n1) of a packed weight ("n4k16" / "n4k32", kp padded k-values per row) dequantized:
/// (v - zp) * s in fp32 with the group's scale s[r * groups + g] and zero point (zp may be null),
/// written row-major [n1 - n0, kp] as fp32 or, when bf16, as bf16 bits rounded to nearest even.
using LinearDequantRowsFn = void (*)(const int8_t* packed, int64_t kp, int64_t n0, int64_t n1, const float* s,
                                     const float* zp, int64_t groups, int64_t group_chunks, void* out, bool bf16);

/// Per-token asymmetric int8 quantization of `rows` fp32 rows of length k (quantized_decomposed's
/// choose_qparams_per_token_asymmetric + quantize_per_token, bit for bit): codes stored as
/// xu = q + 128, scales (fp64, the fp32 scale widened) and zero points per row. Returns the first
/// row holding NaN or Inf (its outputs unset), or -1.
using QuantizeRowsI8Fn = int64_t (*)(const float* x, int64_t rows, int64_t k, int64_t x_stride, uint8_t* xu,
                                     int64_t xu_stride, double* scales, int32_t* zero_points);
/// Per-group lane sums of the signed weights of `blocks` packed blocks (int8 "n4k16" or int4
/// "n4k32", nibbles read as u - 8): sums[(b * groups + g) * 16 + r * 4 + j] sums bytes
/// 4j..4j+3 of row r's 16-byte slice over the group's chunks. Input to the dot panels.
using LinearWeightSumsFn = void (*)(const int8_t* w, int64_t blocks, int64_t chunks, int64_t group_chunks,
                                    int32_t* sums);
/// `rows` rows of xu (padded to chunks * chunk k-values, `xu_stride` apart) against `blocks`
/// consecutive blocks: out[m * out_stride + 4b + r] = sum_g scales4[(b * groups + g) * 4 + r] *
/// (sum_{k in g} xu[m][k] w[4b + r][k] - zx[m] * sum_{k in g} w[4b + r][k]), the integer part exact
/// in int32, one fp32 conversion per group. With zx = zero point + 128 that is sum_g s (q - zp) w.
using LinearDotPanelFn = void (*)(const int8_t* w, int64_t blocks, int64_t chunks, int64_t group_chunks,
                                  const uint8_t* xu, int64_t xu_stride, int64_t rows, const int32_t* zx,
                                  const float* scales4, const int32_t* sums, float* out, int64_t out_stride);

/// `blocks` int4 blocks ("n4k32", `chunks` chunks each) written as int8 blocks ("n4k16",
/// 2 * chunks chunks each) of the same codes: many-row GEMMs decode each panel once this way.
using LinearExpandInt4Fn = void (*)(const int8_t* w, int64_t blocks, int64_t chunks, int8_t* out);

/// quantize_per_tensor's code of y = t * sx + b (fp32, in that order), as conv2d_q8 / linear_q8's
/// epilogue computes it: clamped first (the codes saturate anyway), so |v| < 2^22 and adding then
/// subtracting 1.5 * 2^23 rounds half to even as torch.round does, without a libm call.
struct Q8Epilogue {
  float sx, inv, zo, lo, hi;  // input scale, 1 / output scale, output zero point, clamp
  int8_t operator()(float t, float b) const {
    const float v = std::min(std::max((t * sx + b) * inv, lo - zo - 1.0f), hi - zo + 1.0f);
    const float r = (v + 12582912.0f) - 12582912.0f + zo;
    return static_cast<int8_t>(std::min(std::max(r, lo), hi));
  }
};

/// The geometry of a conv2d over channels-last x [n, h, w, c] into [n, oh, ow, oc].
struct ConvPixels {
  int64_t n = 0, h = 0, w = 0, c = 0, oc = 0, kh = 0, kw = 0, oh = 0, ow = 0;
  int64_t sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
};

/// A depthwise conv2d_q8 (one input channel per group): x channels last as int8 codes [n, h, w,
/// c], weights [kh * kw, oc] int32 (tap-major, so a tap's weights over the channels are
/// contiguous), output channel o reading input channel o / (oc / c). Output codes [n, oh, ow, oc];
/// taps outside the input add nothing ((zx - zx) w).
struct DepthwiseQ8 : ConvPixels {
  const int8_t* x = nullptr;
  int32_t zx = 0;           // input zero point
  const int32_t* wt = nullptr;
  const float* scales = nullptr;  // [oc]: t = float(sum) * scale
  const float* bias = nullptr;    // [oc]
  Q8Epilogue epilogue{};
  int8_t* out = nullptr;
};
/// Output rows [r0, r1) (r = image * oh + output row); `acc` holds oc int32 of scratch.
using DepthwiseQ8Fn = void (*)(const DepthwiseQ8& a, int64_t r0, int64_t r1, int32_t* acc);

/// A grouped conv2d_q8 with several input channels per group (cg a multiple of 4): x channels
/// last as unsigned codes u = q + 128 [n, h, w, c]; output channel o reads input channels
/// [g cg, g cg + cg) of group g = o / ocg. Weights tap-major in `vpdpbusd` order, [kh * kw][cg / 4]
/// [ocp][4] int8 (ocp = oc rounded up to 16, zero past oc), and per tap wsum[t * ocp + o] =
/// (zx + 128) * sum_c w[o, t, c], so that sum (u - zx - 128) w = sum u w - wsum over the taps
/// inside the input; row kh * kw of wsum holds the total over all taps. Output codes [n, oh, ow, oc], requantized as DepthwiseQ8's.
struct GroupedQ8 : ConvPixels {
  const uint8_t* x = nullptr;
  int64_t cg = 0, ocg = 0;
  const int8_t* wq = nullptr;
  const int32_t* wsum = nullptr;
  const float* scales = nullptr;  // [oc]
  const float* bias = nullptr;    // [oc]
  Q8Epilogue epilogue{};
  int8_t* out = nullptr;
};
/// Output pixels [p0, p1) (p = (image * oh + output row) * ow + output column).
using GroupedQ8Fn = void (*)(const GroupedQ8& a, int64_t p0, int64_t p1);
/// Whether the ISA's GroupedQ8Fn takes a layer of cg input and ocg output channels per group, oc
/// in all, kh * kw = taps.
using GroupedQ8TakesFn = bool (*)(int64_t cg, int64_t ocg, int64_t oc, int64_t taps);
/// conv2d_q8's residual over a row of outputs: codes r[c] whose dequantized value (float(r[c]) - z)
/// * s joins the bias (b + dq, in fp32) before the epilogue.
struct Q8RowResidual {
  const int8_t* codes;
  float s, z;
};
/// Q8Epilogue over n values: out[c] = e(t[c], (bias ? bias[c] : 0) [+ the residual's dq]), the
/// ISA's vectors for the bulk. res: null, or a residual row.
using Q8RequantizeFn = void (*)(const float* t, const float* bias, const Q8RowResidual* res, int64_t n,
                                const Q8Epilogue& e, int8_t* out);
/// conv2d_q8_float's epilogue over n values: out[c] = t[c] * sx + (bias ? bias[c] : 0) in fp32 (a
/// multiply, then an add: the requantizing epilogue's y, unrounded).
using Q8ScaleFn = void (*)(const float* t, const float* bias, int64_t n, float sx, float* out);
/// add_q8's constants: each operand dequantized as torch does, dq(v) = (float(v) - z) * s in fp32,
/// then `out` (its sx 1) on the two: the code of dq(a) + dq(b); with multiply (mul_q8), of
/// dq(a) * dq(b).
struct Q8AddConsts {
  float sa, za, sb, zb;
  Q8Epilogue out;
  bool multiply = false;
};
/// add_q8 / mul_q8 over n elements of a and b (same shape, contiguous).
using Q8AddFn = void (*)(const int8_t* a, const int8_t* b, int64_t n, const Q8AddConsts& c, int8_t* out);
/// lookup_q8 over n bytes: out[i] = table[in[i]] (table: 256 bytes).
using Q8LookupFn = void (*)(const uint8_t* in, int64_t n, const uint8_t* table, uint8_t* out);

/// Whether the input channels of the groups under any `lanes` consecutive output channels (from a
/// multiple of `lanes`) lie within `bytes` bytes: what one load of a pixel's codes hands a vector
/// of `lanes` output channels.
inline bool groupedWindowsFit(int64_t cg, int64_t ocg, int64_t oc, int64_t lanes, int64_t bytes) {
  for (int64_t o0 = 0; o0 < oc; o0 += lanes) {
    const int64_t first = o0 / ocg, last = (std::min(o0 + lanes, oc) - 1) / ocg;
    if ((last - first + 1) * cg > bytes) return false;
  }
  return true;
}

/// The VNNI direct kernel's layers (16 lanes, one 64-byte load): cg a multiple of 4, at most 64
/// taps, and the groups under any 16 output channels within 64 input bytes.
inline bool groupedLanes16Fit(int64_t cg, int64_t ocg, int64_t oc, int64_t taps) {
  return cg > 0 && cg % 4 == 0 && ocg > 0 && taps <= 64 && groupedWindowsFit(cg, ocg, oc, 16, 64);
}

struct LinearKernels {
  Isa isa;
  const char* name;
  LinearW8Block4Fn w8_block4;
  LinearW4Block4Fn w4_block4;
  LinearDequantRowsFn w8_dequant;
  LinearDequantRowsFn w4_dequant;
  QuantizeRowsI8Fn quantize_rows_i8;
  LinearWeightSumsFn w8_sums;
  LinearWeightSumsFn w4_sums;
  LinearDotPanelFn w8_dot;
  LinearDotPanelFn w4_dot;
  LinearExpandInt4Fn expand_int4;
  DepthwiseQ8Fn depthwise_q8;
  GroupedQ8Fn grouped_q8;  // nullptr where the ISA has no such kernel (generic)
  GroupedQ8TakesFn grouped_q8_takes;
  Q8RequantizeFn q8_requantize;
  Q8ScaleFn q8_scale;
  Q8AddFn q8_add;
  Q8LookupFn q8_lookup;
};

/// W4A16 for bf16 activations (AVX512_BF16). `prepare_x` permutes `rows` rows of bf16 x (padded
/// to kp, a multiple of 32) into the order `block4` reads, per 32-value chunk [even k < 16, odd
/// k < 16, even k >= 16, odd k >= 16], and writes each row's fp32 sum over every group of
/// `group_chunks` chunks to xsum[row * groups + g]. `block4` runs linear_w4a16's block of 4 rows
/// ("n4k32") against 1 or 2 rows of x (row m at x + m * x_stride), each the sum of `parts` (1 or
/// 2) bf16 parts interleaved by chunk (part j of chunk c at (c * parts + j) * 32, as split_x
/// writes them, then permuted chunk by chunk by prepare_x), each stored nibble u read as the bf16
/// 128 + u = v + 136:
///   out[m * 4 + r] = sum_g scales[r * s_stride + g] *
///                    (sum_{k in g} (128 + u) * x[m][k] - (136 + zp[r][g]) * xsum[m * s_stride + g])
/// where x[m][k] sums its parts (and xsum, from prepare_x over group_chunks * parts chunks, too),
/// with bf16 products summed in fp32 by `vdpbf16ps`; `offsets` holds (136 + zp) / 4 in the
/// scales' layout, or is nullptr for zp = 0. `block16` is block4 for one x row and the 4
/// consecutive blocks from `w` (16 rows, out[r] for r < 16, scales and offsets of 16 rows).
/// `split_x` writes `rows` rows of fp32 x (kp values each, kp a multiple of 32) as `parts` (1 or
/// 2) bf16 parts, row m's part j of chunk c at out[m * kp * parts + (c * parts + j) * 32]: x
/// rounded to nearest even, then what that rounding lost, rounded likewise (torch's "medium" and
/// "high" fp32 matmul precisions; denormals read as zero).
struct LinearW4Bf16Kernels {
  void (*prepare_x)(const uint16_t* x, int64_t rows, int64_t kp, int64_t group_chunks, uint16_t* xperm, float* xsum);
  void (*block4)(const int8_t* w, const uint16_t* x, int64_t x_stride, int64_t x_rows, int parts, int64_t chunks,
                 int64_t group_chunks, const float* scales, const float* offsets, int64_t s_stride, const float* xsum,
                 float* out);
  void (*block16)(const int8_t* w, const uint16_t* x, int64_t chunks, int64_t group_chunks, const float* scales,
                  const float* offsets, int64_t s_stride, const float* xsum, float* out);
  void (*split_x)(const float* x, int64_t rows, int64_t kp, int parts, uint16_t* out);
};
/// Those kernels when this CPU has AVX512_BF16 and PT2Q_CPU_ISA allows it (the default cap does,
/// avx512 does not), else nullptr.
const LinearW4Bf16Kernels* linearW4Bf16Kernel();
/// Whether this CPU has AVX512_BF16 and PT2Q_CPU_ISA allows it: then torch's bf16 GEMM runs on
/// native bf16 dot products; without them it is 2.6-3.3x slower than its fp32 GEMM (oneDNN and
/// MKL capped to AVX2 on the Zen 5 VM, 64-256 rows of 4096 x 4096 and 11008 x 4096).
bool nativeBf16Gemm();

/// W4A16 for fp32 activations (AVX-512, nibbles decoded by `vpermps`). `prepare_x` permutes `rows`
/// rows of fp32 x (padded to kp, a multiple of 32) into the order `block4` reads: within each
/// 32-value chunk, xperm[4p + q] = x[4q + p/2 + 16(p%2)]. `block4` runs linear_w4a16's block of
/// 4 rows ("n4k32") against 1 or 2 such rows with the signed codes v = u - 8:
///   out[m * 4 + r] = sum_g scales[r * s_stride + g] * sum_{k in g} v[r][k] * x[m][k]
/// (fp32 products and sums; the caller subtracts s * zp * sum(x) when there are zero points).
/// `block16` is block4 for one x row and the 4 consecutive blocks from `w` (out[r], r < 16).
struct LinearW4F32Kernels {
  void (*prepare_x)(const float* x, int64_t rows, int64_t kp, float* xperm);
  LinearW4Block4Fn block4;
  void (*block16)(const int8_t* w, const float* x, int64_t chunks, int64_t group_chunks, const float* scales,
                  int64_t s_stride, float* out);
};
/// Those kernels when the ISA in use is AVX-512, else nullptr.
const LinearW4F32Kernels* linearW4F32Kernel();

/// This CPU's L1 data cache in bytes (sysconf; 32 KiB when it does not say or says nonsense).
int64_t l1DataCacheBytes();

/// Whether this CPU executes a 512-bit vector op as two 256-bit halves (AMD Zen 4). There the
/// W4A16 block kernels are compute-bound at M = 1 and `block16`'s shared x loads pay; on CPUs
/// with full-width units the single-block kernels keep up with memory and `block16`'s 4 weight
/// streams per thread cost more than it saves (kernels/cpu/linear_weight_only_cpu.cpp).
bool cpuSplits512BitOps();

const LinearKernels& linearKernels();
/// Every table this CPU can run (tests compare them).
std::vector<const LinearKernels*> availableLinearKernels();

const LinearKernels& linearKernelsGeneric();
#if defined(__x86_64__) || defined(_M_X64)
const LinearKernels& linearKernelsAvx2();
const LinearKernels& linearKernelsAvx512();
/// AVX-512 with VNNI (`vpdpbusd`) for the int8-activation kernels.
const LinearKernels& linearKernelsAvx512Vnni();
const LinearW4Bf16Kernels* linearW4Bf16Avx512();
const LinearW4F32Kernels* linearW4F32Avx512();
#endif

}  // namespace pt2q::cpu
