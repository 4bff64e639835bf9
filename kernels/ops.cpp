// Every pt2q operator schema, in one TORCH_LIBRARY block. Implementations live in reference/
// (CompositeExplicitAutograd), cpu/, cuda/, meta/ and autograd/; semantics in kernels/README.md.
#include <torch/library.h>

TORCH_LIBRARY(pt2q, m) {
  // ---- Affine quantization primitives -------------------------------------------------------
  // Granularity is a block size per dimension, as in torchao: block_size[d] == input.size(d)
  // shares one qparam along d, 1 gives every index its own, anything between forms groups that
  // must divide the dimension. Per-tensor, per-channel (any axis), per-group and per-token are
  // all spelled this way. scale / zero_point hold one value per block, in any shape with that
  // many elements (choose_qparams_affine returns torchao's shape: the reduced dims dropped).
  //
  // zero_point_domain: "int"   q = clamp(round(x * (1/s)) + zp)            x' = (q - zp) * s
  //                    "float" q = clamp(round((x - (zp - s*mid)) / s))    x' = (q - mid) * s + zp
  //                    "none"  q = clamp(round(x * (1/s)))                 x' = q * s
  // with round = half to even, mid = (qmin + qmax + 1) / 2, arithmetic in fp32.
  // Target dtypes: int8, uint8, int16, uint16, int32, and torch.int1..int7 / uint1..uint7
  // (held in int8 / uint8, range of the narrow type).
  m.def(
      "choose_qparams_affine(Tensor input, str mapping_type, SymInt[] block_size, ScalarType target_dtype, "
      "int? quant_min=None, int? quant_max=None, float? eps=None, ScalarType? scale_dtype=None, "
      "ScalarType? zero_point_dtype=None, str zero_point_domain=\"int\") -> (Tensor scale, Tensor zero_point)");
  m.def(
      "quantize_affine(Tensor input, SymInt[] block_size, Tensor scale, Tensor? zero_point, ScalarType output_dtype, "
      "int? quant_min=None, int? quant_max=None, str zero_point_domain=\"int\") -> Tensor");
  m.def(
      "dequantize_affine(Tensor input, SymInt[] block_size, Tensor scale, Tensor? zero_point, ScalarType input_dtype, "
      "int? quant_min=None, int? quant_max=None, str zero_point_domain=\"int\", *, "
      "ScalarType output_dtype=float) -> Tensor");
  // Quantize then dequantize in one pass; output has the input's dtype. Differentiable:
  // straight-through gradient where round(x/s)+zp lies in [qmin, qmax], zero elsewhere.
  m.def(
      "fake_quantize_affine(Tensor input, SymInt[] block_size, Tensor scale, Tensor? zero_point, "
      "ScalarType quant_dtype, int? quant_min=None, int? quant_max=None, str zero_point_domain=\"int\") -> Tensor");
  // Same, plus the boolean mask of elements whose unclamped code is inside [qmin, qmax] (the
  // gradient mask); what the autograd kernel of fake_quantize_affine saves for backward.
  m.def(
      "fake_quantize_affine_cachemask(Tensor input, SymInt[] block_size, Tensor scale, Tensor? zero_point, "
      "ScalarType quant_dtype, int? quant_min=None, int? quant_max=None, str zero_point_domain=\"int\") "
      "-> (Tensor output, Tensor mask)");

  // ---- int4 packing -------------------------------------------------------------------------
  // Two 4-bit values per byte along the last dimension (which must be even).
  //   nibble_order="low_first":  byte[i] = (v[2i] & 0xF) | (v[2i+1] << 4)
  //   nibble_order="high_first": byte[i] = (v[2i] << 4) | (v[2i+1] & 0xF)
  // pack_int4 takes int8 in [-8, 7] or uint8 in [0, 15]; unpack_int4 returns int8
  // (sign-extended) when signed, else uint8.
  m.def("pack_int4(Tensor input, str nibble_order=\"low_first\") -> Tensor");
  m.def("unpack_int4(Tensor packed, bool signed=True, str nibble_order=\"low_first\") -> Tensor");

  // ---- MX / BFP block formats (kernels/README.md, Note [MX numerics]) -----------------------
  // Blocks of `block_size` elements along `axis` (0: the whole axis; a ragged last block acts
  // as zero-padded) share one E8M0 scale. elem_format: microxcaling's names (int8, int4, int2,
  // fp8_e5m2, fp8_e4m3, fp6_e3m2, fp6_e2m3, fp4_e2m1; int2..int16 for BFP). rounding: nearest
  // (ties away), even, floor (toward zero), stochastic (seeded; None draws the seed from the
  // default generator). scale_mode: floor (OCP), ceil, even, rceil. Straight-through gradient.
  m.def(
      "mx_fake_quantize(Tensor x, str elem_format, int block_size=32, int axis=-1, str rounding=\"nearest\", "
      "str scale_mode=\"floor\", bool flush_fp32_subnorms=False, int? seed=None) -> Tensor");
  // The real bits: (codes, scales). scales: uint8 E8M0 (255 = NaN), x's shape with `axis`
  // replaced by the number of blocks. codes (kernels/README.md, "MX code layout"): int8 for
  // MXINT8, int8 / int16 for other integer widths, float8_e4m3fn / float8_e5m2 for FP8, and
  // uint8 packed along the last dimension for int4 / fp4 (2 per byte), int2 (4 per byte) and
  // fp6 (4 per 3 bytes). mx_dequantize accepts FP8 codes as float8 or uint8; last_dim gives
  // the unpacked length of the last dimension when packing padded it.
  m.def(
      "mx_quantize(Tensor x, str elem_format, int block_size=32, int axis=-1, str rounding=\"nearest\", "
      "str scale_mode=\"floor\", bool flush_fp32_subnorms=False, int? seed=None) -> (Tensor codes, Tensor scales)");
  m.def(
      "mx_dequantize(Tensor codes, Tensor scales, str elem_format, int block_size=32, int axis=-1, "
      "int? last_dim=None, ScalarType output_dtype=float) -> Tensor");
  // BFP: integer elements of `bits` bits (sign included, 2..16) sharing an 8-bit exponent; the
  // same kernels as mx_fake_quantize with elem_format "int<bits>".
  m.def(
      "bfp_fake_quantize(Tensor x, int bits=8, int block_size=32, int axis=-1, str rounding=\"nearest\", "
      "str scale_mode=\"floor\", bool flush_fp32_subnorms=False, int? seed=None) -> Tensor");

  // linear_mx: F.linear(x, mx_dequantize(weight_codes, weight_scales, weight_format, block_size, -1,
  // K)) with x optionally MX fake-quantized along K first (input_format; rounding not
  // stochastic), accumulated in fp32, output in x's dtype. The weight is mx_quantize's storage of
  // a [N, K] weight blocked along K (kernels/README.md, "MX linear").
  m.def(
      "linear_mx(Tensor input, Tensor weight_codes, Tensor weight_scales, str weight_format, int block_size=32, "
      "Tensor? bias=None, str? input_format=None, int input_block_size=32, str input_rounding=\"nearest\", "
      "str input_scale_mode=\"floor\", bool input_flush_fp32_subnorms=False) -> Tensor");

  // ---- Quantized linear (kernels/README.md, "Packed int8 weights") ----------------------------
  // pack_weight_int8: int8 weight [N, K] -> the "n4k16" layout the linear kernels stream: rows in
  // blocks of 4, each block as K/16 chunks of 4 x 16 bytes (N padded to 4, K to 16, with zeros).
  m.def("pack_weight_int8(Tensor weight) -> Tensor");
  // W8A16: y = x @ ((w - zp) * s)^T + bias, with x fp32 / bf16 / fp16 [..., K] and y in x's
  // dtype; accumulation in fp32. scales [N] (per channel) or [N, K / group_size] (per group,
  // group_size a multiple of 16); zero_points (optional, integer) has the scales' shape.
  m.def(
      "linear_w8a16(Tensor input, Tensor packed_weight, Tensor scales, Tensor? zero_points=None, "
      "Tensor? bias=None) -> Tensor");
  // pack_weight_int4: int8 codes in [-8, 7], [N, K] -> "n4k32": blocks of 4 rows, each K/32
  // chunks of 4 x 16 bytes; byte l of a row's chunk holds k = 32c + l (low nibble) and
  // k = 32c + 16 + l (high nibble), as v + 8. Unsigned codes q in [0, 15] pack as q - 8 with
  // zero_point - 8.
  m.def("pack_weight_int4(Tensor weight) -> Tensor");
  // W4A16: linear_w8a16's contract with 4-bit codes; group_size a multiple of 32.
  m.def(
      "linear_w4a16(Tensor input, Tensor packed_weight, Tensor scales, Tensor? zero_points=None, "
      "Tensor? bias=None) -> Tensor");
  // Dynamic int8 activations: each token (row of input) is quantized inside the op exactly as
  // quantized_decomposed.choose_qparams_per_token_asymmetric + quantize_per_token quantize it
  // (asymmetric int8, XNNPACK's rule, on the input upcast to fp32); the products of codes
  // accumulate exactly in int32 per group, then y = s_x * sum_g s_w * (int sum) - zero-point
  // terms + bias, in x's dtype. Weights, scales and zero points as linear_w8a16 / linear_w4a16.
  // per_tensor_eps given: one scale and zero point for the whole input instead, chosen and applied
  // as torch's quantized_decomposed.choose_qparams.tensor(x, -128, 127, per_tensor_eps, int8) ->
  // quantize_per_tensor.tensor do it (the XNNPACK dynamic chain).
  m.def(
      "linear_w8a8(Tensor input, Tensor packed_weight, Tensor scales, Tensor? zero_points=None, "
      "Tensor? bias=None, float? per_tensor_eps=None) -> Tensor");
  m.def(
      "linear_w4a8(Tensor input, Tensor packed_weight, Tensor scales, Tensor? zero_points=None, "
      "Tensor? bias=None, float? per_tensor_eps=None) -> Tensor");
  // The activation quantization of linear_w8a8 on its own: int8 codes (input's shape), fp64
  // scales and int64 zero points ([..., 1]), bit-identical to the quantized_decomposed pair.
  m.def("quantize_per_token_int8(Tensor input) -> (Tensor codes, Tensor scales, Tensor zero_points)");
  // Static int8 linear / conv2d: int8 codes in (per-tensor input_scale / input_zero_point), int8
  // codes out, weights int8 symmetric per output channel packed by pack_weight_int8 (conv: the
  // weight [out_channels, in_channels, kh, kw] permuted to (out, kh, kw, in) and reshaped to
  // [out_channels, kh * kw * in_channels]: channels last; with groups, in_channels / groups per
  // row and output channel o reading input channels of group o / (out_channels / groups), as
  // F.conv2d), float bias. y = s_x * s_w *
  // sum (q_x - z_x) w + bias, then quantize_per_tensor's codes clamp(round(y / s_o) + z_o,
  // output_quant_min, output_quant_max) (a fused relu: output_quant_min = z_o). conv2d_q8's
  // optional residual (int8 codes of the output's shape, X86InductorQuantizer's conv -> add [->
  // relu] fusion) adds dequantize_per_tensor's (r - residual_zero_point) * residual_scale to y
  // before the rounding (and before the relu's clamp).
  m.def(
      "linear_q8(Tensor input, float input_scale, int input_zero_point, Tensor packed_weight, "
      "Tensor weight_scales, Tensor? bias, float output_scale, int output_zero_point, "
      "int output_quant_min=-128, int output_quant_max=127) -> Tensor");
  m.def(
      "conv2d_q8(Tensor input, float input_scale, int input_zero_point, Tensor packed_weight, "
      "Tensor weight_scales, Tensor? bias, int[2] kernel_size, int[2] stride, int[2] padding, int[2] dilation, "
      "float output_scale, int output_zero_point, int output_quant_min=-128, int output_quant_max=127, "
      "int groups=1, Tensor? residual=None, float residual_scale=1.0, int residual_zero_point=0) -> Tensor");
  // linear_q8 / conv2d_q8's products with a float output: y = s_x * s_w * sum (q_x - z_x) w + bias
  // as fp32 (linear: [..., out_features]), what the chain's fp32 op gives where nothing quantizes
  // its output (X86InductorQuantizer leaves a linear or conv whose consumer it does not quantize so).
  m.def(
      "linear_q8_float(Tensor input, float input_scale, int input_zero_point, Tensor packed_weight, "
      "Tensor weight_scales, Tensor? bias) -> Tensor");
  // conv2d_q8's convolution with a float output: y = s_x * s_w * sum (q_x - z_x) w + bias as fp32,
  // what the chain's fp32 conv gives where nothing quantizes its output (X86InductorQuantizer
  // leaves a conv whose consumer it does not quantize so).
  m.def(
      "conv2d_q8_float(Tensor input, float input_scale, int input_zero_point, Tensor packed_weight, "
      "Tensor weight_scales, Tensor? bias, int[2] kernel_size, int[2] stride, int[2] padding, int[2] dilation, "
      "int groups=1) -> Tensor");
  // Static int8 add: int8 codes a and b (broadcast against each other), each with its per-tensor
  // scale and zero point, give the int8 codes of their sum, bit for bit what the chain
  // dequantize_per_tensor(a) + dequantize_per_tensor(b) -> quantize_per_tensor gives (fp32
  // arithmetic in torch's order); a fused relu: output_quant_min = output_zero_point.
  m.def(
      "add_q8(Tensor a, float a_scale, int a_zero_point, Tensor b, float b_scale, int b_zero_point, "
      "float output_scale, int output_zero_point, int output_quant_min=-128, int output_quant_max=127) -> Tensor");
  // Static int8 multiply: add_q8's contract with dequantize_per_tensor(a) * dequantize_per_tensor(b)
  // (XNNPACK's mul / mul-relu; a squeeze-excitation block's gate times its input, broadcast).
  m.def(
      "mul_q8(Tensor a, float a_scale, int a_zero_point, Tensor b, float b_scale, int b_zero_point, "
      "float output_scale, int output_zero_point, int output_quant_min=-128, int output_quant_max=127) -> Tensor");
  // Max pooling of int8 or uint8 codes [N, C, H, W] (or [C, H, W]), windows as aten.max_pool2d's
  // (padding never wins). dequantize is monotonic and quantize inverts it exactly, so with the same
  // qparams before and after, dq -> max_pool2d -> q gives these codes (XNNPACK's and X86's max_pool2d
  // share their input's qparams).
  m.def(
      "max_pool2d_q8(Tensor input, int[2] kernel_size, int[2] stride, int[2] padding=0, int[2] dilation=1, "
      "bool ceil_mode=False) -> Tensor");
  // A 256-entry table lookup on int8 or uint8 codes: out[i] = table[codes[i] as an unsigned byte]
  // (int8 code c reads entry c & 255), in the table's dtype (int8 or uint8), the codes' shape.
  // dq -> any chain of elementwise unary ops -> q of per-tensor qparams maps each input code to
  // one output code, so the chain is this lookup with the table the chain computes on the 256
  // codes (convert/lower_static_unary.cpp: XNNPACK's unfused ReLU6, Hardswish, SiLU).
  m.def("lookup_q8(Tensor codes, Tensor table) -> Tensor");
}
