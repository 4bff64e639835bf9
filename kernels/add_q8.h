// Static int8 add and multiply (add_q8, mul_q8): int8 codes in, int8 codes out, each operand and the
// result with fixed per-tensor qparams (XNNPACKQuantizer's add / add-relu and mul / mul-relu
// patterns). The checks and the fp32 constants every backend shares.
#pragma once

#include <ATen/ATen.h>

#include <vector>

#include "kernels/cpu/linear_microkernels.h"

namespace pt2q {

/// add_q8's (mul_q8's, with multiply) arguments, checked.
struct AddQ8Args {
  double a_scale = 1.0, b_scale = 1.0, out_scale = 1.0;
  int64_t a_zero_point = 0, b_zero_point = 0, out_zero_point = 0, quant_min = -128, quant_max = 127;
  bool multiply = false;
  const char* op() const { return multiply ? "mul_q8" : "add_q8"; }
};

/// Checks dtypes, devices, qparams and that a and b broadcast; returns the output's shape.
std::vector<int64_t> checkAddQ8(const at::Tensor& a, const at::Tensor& b, const AddQ8Args& p);

/// The fp32 constants, as torch's dequantize / quantize ops round them: each scale cast to fp32,
/// 1 / output_scale divided in fp64 and then cast. The code of y = dq(a) + dq(b) is
/// Q8Epilogue{1, inv, zo, lo, hi}(dq(a), dq(b)), since dq(a) * 1 + dq(b) is y exactly (mul_q8:
/// Q8Epilogue{...}(dq(a) * dq(b), 0)).
cpu::Q8AddConsts addQ8Consts(const AddQ8Args& p);

/// The operands checked and broadcast to the output's shape (contiguous: a copy only where they
/// differ from it), with the fp32 constants: what the CPU and CUDA kernels start from.
struct AddQ8Operands {
  at::Tensor a, b;
  std::vector<int64_t> shape;
  cpu::Q8AddConsts consts;
};
AddQ8Operands addQ8Operands(const at::Tensor& a, const at::Tensor& b, const AddQ8Args& p);

/// The reference implementation (plain ATen, any device): torch's dequantize_per_tensor of each
/// operand, their sum (product), quantize_per_tensor.
at::Tensor addQ8Ref(const at::Tensor& a, const at::Tensor& b, const AddQ8Args& p);

}  // namespace pt2q
