// CUDA glue of linear_w8a16 / linear_w4a16: the shared checks, then the GEMV kernels
// (linear_woq_cuda_kernels.cu: fp32 x, up to 16 rows; linear_woq_mma_kernels.cu: bf16 / fp16 x,
// up to 63 rows); more rows of bf16 / fp16 x take the GEMM that dequantizes in registers
// (linear_woq_gemm_kernels.cu, Hopper and up), else the weight dequantized in x's dtype
// (pack_cuda_kernels.cu) for cuBLAS; a K that is not a multiple of the chunk, or x that is not
// 16-byte aligned, take the reference path (dequantize in fp32, then cuBLAS).
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "kernels/cuda/glue.h"
#include "kernels/cuda/linear_woq_cuda_kernels.h"
#include "kernels/cuda/pack_cuda_kernels.h"
#include "kernels/linear_weight_only_args.h"

namespace pt2q {
namespace {

constexpr int64_t kGemvBelowRows = 64;  // bf16 / fp16 x: the GEMV below this many rows

template <int BITS>
at::Tensor linearWeightOnlyCuda(const at::Tensor& input, const at::Tensor& packed, const at::Tensor& scales,
                                const c10::optional<at::Tensor>& zero_points, const c10::optional<at::Tensor>& bias) {
  const char* op = BITS == 8 ? "linear_w8a16" : "linear_w4a16";
  const LinearWeightOnlyGeometry g = checkLinearWeightOnly(op, BITS, input, packed, scales, zero_points, bias);
  const c10::cuda::CUDAGuard guard(input.device());
  const at::Tensor x = input.reshape({g.m, g.k}).contiguous();
  const bool aligned = reinterpret_cast<uintptr_t>(x.const_data_ptr()) % 16 == 0;
  // bf16 / fp16 x from 64 rows on take F.linear's numerics, as on CPU: on the H100 the dequantize
  // + cuBLAS path ran 2x the tensor-core GEMV at 128 rows (0.39x against 0.20x bf16 F.linear).
  const bool wide = input.scalar_type() != at::kFloat;
  const int64_t max_rows = wide ? kGemvBelowRows - 1 : cuda::kWoqGemvMaxRows;
  const at::Tensor s = scales.to(at::kFloat).contiguous();
  const at::Tensor z = zero_points.has_value() ? zero_points->to(at::kFloat).contiguous() : at::Tensor();
  const auto* props = at::cuda::getCurrentDeviceProperties();
  const at::Tensor pk = packed.contiguous();
  cuda::WoqGemv a;
  a.packed = pk.const_data_ptr<int8_t>();
  a.bits = BITS;
  a.n = g.n;
  a.k = g.k;
  a.groups = g.groups;
  a.group_size = g.group_size;
  a.scales = s.const_data_ptr<float>();
  a.zero_points = z.defined() ? z.const_data_ptr<float>() : nullptr;
  a.x = x.const_data_ptr();
  a.xt = cuda::floatTypeOf(input.scalar_type());
  a.m = g.m;
  a.sm_count = props->multiProcessorCount;
  if (g.m > max_rows) {
    // The bias in x's dtype, as F.linear adds it.
    const c10::optional<at::Tensor> b =
        bias.has_value() ? c10::optional<at::Tensor>(bias->to(input.scalar_type())) : c10::nullopt;
    if (wide && g.m <= cuda::envOr("PT2Q_CUDA_WOQ_GEMM_MAX_ROWS", cuda::kWoqGemmMaxRows) &&
        cuda::linearWeightOnlyGemmTakes(a, props->major)) {
      const at::Tensor bf = b.has_value() ? b->to(at::kFloat).contiguous() : at::Tensor();
      at::Tensor y = at::empty({g.m, g.n}, input.options());
      a.bias = bf.defined() ? bf.const_data_ptr<float>() : nullptr;
      a.y = y.data_ptr();
      // wgmma on the H100; PT2Q_CUDA_WOQ_WGMMA=0 keeps the mma.sync GEMM (the benchmark's A/B)
      const bool wg = cuda::envOr("PT2Q_CUDA_WOQ_WGMMA", 1) != 0 && cuda::linearWeightOnlyWgmmaTakes(a);
      const int64_t splits = cuda::envOr("PT2Q_CUDA_WOQ_SPLITS", wg ? cuda::linearWeightOnlyWgmmaSplits(a)
                                                                 : cuda::linearWeightOnlyGemmSplits(a));
      TORCH_CHECK(splits >= 1 && splits <= 8, op, ": PT2Q_CUDA_WOQ_SPLITS (blocks that split K) must be 1 to 8, got ",
                  splits);
      const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
      cudaError_t err = wg ? cuda::linearWeightOnlyWgmma(a, static_cast<int>(splits), stream) : cudaErrorNotSupported;
      if (err == cudaErrorNotSupported) err = cuda::linearWeightOnlyGemm(a, static_cast<int>(splits), stream);
      cuda::checkLaunch(err, op);
      return y.reshape(linearOutputShape(input.sizes(), g.n));
    }
    // Else (and past kWoqGemmMaxRows) the weight dequantized once in x's dtype (one kernel,
    // rounded to nearest even), then cuBLAS: the same numerics. The GEMV would re-read the weight
    // for every 16 rows (0.05x bf16 F.linear at 2048 rows).
    at::Tensor w = at::empty({g.n, g.k}, input.options());
    cuda::checkLaunch(cuda::dequantWeight(a.packed, g.n, g.k, BITS, g.groups, g.group_size, a.scales, a.zero_points,
                                          w.data_ptr(), a.xt, at::cuda::getCurrentCUDAStream()),
                      op);
    return at::linear(input, w, b);
  }
  // k past 2^31: the kernels count chunks of k in an int (never seen; the reference still works)
  if (g.m == 0 || g.k % packChunk(BITS) != 0 || !aligned || g.k > INT32_MAX) {
    return linearWeightOnlyRef(op, BITS, input, packed, scales, zero_points, bias);
  }
  const at::Tensor b = bias.has_value() ? bias->to(at::kFloat).contiguous() : at::Tensor();
  at::Tensor y = at::empty({g.m, g.n}, input.options());
  a.bias = b.defined() ? b.const_data_ptr<float>() : nullptr;
  a.y = y.data_ptr();
  cuda::checkLaunch(cuda::linearWeightOnlyGemv(a, at::cuda::getCurrentCUDAStream()), op);
  return y.reshape(linearOutputShape(input.sizes(), g.n));
}

}  // namespace
}  // namespace pt2q

TORCH_LIBRARY_IMPL(pt2q, CUDA, m) {
  m.impl("linear_w8a16", &pt2q::linearWeightOnlyCuda<8>);
  m.impl("linear_w4a16", &pt2q::linearWeightOnlyCuda<4>);
}
