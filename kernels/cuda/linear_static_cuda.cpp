// CUDA glue of linear_q8 / conv2d_q8: the shared checks, then the int8 tensor-core GEMV of the
// dynamic linears in its linear_q8 mode (exact int32 sums, requantized in fp32 as on CPU; their
// GEMMs from kDynGemmMinRows rows, on Hopper's wgmma from kDynWgmmaMinRows); conv2d_q8
// first lays its input out as im2col rows (im2col_cuda_kernels.h). A K over kQ8MaxK takes the
// reference, whose sums are fp64: past it, int32 sums of (q - zx) w could overflow. Grouped and
// depthwise convolutions (groups > 1) run a direct kernel (conv2d_q8_grouped_kernels.h). A residual
// rides along in Q8Requant, in the layout of each kernel's output.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <algorithm>

#include "kernels/cuda/conv2d_q8_grouped_kernels.h"
#include "kernels/cuda/dyn_wgmma_workspace.h"
#include "kernels/cuda/glue.h"
#include "kernels/cuda/im2col_cuda_kernels.h"
#include "kernels/cuda/linear_dynamic_cuda_kernels.h"
#include "kernels/linear_static.h"
#include "kernels/linear_weight_only_args.h"

namespace pt2q {
namespace {

// |q - zx| <= 255 and |w| <= 128: 65536 products stay inside int32.
constexpr int64_t kQ8MaxK = 65536;


// The requantization's fp32 constants, rounded as the CPU's Q8Epilogue rounds them.
cuda::Q8Requant requantArgs(double input_scale, int64_t input_zero_point, const Q8Output& q) {
  cuda::Q8Requant r;
  r.on = true;
  r.zx = static_cast<int32_t>(input_zero_point);
  r.sx = static_cast<float>(input_scale);
  r.inv = static_cast<float>(1.0 / q.scale);
  r.zo = static_cast<float>(q.zero_point);
  r.lo = static_cast<float>(q.quant_min);
  r.hi = static_cast<float>(q.quant_max);
  return r;
}

// The residual's codes in the layout of out (contiguous) and its fp32 constants, set on q8.
void setResidual(cuda::Q8Requant& q8, const Q8Residual& r, const at::Tensor& codes) {
  if (!r.on()) return;
  q8.residual = codes.const_data_ptr<int8_t>();
  q8.rs = static_cast<float>(r.scale);
  q8.rz = static_cast<float>(r.zero_point);
}

// rows [m, ld] of int8 codes (ld a multiple of 16, 16-byte aligned rows) -> codes [m, n]; a
// residual's codes [m, n] (or null) join before the rounding. With `values` (conv2d_q8_float) the
// kernels run in their dynamic mode instead, every row's scale s_x and zero point z_x, and write
// y = (s_w * sum) * s_x + bias as fp32 [m, n]: the requantization's y, unrounded.
void gemvRequantize(const char* op, const int8_t* rows, int64_t ld, int64_t m, double input_scale,
                    int64_t input_zero_point, const at::Tensor& packed, const at::Tensor& weight_scales,
                    const c10::optional<at::Tensor>& bias, const Q8Output& q, int8_t* out,
                    const Q8Residual& res = {}, const at::Tensor& res_rows = {}, float* values = nullptr) {
  const at::Tensor s = weight_scales.to(at::kFloat).contiguous();
  const at::Tensor b = bias.has_value() ? bias->to(at::kFloat).contiguous() : at::Tensor();
  const at::Tensor pw = packed.contiguous();
  cuda::DynGemv a;
  a.packed = pw.const_data_ptr<int8_t>();
  a.bits = 8;
  a.n = s.size(0);
  a.k = ld;
  a.scales = s.const_data_ptr<float>();
  a.bias = b.defined() ? b.const_data_ptr<float>() : nullptr;
  a.q8 = requantArgs(input_scale, input_zero_point, q);
  setResidual(a.q8, res, res_rows);
  const int8_t* residual = a.q8.residual;
  at::Tensor token_zp, token_scales;  // one per row of the largest slice: every slice starts at row 0
  if (values != nullptr) {
    const int64_t slice_rows = std::min(m, cuda::kDynGemvMaxRows);
    token_zp = at::full({slice_rows}, input_zero_point, weight_scales.options().dtype(at::kInt));
    token_scales = at::full({slice_rows}, static_cast<float>(input_scale), weight_scales.options().dtype(at::kFloat));
    a.q8 = cuda::Q8Requant{};
    a.x.zero_points = token_zp.data_ptr<int32_t>();
    a.x.scales = token_scales.data_ptr<float>();
    a.yt = cuda::FloatType::kF32;
  }
  a.sm_count = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  // The grid takes kDynGemvMaxRows rows of x per launch: slice r0 of them.
  auto slice = [&](int64_t r0) {
    a.m = std::min(cuda::kDynGemvMaxRows, m - r0);
    a.x.codes = const_cast<int8_t*>(rows + r0 * ld);
    a.y = values != nullptr ? static_cast<void*>(values + r0 * a.n) : static_cast<void*>(out + r0 * a.n);
    if (residual != nullptr) a.q8.residual = residual + r0 * a.n;
  };
  // Many rows on Hopper: the wgmma GEMM, with its workspaces (the weight's row sums and rows),
  // allocated once where the first (largest) slice takes it. PT2Q_CUDA_Q8_WGMMA=0 keeps the
  // mma.sync GEMM (the tests' bit-for-bit comparison).
  slice(0);
  cuda::DynWgmmaWorkspace workspace;
  if (cuda::envOr("PT2Q_CUDA_Q8_WGMMA", 1) != 0 && cuda::linearDynamicWgmmaTakes(a)) {
    workspace = cuda::allocDynWgmmaWorkspace(a, weight_scales.options());
  }
  for (int64_t r0 = 0; r0 < m; r0 += cuda::kDynGemvMaxRows) {
    slice(r0);
    cuda::checkLaunch(cuda::linearDynamicGemv(a, stream), op);
  }
}

// The grouped kernel's geometry; its pointers are the caller's to set.
cuda::GroupedConvQ8 groupedArgs(const Conv2dQ8Geometry& g) {
  cuda::GroupedConvQ8 a;
  a.n = g.n, a.c = g.c, a.h = g.h, a.w = g.w, a.oc = g.oc, a.kh = g.kh, a.kw = g.kw, a.oh = g.oh, a.ow = g.ow;
  a.sh = g.sh, a.sw = g.sw, a.ph = g.ph, a.pw = g.pw, a.dh = g.dh, a.dw = g.dw;
  a.groups = g.groups;
  return a;
}

// groups > 1: the direct kernel on the NCHW codes, writing the NCHW output the CPU returns.
at::Tensor groupedConv(const char* op, const Conv2dQ8Geometry& g, const at::Tensor& input, double input_scale,
                       int64_t input_zero_point, const at::Tensor& packed, const at::Tensor& weight_scales,
                       const c10::optional<at::Tensor>& bias, const Q8Output& q, const Q8Residual& res) {
  const at::Tensor x = input.contiguous();
  const at::Tensor r = res.on() ? res.codes->contiguous() : at::Tensor();
  const at::Tensor s = weight_scales.to(at::kFloat).contiguous();
  const at::Tensor b = bias.has_value() ? bias->to(at::kFloat).contiguous() : at::Tensor();
  const at::Tensor pw = packed.contiguous();
  at::Tensor out = at::empty({g.n, g.oc, g.oh, g.ow}, input.options());
  cuda::GroupedConvQ8 a = groupedArgs(g);
  a.x = x.const_data_ptr<int8_t>();
  a.packed = pw.const_data_ptr<int8_t>();
  a.scales = s.const_data_ptr<float>();
  a.bias = b.defined() ? b.const_data_ptr<float>() : nullptr;
  a.q8 = requantArgs(input_scale, input_zero_point, q);
  setResidual(a.q8, res, r);
  a.out = out.data_ptr<int8_t>();
  cuda::checkLaunch(cuda::groupedConvQ8(a, at::cuda::getCurrentCUDAStream()), op);
  return out;
}

// The im2col rows [n * oh * ow, k rounded up to 16] of a plain convolution's input codes, from a
// channels-last copy (one tap of one output pixel is c contiguous bytes); padding holds z_x.
at::Tensor im2colRows(const char* op, const Conv2dQ8Geometry& g, const at::Tensor& input, int64_t input_zero_point) {
  const int64_t rows = g.n * g.oh * g.ow, ld = roundUp(g.k(), 16);
  const at::Tensor x = input.permute({0, 2, 3, 1}).contiguous();
  at::Tensor cols = at::empty({rows, ld}, input.options());
  cuda::Im2ColQ8 a;
  a.x = x.const_data_ptr<int8_t>();
  a.rows = cols.data_ptr<int8_t>();
  a.n = g.n, a.c = g.c, a.h = g.h, a.w = g.w, a.kh = g.kh, a.kw = g.kw, a.oh = g.oh, a.ow = g.ow;
  a.sh = g.sh, a.sw = g.sw, a.ph = g.ph, a.pw = g.pw, a.dh = g.dh, a.dw = g.dw;
  a.ld = ld;
  a.pad = static_cast<int8_t>(input_zero_point);
  cuda::checkLaunch(cuda::im2colQ8(a, at::cuda::getCurrentCUDAStream()), op);
  return cols;
}

// x's m rows of k codes as the GEMV reads them, 16 bytes at a time: a K that is not a multiple of
// 16, or rows not so aligned, go through a zero-padded copy (the packed weight is zero past K).
at::Tensor gemvRows(const at::Tensor& input, int64_t m, int64_t k) {
  const int64_t ld = roundUp(k, 16);
  at::Tensor x = input.reshape({m, k});
  if (ld != k || !x.is_contiguous() || reinterpret_cast<uintptr_t>(x.const_data_ptr()) % 16 != 0) {
    at::Tensor padded = at::zeros({m, ld}, input.options());
    padded.slice(1, 0, k).copy_(x);
    x = padded;
  }
  return x;
}

at::Tensor linearQ8Cuda(const at::Tensor& input, double input_scale, int64_t input_zero_point,
                        const at::Tensor& packed, const at::Tensor& weight_scales,
                        const c10::optional<at::Tensor>& bias, double output_scale, int64_t output_zero_point,
                        int64_t qmin, int64_t qmax) {
  const char* op = "linear_q8";
  const Q8Output q{output_scale, output_zero_point, qmin, qmax};
  const auto [m, k, n] = checkLinearQ8(input, input_scale, input_zero_point, packed, weight_scales, bias, q);
  if (k > kQ8MaxK) return linearQ8Ref(input, input_scale, input_zero_point, packed, weight_scales, bias, q);
  const c10::cuda::CUDAGuard guard(input.device());
  at::Tensor out = at::empty({m, n}, input.options());
  if (m > 0) {
    const at::Tensor x = gemvRows(input, m, k);
    gemvRequantize(op, x.const_data_ptr<int8_t>(), x.size(1), m, input_scale, input_zero_point, packed,
                   weight_scales, bias, q, out.data_ptr<int8_t>());
  }
  return out.reshape(linearOutputShape(input.sizes(), n));
}

// linear_q8_float: the same rows through the GEMV / GEMMs in their dynamic mode (fp32 output).
at::Tensor linearQ8FloatCuda(const at::Tensor& input, double input_scale, int64_t input_zero_point,
                             const at::Tensor& packed, const at::Tensor& weight_scales,
                             const c10::optional<at::Tensor>& bias) {
  const char* op = "linear_q8_float";
  const Q8Output q;
  const auto [m, k, n] = checkLinearQ8(input, input_scale, input_zero_point, packed, weight_scales, bias, q, op);
  if (k > kQ8MaxK) return linearQ8FloatRef(input, input_scale, input_zero_point, packed, weight_scales, bias);
  const c10::cuda::CUDAGuard guard(input.device());
  at::Tensor out = at::empty({m, n}, input.options().dtype(at::kFloat));
  if (m > 0) {
    const at::Tensor x = gemvRows(input, m, k);
    gemvRequantize(op, x.const_data_ptr<int8_t>(), x.size(1), m, input_scale, input_zero_point, packed,
                   weight_scales, bias, q, nullptr, {}, {}, out.data_ptr<float>());
  }
  return out.reshape(linearOutputShape(input.sizes(), n));
}

at::Tensor conv2dQ8Cuda(const at::Tensor& input, double input_scale, int64_t input_zero_point,
                        const at::Tensor& packed, const at::Tensor& weight_scales,
                        const c10::optional<at::Tensor>& bias, at::IntArrayRef kernel_size, at::IntArrayRef stride,
                        at::IntArrayRef padding, at::IntArrayRef dilation, double output_scale,
                        int64_t output_zero_point, int64_t qmin, int64_t qmax, int64_t groups,
                        const c10::optional<at::Tensor>& residual, double residual_scale,
                        int64_t residual_zero_point) {
  const char* op = "conv2d_q8";
  const Q8Output q{output_scale, output_zero_point, qmin, qmax};
  const Q8Residual r{residual, residual_scale, residual_zero_point};
  const Conv2dQ8Geometry g = checkConv2dQ8(input, input_scale, input_zero_point, packed, weight_scales, bias,
                                           kernel_size, stride, padding, dilation, q, groups, r);
  if (g.k() > kQ8MaxK || (groups > 1 && !cuda::groupedConvQ8Takes(groupedArgs(g)))) {
    return conv2dQ8Ref(input, input_scale, input_zero_point, packed, weight_scales, bias, kernel_size, stride,
                       padding, dilation, q, groups, r);
  }
  const c10::cuda::CUDAGuard guard(input.device());
  if (groups > 1) return groupedConv(op, g, input, input_scale, input_zero_point, packed, weight_scales, bias, q, r);
  const at::Tensor cols = im2colRows(op, g, input, input_zero_point);
  const int64_t rows = cols.size(0), ld = cols.size(1);
  at::Tensor out = at::empty({g.n, g.oh, g.ow, g.oc}, input.options());
  // The residual channels last, as the GEMV's output rows.
  const at::Tensor res_rows = r.on() ? r.codes->permute({0, 2, 3, 1}).contiguous() : at::Tensor();
  gemvRequantize(op, cols.const_data_ptr<int8_t>(), ld, rows, input_scale, input_zero_point, packed, weight_scales,
                 bias, q, out.data_ptr<int8_t>(), r, res_rows);
  return out.permute({0, 3, 1, 2}).contiguous();
}

// conv2d_q8_float: im2col rows, then the GEMV / GEMMs in their dynamic mode (fp32 output). Grouped
// convolutions, which the direct kernel only requantizes, and K past kQ8MaxK take the reference.
at::Tensor conv2dQ8FloatCuda(const at::Tensor& input, double input_scale, int64_t input_zero_point,
                             const at::Tensor& packed, const at::Tensor& weight_scales,
                             const c10::optional<at::Tensor>& bias, at::IntArrayRef kernel_size,
                             at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups) {
  const char* op = "conv2d_q8_float";
  const Q8Output q;
  const Conv2dQ8Geometry g = checkConv2dQ8(input, input_scale, input_zero_point, packed, weight_scales, bias,
                                           kernel_size, stride, padding, dilation, q, groups, {}, op);
  if (g.k() > kQ8MaxK || groups > 1) {
    return conv2dQ8FloatRef(input, input_scale, input_zero_point, packed, weight_scales, bias, kernel_size, stride,
                            padding, dilation, groups);
  }
  const c10::cuda::CUDAGuard guard(input.device());
  const at::Tensor cols = im2colRows(op, g, input, input_zero_point);
  at::Tensor out = at::empty({g.n, g.oh, g.ow, g.oc}, input.options().dtype(at::kFloat));
  gemvRequantize(op, cols.const_data_ptr<int8_t>(), cols.size(1), cols.size(0), input_scale, input_zero_point, packed,
                 weight_scales, bias, q, nullptr, {}, {}, out.data_ptr<float>());
  return out.permute({0, 3, 1, 2}).contiguous();
}

}  // namespace
}  // namespace pt2q

TORCH_LIBRARY_IMPL(pt2q, CUDA, m) {
  m.impl("linear_q8", &pt2q::linearQ8Cuda);
  m.impl("conv2d_q8", &pt2q::conv2dQ8Cuda);
  m.impl("conv2d_q8_float", &pt2q::conv2dQ8FloatCuda);
  m.impl("linear_q8_float", &pt2q::linearQ8FloatCuda);
}
