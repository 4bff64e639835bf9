// Static int8 linear and conv2d (linear_q8, conv2d_q8): int8 codes in, int8 codes out, the
// qparams fixed by calibration (what XNNPACKQuantizer / X86InductorQuantizer produce). Argument
// checks, the conv geometry and the reference implementations, shared by every backend.
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <array>

#include "kernels/cpu/linear_microkernels.h"

namespace pt2q {

/// The per-tensor output quantization: codes = clamp(round(y * (1 / scale)) + zero_point).
struct Q8Output {
  double scale = 1.0;
  int64_t zero_point = 0, quant_min = -128, quant_max = 127;
};

/// conv2d_q8's optional residual: int8 codes of the output's shape [N, OC, OH, OW], whose
/// dequantize_per_tensor value (r - zero_point) * scale joins y before the output's rounding (the
/// conv -> add [-> relu] fusion of X86InductorQuantizer, where the conv's output is not quantized).
struct Q8Residual {
  c10::optional<at::Tensor> codes;
  double scale = 1.0;
  int64_t zero_point = 0;
  bool on() const { return codes.has_value(); }
};

/// linear_q8's checks; returns (m, k, n). `op` names the op in errors (linear_q8_float passes a
/// default Q8Output).
std::array<int64_t, 3> checkLinearQ8(const at::Tensor& input, double input_scale, int64_t input_zero_point,
                                     const at::Tensor& packed, const at::Tensor& weight_scales,
                                     const c10::optional<at::Tensor>& bias, const Q8Output& out,
                                     const char* op = "linear_q8");

struct Conv2dQ8Geometry {
  int64_t n = 0, c = 0, h = 0, w = 0, oc = 0, kh = 0, kw = 0, oh = 0, ow = 0;
  int64_t sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
  int64_t groups = 1;
  int64_t cg() const { return c / groups; }    // input channels per group
  int64_t ocg() const { return oc / groups; }  // output channels per group
  int64_t k() const { return cg() * kh * kw; }  // one im2col row: kh, then kw, then the group's c
};

/// Whether a grouped conv2d_q8 runs the direct kernel on a CPU with VNNI (cpu/grouped_q8_impl.h)
/// rather than a GEMM per group: cg (input channels per group) a multiple of 4, at most 64 taps,
/// and the input channels of the groups under any 16 consecutive output channels (from a multiple
/// of 16) within 64 bytes. lower-to-native lowers the grouped convolutions that fit (CUDA runs every
/// grouped one directly; AVX2's kernel takes most of them, the rest run the GEMMs).
inline bool groupedConvRunsDirect(int64_t cg, int64_t ocg, int64_t oc, int64_t taps) {
  return cpu::groupedLanes16Fit(cg, ocg, oc, taps);
}

/// conv2d_q8's checks (the residual's too) and output geometry; `op` names the op in errors
/// (conv2d_q8_float passes a default Q8Output, which it does not use).
Conv2dQ8Geometry checkConv2dQ8(const at::Tensor& input, double input_scale, int64_t input_zero_point,
                               const at::Tensor& packed, const at::Tensor& weight_scales,
                               const c10::optional<at::Tensor>& bias, at::IntArrayRef kernel_size,
                               at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                               const Q8Output& out, int64_t groups, const Q8Residual& residual = {},
                               const char* op = "conv2d_q8");

/// Reference implementations (plain ATen, any device): the integer sum exact in fp64, then
/// y = s_x * s_w * sum + bias and torch's quantize_per_tensor rounding, in fp64.
at::Tensor linearQ8Ref(const at::Tensor& input, double input_scale, int64_t input_zero_point,
                       const at::Tensor& packed, const at::Tensor& weight_scales, const c10::optional<at::Tensor>& bias,
                       const Q8Output& out);
at::Tensor conv2dQ8Ref(const at::Tensor& input, double input_scale, int64_t input_zero_point,
                       const at::Tensor& packed, const at::Tensor& weight_scales, const c10::optional<at::Tensor>& bias,
                       at::IntArrayRef kernel_size, at::IntArrayRef stride, at::IntArrayRef padding,
                       at::IntArrayRef dilation, const Q8Output& out, int64_t groups, const Q8Residual& residual = {});
/// linear_q8_float's reference: the exact sum, y = s_x * s_w * sum + bias in fp64, as fp32.
at::Tensor linearQ8FloatRef(const at::Tensor& input, double input_scale, int64_t input_zero_point,
                            const at::Tensor& packed, const at::Tensor& weight_scales,
                            const c10::optional<at::Tensor>& bias);
/// conv2d_q8_float's reference: the same exact sum, y = s_x * s_w * sum + bias in fp64, as fp32.
at::Tensor conv2dQ8FloatRef(const at::Tensor& input, double input_scale, int64_t input_zero_point,
                            const at::Tensor& packed, const at::Tensor& weight_scales,
                            const c10::optional<at::Tensor>& bias, at::IntArrayRef kernel_size,
                            at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups);

}  // namespace pt2q
