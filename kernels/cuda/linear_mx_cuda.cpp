// CUDA glue of linear_mx. x is fake-quantized by mx_fake_quantize's CUDA kernel when an input
// format is given. For decode, a GEMV decodes the weight's codes in registers
// (linear_mx_cuda_kernels.h): on tensor cores for 2 to kLinearMxMmaMaxRows rows of bf16 / fp16 x
// (byte and 4-bit codes whose values are exact in x's type), else on CUDA cores up to
// kLinearMxGemvMaxRows rows; both sum in fp32 in their own fixed order. More rows of bf16 x: the
// wgmma GEMM on Hopper up to linearMxWgmmaMaxRows rows (byte and 4-bit codes). Past those, and
// for layouts they do not read: the weight dequantized to bf16 (exact for codes of at most 8 bits)
// for cuBLAS's bf16 GEMM with an fp32 result, x as it is (bf16) or as exact bf16 pieces (fp16,
// fp32), the bias in fp32, one rounding: the CPU's numerics within fp32 summation order, on
// tensor cores. Codes wider than 8 bits, and torch builds without aten::mm.dtype: the weight is
// dequantized to fp32 by mx_dequantize's CUDA kernel and the reference's fp32 matmul runs (the
// whole fp32 weight written every call).
// The benchmark's A/B switches: PT2Q_CUDA_LINEAR_MX_GEMV=0 keeps that last path for every call,
// PT2Q_CUDA_LINEAR_MX_MMA=0 the CUDA-core GEMV where it applies, PT2Q_CUDA_LINEAR_MX_GEMM=0 the
// bf16 dequantize path instead of the GEMM, PT2Q_CUDA_LINEAR_MX_BF16_MM=0 the fp32 path instead of
// the bf16 pieces; PT2Q_CUDA_LINEAR_MX_GEMM_MAX_ROWS moves the GEMM's
// upper bound, PT2Q_CUDA_LINEAR_MX_SPLITS (1 to 8) forces its split of K and
// PT2Q_CUDA_LINEAR_MX_TABLE=1 has it decode byte codes by their table.
#include <algorithm>
#include <array>
#include <cmath>
#include <optional>

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "kernels/cuda/glue.h"
#include "kernels/cuda/bf16_pieces_kernels.h"
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

// aten::mm.dtype: bf16 operands, an fp32 result, so fp32 sums throughout (a split K included). Null
// where this torch lacks the overload; linear_mx then keeps its fp32 path.
using MmToFloat = c10::TypedOperatorHandle<at::Tensor(const at::Tensor&, const at::Tensor&, at::ScalarType)>;
const MmToFloat* mmToFloat() {
  static const std::optional<MmToFloat> op = []() -> std::optional<MmToFloat> {
    const auto h = c10::Dispatcher::singleton().findSchema({"aten::mm", "dtype"});
    if (!h.has_value()) return std::nullopt;
    return h->typed<at::Tensor(const at::Tensor&, const at::Tensor&, at::ScalarType)>();
  }();
  return op.has_value() ? &*op : nullptr;
}

// x [m, k] (bf16, fp16 or fp32) times wt [k, n] (bf16) with an fp32 result: x as it is (bf16), or as
// its bf16 pieces (bf16_pieces_kernels.h), each product exact in fp32. Up to kStackedRows rows of
// pieces go as one GEMM of the pieces stacked by rows (the weight read once, as decode wants), the
// pieces' results then summed in order; past that, one GEMM per piece (no pieces-times-m fp32
// result).
constexpr int64_t kStackedRows = 512;
at::Tensor piecesTimesWeight(const MmToFloat& mm, const at::Tensor& x, const at::Tensor& wt, cudaStream_t stream) {
  const cuda::FloatType xt = cuda::floatTypeOf(x.scalar_type());
  const int pieces = cuda::bf16Pieces(xt);
  if (pieces == 1) return mm.call(x, wt, at::kFloat);
  const int64_t m = x.size(0), k = x.size(1);
  const at::Tensor xs = at::empty({pieces * m, k}, x.options().dtype(at::kBFloat16));
  cuda::checkLaunch(cuda::splitToBf16Pieces(x.const_data_ptr(), xt, m * k, xs.data_ptr(), stream), "linear_mx");
  if (pieces * m <= kStackedRows) {
    const at::Tensor ys = mm.call(xs, wt, at::kFloat);
    at::Tensor y = ys.narrow(0, 0, m);
    for (int p = 1; p < pieces; ++p) y.add_(ys.narrow(0, p * m, m));
    return y;
  }
  at::Tensor y = mm.call(xs.narrow(0, 0, m), wt, at::kFloat);
  for (int p = 1; p < pieces; ++p) y.add_(mm.call(xs.narrow(0, p * m, m), wt, at::kFloat));
  return y;
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
  if (a.m >= 1 && cuda::envOr("PT2Q_CUDA_LINEAR_MX_GEMV", 1) != 0) {
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
    // Past the GEMVs and the GEMM: every value of a code of at most 8 bits times a power of two is a
    // bf16 (but below 2^-126), so the weight dequantized to bf16 once feeds cuBLAS's bf16 GEMM with
    // an fp32 result: sums of exact products in fp32 (a bf16 result, as at::linear gives, lets
    // cuBLAS reduce a split K in bf16 under torch's allow_bf16_reduced_precision_reduction, on by
    // default; it failed the fp32 bound in the tests), then the fp32 bias and one rounding to x's
    // dtype, as the CPU's paths round. fp16 and fp32 x go as bf16 pieces whose sum is x
    // (bf16_pieces_kernels.h): the CPU's fp32 numerics within summation order, on tensor cores.
    const MmToFloat* mm = mmToFloat();
    if (a.layout.bits <= 8 && mm != nullptr && cuda::envOr("PT2Q_CUDA_LINEAR_MX_BF16_MM", 1) != 0) {
      const at::Tensor wt =
          dequantize.call(weight_codes, weight_scales, weight_format, block_size, -1, a.k, at::kBFloat16).t();
      at::Tensor y32 = piecesTimesWeight(*mm, xr, wt, stream);
      if (b.has_value()) y32.add_(*b);
      return y32.to(x.scalar_type()).reshape(linearOutputShape(input.sizes(), a.n));
    }
  }
  const at::Tensor w = dequantize.call(weight_codes, weight_scales, weight_format, block_size, -1, a.k, at::kFloat);
  return at::linear(x.to(at::kFloat), w, b).to(input.scalar_type());
}

}  // namespace
}  // namespace pt2q

TORCH_LIBRARY_IMPL(pt2q, CUDA, m) { m.impl("linear_mx", &pt2q::linearMxCuda); }
