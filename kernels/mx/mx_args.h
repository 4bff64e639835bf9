// Argument checks of the MX / BFP ops, shared by the reference, CPU and Meta kernels.
#pragma once

#include <array>
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

/// prepareMx for mx_quantize, which also needs at least one dimension (codes pack along the last).
MxSpec prepareMxQuantize(const at::Tensor& x, c10::string_view elem_format, int64_t block_size, int64_t axis,
                         c10::string_view rounding, c10::string_view scale_mode, bool flush_fp32_subnorms,
                         std::optional<int64_t> seed);

/// Copies the format and modes of `spec` into a kernel's argument struct that has these fields
/// (cpu::MxCall, cuda::MxLaunch).
template <class Call>
void fillMxModes(const MxSpec& spec, Call& c) {
  c.is_int = spec.format.is_int();
  c.emin = spec.format.emin();
  c.m = spec.format.stored_mbits();
  c.emax = spec.format.emax;
  c.max_norm = spec.format.max_norm;
  c.rounding = static_cast<uint8_t>(spec.rounding);
  c.scale_mode = static_cast<uint8_t>(spec.scale_mode);
  c.flush_fp32_subnorms = spec.flush_fp32_subnorms;
  c.random_key = streamKey(spec.seed);
}

/// [outer, len, inner] of the contiguous input around the quantized axis.
struct MxShape {
  int64_t outer = 1;
  int64_t len = 1;
  int64_t inner = 1;
  int64_t blocks_per_row = 1;
};
MxShape mxShape(const at::Tensor& x, const MxSpec& spec);

/// How a format's codes are stored (kernels/README.md, "MX code layout"): one element of
/// `dtype` per code, or `per_group` codes of `bits` bits packed into `group_bytes` bytes
/// along the last dimension.
struct CodeLayout {
  at::ScalarType dtype;  // kByte when packed
  int per_group = 1;
  int group_bytes = 1;
  int bits = 8;          // code width; for unpacked integers, the storage width
  bool packed() const { return per_group > 1; }
};
CodeLayout codeLayout(const ElemFormat& f);
/// The value of every code of a format of at most 8 bits (before the block scale), for table
/// lookups: integers sign-extended from their stored width times 2^-m, floats decoded
/// (sign | exponent | mantissa).
std::array<float, 256> codeTable(const ElemFormat& f, const CodeLayout& l);

/// Validated arguments of mx_dequantize: the format, its code layout, the axis and block size
/// and the logical (unpacked) shape of the result.
struct MxDequantArgs {
  ElemFormat format;
  CodeLayout layout;
  int64_t axis = 0;
  int64_t block = 1;
  std::vector<int64_t> sizes;
};
/// Throws naming the argument: unknown format, codes of the wrong dtype, scales that are not
/// uint8 or do not match the blocks, a last_dim the packed bytes cannot hold, bad axis.
MxDequantArgs prepareMxDequantize(const at::Tensor& codes, const at::Tensor& scales, c10::string_view elem_format,
                                  int64_t block_size, int64_t axis, std::optional<int64_t> last_dim,
                                  at::ScalarType output_dtype);

/// Shapes of mx_quantize's outputs for an input of `sizes`.
std::vector<int64_t> codesShape(at::IntArrayRef sizes, const CodeLayout& l);
std::vector<int64_t> scalesShape(at::IntArrayRef sizes, const MxSpec& spec);

/// The reference's per-block results, on the input moved to [..., blocks, block] with the
/// quantized axis last: element values q (before scaling), E8M0 bytes s and scales
/// ([..., blocks, 1], int32 / fp32), NaN blocks and flushed blocks.
struct MxBlocks {
  at::Tensor q, s, scale, dead, flushed;
  std::vector<int64_t> moved_sizes;
  int64_t len = 0, nb = 0;
};
MxBlocks mxBlocksRef(const at::Tensor& x, const MxSpec& spec);
/// A [..., blocks, block] tensor back to the input's layout (padding dropped).
at::Tensor mxUnblockRef(const at::Tensor& blocked, const MxBlocks& b, const MxSpec& spec, at::IntArrayRef sizes);

/// Reference implementation (plain ATen, any device); kernels/reference/mx.cpp.
at::Tensor mxFakeQuantizeRef(const at::Tensor& x, c10::string_view elem_format, int64_t block_size, int64_t axis,
                             c10::string_view rounding, c10::string_view scale_mode, bool flush_fp32_subnorms,
                             std::optional<int64_t> seed);

std::tuple<at::Tensor, at::Tensor> mxQuantizeRef(const at::Tensor& x, c10::string_view elem_format,
                                                 int64_t block_size, int64_t axis, c10::string_view rounding,
                                                 c10::string_view scale_mode, bool flush_fp32_subnorms,
                                                 std::optional<int64_t> seed);
at::Tensor mxDequantizeRef(const at::Tensor& codes, const at::Tensor& scales, c10::string_view elem_format,
                           int64_t block_size, int64_t axis, std::optional<int64_t> last_dim,
                           at::ScalarType output_dtype);

}  // namespace pt2q::mx
