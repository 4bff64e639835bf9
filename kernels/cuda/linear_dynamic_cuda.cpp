// CUDA glue of linear_w8a8 / linear_w4a8: the shared checks, then per-token quantization and the
// int8 tensor-core GEMV (linear_dynamic_cuda_kernels.cu, 16 rows of x per slice of its grid) or,
// for many rows, GEMM (linear_dynamic_gemm_kernels.cu). The
// per-tensor variant (per_tensor_eps) quantizes x with torch's ops and then runs the same GEMV. A
// K that is not a multiple of the chunk and int8 groups that are not a multiple of 32 take the
// reference path.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <vector>

#include "kernels/cuda/dyn_wgmma_workspace.h"
#include "kernels/cuda/glue.h"
#include "kernels/cuda/linear_dynamic_cuda_kernels.h"
#include "kernels/linear_dynamic.h"
#include "kernels/linear_weight_only_args.h"

namespace pt2q {
namespace {

template <int BITS>
at::Tensor linearDynamicCuda(const at::Tensor& input, const at::Tensor& packed, const at::Tensor& scales,
                             const c10::optional<at::Tensor>& zero_points, const c10::optional<at::Tensor>& bias,
                             c10::optional<double> per_tensor_eps) {
  const char* op = BITS == 8 ? "linear_w8a8" : "linear_w4a8";
  const LinearWeightOnlyGeometry g = checkLinearWeightOnly(op, BITS, input, packed, scales, zero_points, bias);
  if (g.m == 0 || g.m > cuda::kDynGemvMaxRows || g.k % packChunk(BITS) != 0 ||
      !cuda::linearDynamicGemvTakes(BITS, g.groups, g.group_size)) {
    return linearDynamicRef(op, BITS, input, packed, scales, zero_points, bias, per_tensor_eps);
  }
  const c10::cuda::CUDAGuard guard(input.device());
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const at::Tensor x = input.reshape({g.m, g.k}).contiguous();
  cuda::TokenCodes tc;
  at::Tensor work, codes;
  if (per_tensor_eps.has_value()) {
    // One scale for all rows, chosen and applied by torch's ops on the device (they read the
    // scale back to the host, and a non-finite input is an error, as on CPU); the GEMV then takes
    // the codes as per-token codes whose rows share it.
    const auto [q, scale, zp] = quantizePerTensorRef(op, x, *per_tensor_eps);
    codes = q.contiguous();
    work = at::empty({2 * g.m}, input.options().dtype(at::kInt));
    work.slice(0, 0, g.m).fill_(zp);
    work.slice(0, g.m).view(at::kFloat).fill_(static_cast<float>(scale));
    tc.codes = codes.data_ptr<int8_t>();
    tc.zero_points = work.data_ptr<int32_t>();
    tc.scales = reinterpret_cast<float*>(work.data_ptr<int32_t>() + g.m);
  } else {
    // One workspace: codes [m, k] (rows 16-byte aligned: k is a multiple of 16), zero points, scales.
    const int64_t codes_bytes = roundUp(g.m * g.k, 16);
    work = at::empty({codes_bytes + 8 * g.m}, input.options().dtype(at::kByte));
    tc.codes = reinterpret_cast<int8_t*>(work.data_ptr<uint8_t>());
    tc.zero_points = reinterpret_cast<int32_t*>(work.data_ptr<uint8_t>() + codes_bytes);
    tc.scales = reinterpret_cast<float*>(work.data_ptr<uint8_t>() + codes_bytes + 4 * g.m);
    const cudaError_t err =
        cuda::quantizeTokensInt8(x.const_data_ptr(), cuda::floatTypeOf(input.scalar_type()), g.m, g.k, tc, stream);
    cuda::checkLaunch(err, op);
  }

  const at::Tensor s = scales.to(at::kFloat).contiguous();
  const at::Tensor z = zero_points.has_value() ? zero_points->to(at::kFloat).contiguous() : at::Tensor();
  const at::Tensor b = bias.has_value() ? bias->to(at::kFloat).contiguous() : at::Tensor();
  at::Tensor y = at::empty({g.m, g.n}, input.options());
  const at::Tensor pw = packed.contiguous();
  cuda::DynGemv a;
  a.packed = pw.const_data_ptr<int8_t>();
  a.bits = BITS;
  a.n = g.n;
  a.k = g.k;
  a.groups = g.groups;
  a.group_size = g.group_size;
  a.scales = s.const_data_ptr<float>();
  a.zero_points = z.defined() ? z.const_data_ptr<float>() : nullptr;
  a.x = tc;
  a.m = g.m;
  a.bias = b.defined() ? b.const_data_ptr<float>() : nullptr;
  a.y = y.data_ptr();
  a.yt = cuda::floatTypeOf(input.scalar_type());
  a.sm_count = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  // The Hopper GEMM's workspace, where it takes the call: the weight's row sums, and the weight
  // unpacked to rows for the copy engine.
  cuda::DynWgmmaWorkspace workspace;
  if (cuda::linearDynamicWgmmaTakes(a)) workspace = cuda::allocDynWgmmaWorkspace(a, input.options());
  cuda::checkLaunch(cuda::linearDynamicGemv(a, stream), op);
  return y.reshape(linearOutputShape(input.sizes(), g.n));
}

// The op on its own, from the same kernel. Here a row with NaN or Inf is an error, as on CPU (the
// one host sync is this op's, not the linears').
std::tuple<at::Tensor, at::Tensor, at::Tensor> quantizePerTokenCuda(const at::Tensor& input) {
  checkPerTokenInput(input);
  const c10::cuda::CUDAGuard guard(input.device());
  const int64_t k = input.size(-1), m = input.numel() / k;
  const at::Tensor x = input.reshape({m, k}).contiguous();
  at::Tensor codes = at::empty({m, k}, input.options().dtype(at::kChar));
  at::Tensor zp = at::empty({m}, input.options().dtype(at::kInt));
  at::Tensor sf = at::empty({m}, input.options().dtype(at::kFloat));
  const cuda::TokenCodes tc{codes.data_ptr<int8_t>(), zp.data_ptr<int32_t>(), sf.data_ptr<float>()};
  const cudaError_t err =
      cuda::quantizeTokensInt8(x.const_data_ptr(), cuda::floatTypeOf(input.scalar_type()), m, k, tc, at::cuda::getCurrentCUDAStream());
  cuda::checkLaunch(err, "quantize_per_token_int8");
  if (m > 0) {
    const at::Tensor bad = sf.isnan();
    if (bad.any().item<bool>()) {
      failNonFiniteToken("quantize_per_token_int8", input, bad.nonzero().index({0, 0}).item<int64_t>());
    }
  }
  std::vector<int64_t> qshape(input.sizes().begin(), input.sizes().end());
  qshape.back() = 1;
  return {codes.reshape(input.sizes()), sf.to(at::kDouble).reshape(qshape), zp.to(at::kLong).reshape(qshape)};
}

}  // namespace
}  // namespace pt2q

TORCH_LIBRARY_IMPL(pt2q, CUDA, m) {
  m.impl("quantize_per_token_int8", &pt2q::quantizePerTokenCuda);
  m.impl("linear_w8a8", &pt2q::linearDynamicCuda<8>);
  m.impl("linear_w4a8", &pt2q::linearDynamicCuda<4>);
}
