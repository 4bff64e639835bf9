// Argument checks of the MX / BFP ops, shared by the reference, CPU and Meta kernels.
#pragma once

#include <optional>

#include <ATen/ATen.h>

#include "kernels/mx/mx_format.h"

namespace pt2q::mx {

/// Validated arguments of mx_fake_quantize for one input.
struct MxSpec {
  ElemFormat format;
  Rounding rounding;
  ScaleMode scale_mode;
  bool flush_fp32_subnorms;
  int64_t axis;   // normalized to [0, dim)
  int64_t block;  // block size along axis; 0 (whole axis) resolved to the axis length (>= 1)
  uint64_t seed;  // stochastic rounding seed (explicit, or drawn from the default generator)
};

/// Throws naming the argument: unknown format / rounding / scale mode, bad axis, negative
/// block size, input dtype other than fp32/bf16/fp16. Draws a seed from torch's default CPU
/// generator when rounding is stochastic and seed is None.
MxSpec prepareMx(const at::Tensor& x, c10::string_view elem_format, int64_t block_size, int64_t axis,
                 c10::string_view rounding, c10::string_view scale_mode, bool flush_fp32_subnorms,
                 std::optional<int64_t> seed, const char* op);

/// [outer, len, inner] of the contiguous input around the quantized axis.
struct MxShape {
  int64_t outer = 1;
  int64_t len = 1;
  int64_t inner = 1;
  int64_t blocks_per_row = 1;
};
MxShape mxShape(const at::Tensor& x, const MxSpec& spec);

/// Reference implementation (plain ATen, any device); kernels/reference/mx.cpp.
at::Tensor mxFakeQuantizeRef(const at::Tensor& x, c10::string_view elem_format, int64_t block_size, int64_t axis,
                             c10::string_view rounding, c10::string_view scale_mode, bool flush_fp32_subnorms,
                             std::optional<int64_t> seed);

}  // namespace pt2q::mx
