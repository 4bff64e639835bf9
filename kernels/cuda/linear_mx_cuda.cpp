// CUDA glue of linear_mx. x is fake-quantized by mx_fake_quantize's CUDA kernel when an input
// format is given. For decode, a GEMV decodes the weight's codes in registers
// (linear_mx_cuda_kernels.h): on tensor cores for 2 to kLinearMxMmaMaxRows rows of bf16 / fp16 x
// (byte and 4-bit codes whose values are exact in x's type), else on CUDA cores up to
// kLinearMxGemvMaxRows rows; both sum in fp32 in their own fixed order. More rows of bf16 x: the
// wgmma GEMM on Hopper up to linearMxWgmmaMaxRows rows (byte and 4-bit codes), else the weight
// dequantized to bf16 (exact for codes of at most 8 bits) for cuBLAS's bf16 GEMM, as the CPU runs
// bf16 x from 12 rows. Otherwise, and for layouts none of them reads (ragged chunks, codes wider
// than 8 bits, unaligned storage), the weight is dequantized by mx_dequantize's CUDA kernel and
// the reference's fp32 matmul runs: the reference's result bit for bit, but the whole fp32 weight
// is written every call.
// The benchmark's A/B switches: PT2Q_CUDA_LINEAR_MX_GEMV=0 keeps that last path for every call,
// PT2Q_CUDA_LINEAR_MX_MMA=0 the CUDA-core GEMV where it applies, PT2Q_CUDA_LINEAR_MX_GEMM=0 the
// bf16 dequantize path instead of the GEMM; PT2Q_CUDA_LINEAR_MX_GEMM_MAX_ROWS moves the GEMM's
// upper bound, PT2Q_CUDA_LINEAR_MX_SPLITS (1 to 8) forces its split of K and
// PT2Q_CUDA_LINEAR_MX_TABLE=1 has it decode byte codes by their table.
#include <algorithm>
#include <array>
#include <cmath>

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "kernels/cuda/glue.h"
#include "kernels/cuda/linear_mx_cuda_kernels.h"
#include "kernels/linear_mx.h"
#include "kernels/linear_weight_only_args.h"

namespace pt2q {
namespace {

// The table of the tensor-core GEMV: each code's value as x's 16-bit type (bits 8: one per code;
// bits 4: the two nibbles of each byte). False where a value is not exact there.
bool halfTable(const std::array<float, 256>& t, int bits, at::ScalarType xt, cuda::MxHalfTable& out) {
  const int codes = 1 << std::min(bits, 8);
  uint16_t h[256] = {};
  for (int c = 0; c < codes; ++c) {
    if (!std::isfinite(t[c])) return false;
    if (xt == at::kBFloat16) {
      const c10::BFloat16 v(t[c]);
      if (static_cast<float>(v) != t[c]) return false;
      h[c] = v.x;
    } else {
      const c10::Half v(t[c]);
      if (static_cast<float>(v) != t[c]) return false;
      h[c] = v.x;
    }
  }
  for (int i = 0; i < 256; ++i) {
    out.v[i] = bits == 4 ? static_cast<uint32_t>(h[i & 15]) | static_cast<uint32_t>(h[i >> 4]) << 16 : h[i];
  }
  return true;
}

at::Tensor linearMxCuda(const at::Tensor& input, const at::Tensor& weight_codes, const at::Tensor& weight_scales,
                        c10::string_view weight_format, int64_t block_size, const c10::optional<at::Tensor>& bias,
                        const std::optional<std::string>& input_format, int64_t input_block_size,
                        c10::string_view input_rounding, c10::string_view input_scale_mode,
                        bool input_flush_fp32_subnorms) {
  const LinearMxArgs a = checkLinearMx(input, weight_codes, weight_scales, weight_format, block_size, bias,
                                       input_format, input_block_size, input_rounding, input_scale_mode);
  const c10::cuda::CUDAGuard guard(input.device());
  static const auto dequantize =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("pt2q::mx_dequantize", "")
          .typed<at::Tensor(const at::Tensor&, const at::Tensor&, c10::string_view, int64_t, int64_t,
                            std::optional<int64_t>, at::ScalarType)>();
  static const auto fake_quantize =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("pt2q::mx_fake_quantize", "")
          .typed<at::Tensor(const at::Tensor&, c10::string_view, int64_t, int64_t, c10::string_view, c10::string_view,
                            bool, std::optional<int64_t>)>();
  const at::Tensor x = a.quantize_input ? fake_quantize.call(input, *input_format, input_block_size, -1, input_rounding,
                                                             input_scale_mode, input_flush_fp32_subnorms, std::nullopt)
                                        : input;
  const c10::optional<at::Tensor> b = bias.has_value() ? c10::optional<at::Tensor>(bias->to(at::kFloat)) : c10::nullopt;
  const int64_t gemv_rows = x.scalar_type() == at::kFloat ? cuda::kLinearMxGemvMaxRows : cuda::kLinearMxMmaMaxRows;
  const bool bf16 = x.scalar_type() == at::kBFloat16;
  if (a.m >= 1 && (a.m <= gemv_rows || bf16) && cuda::envOr("PT2Q_CUDA_LINEAR_MX_GEMV", 1) != 0) {
    const at::Tensor xr = x.reshape({a.m, a.k}).contiguous();
    const at::Tensor codes = weight_codes.contiguous(), scales = weight_scales.contiguous();
    const at::Tensor bf = b.has_value() ? b->contiguous() : at::Tensor();
    at::Tensor y = at::empty({a.m, a.n}, x.options());
    cuda::LinearMxGemv g;
    g.codes = static_cast<const uint8_t*>(codes.const_data_ptr());
    g.row_bytes = a.row_bytes;
    g.scales = scales.const_data_ptr<uint8_t>();
    g.blocks = scales.size(-1);
    g.block = a.block;
    g.packing.bits = a.layout.packed() ? a.layout.bits : static_cast<int>(codes.element_size()) * 8;
    g.packing.per_group = a.layout.per_group;
    g.packing.group_bytes = a.layout.group_bytes;
    g.x = xr.const_data_ptr();
    g.xt = cuda::floatTypeOf(x.scalar_type());
    g.m = a.m, g.n = a.n, g.k = a.k;
    g.bias = bf.defined() ? bf.const_data_ptr<float>() : nullptr;
    g.y = y.data_ptr();
    const std::array<float, 256> t = mx::codeTable(a.weight_format, a.layout);
    cuda::MxHalfTable half;
    const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    if (a.m > gemv_rows) {
      if (a.m <= cuda::envOr("PT2Q_CUDA_LINEAR_MX_GEMM_MAX_ROWS", cuda::linearMxWgmmaMaxRows(a.n)) &&
          cuda::envOr("PT2Q_CUDA_LINEAR_MX_GEMM", 1) != 0 && cuda::linearMxWgmmaTakes(g) &&
          halfTable(t, g.packing.bits, x.scalar_type(), half)) {
        const int64_t splits = cuda::envOr("PT2Q_CUDA_LINEAR_MX_SPLITS",
                                           cuda::linearMxWgmmaSplits(g, at::cuda::getCurrentDeviceProperties()->multiProcessorCount));
        TORCH_CHECK(splits >= 1 && splits <= 8,
                    "linear_mx: PT2Q_CUDA_LINEAR_MX_SPLITS (blocks that split K) must be 1 to 8, got ", splits);
        // PT2Q_CUDA_LINEAR_MX_TABLE=1: byte codes by the table, for the benchmark's A/B
        const cuda::MxDecode decode = g.packing.bits == 8 && cuda::envOr("PT2Q_CUDA_LINEAR_MX_TABLE", 0) == 0
                                          ? cuda::mxByteDecode(t.data())
                                          : cuda::MxDecode::kTable;
        cuda::checkLaunch(cuda::linearMxWgmma(g, half, decode, static_cast<int>(splits), stream), "linear_mx");
        return y.reshape(linearOutputShape(input.sizes(), a.n));
      }
      // Every value of a code of at most 8 bits times a power of two is a bf16 (but below 2^-126):
      // cuBLAS's bf16 GEMM sums in fp32 and rounds once, and a bf16 bias joins before that.
      if (a.layout.bits <= 8 && (!bias.has_value() || bias->scalar_type() == at::kBFloat16)) {
        const at::Tensor w =
            dequantize.call(weight_codes, weight_scales, weight_format, block_size, -1, a.k, at::kBFloat16);
        return at::linear(x, w, bias);
      }
    } else {
      // One row: the CUDA-core GEMV where it applies (on the H100 the tensor-core one ran 0.75-1.0x
      // its speed there, and 2.0-4.0x it at 8 rows).
      const bool one_row_gemv = a.m == 1 && cuda::linearMxGemvTakes(g);
      if (!one_row_gemv && cuda::linearMxMmaTakes(g) && halfTable(t, g.packing.bits, x.scalar_type(), half) &&
          cuda::envOr("PT2Q_CUDA_LINEAR_MX_MMA", 1) != 0) {
        cuda::checkLaunch(cuda::linearMxMma(g, half, stream), "linear_mx");
        return y.reshape(linearOutputShape(input.sizes(), a.n));
      }
      if (cuda::linearMxGemvTakes(g)) {
        cuda::MxCodeTable table;
        std::copy(t.begin(), t.end(), table.v);
        cuda::checkLaunch(cuda::linearMxGemv(g, table, stream), "linear_mx");
        return y.reshape(linearOutputShape(input.sizes(), a.n));
      }
    }
  }
  const at::Tensor w = dequantize.call(weight_codes, weight_scales, weight_format, block_size, -1, a.k, at::kFloat);
  return at::linear(x.to(at::kFloat), w, b).to(input.scalar_type());
}

}  // namespace
}  // namespace pt2q

TORCH_LIBRARY_IMPL(pt2q, CUDA, m) { m.impl("linear_mx", &pt2q::linearMxCuda); }
