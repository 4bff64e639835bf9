// CUDA glue of choose_qparams_affine. Where each qparam block is a run of consecutive elements, two
// kernels (choose_qparams_cuda_kernels.h): per-block extrema, then each block's qparams with
// qparamsFromMinMax's arithmetic, and one host read of the lowest block holding NaN or Inf (the
// op's one sync, as on CPU). Other layouts (blocks strided in memory, e.g. per channel along a
// middle axis) take the reference's ATen reductions on the device. Either way the qparams are the
// CPU's bit for bit.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "kernels/affine_ops.h"
#include "kernels/cuda/choose_qparams_cuda_kernels.h"
#include "kernels/cuda/glue.h"

namespace pt2q {
namespace {

constexpr const char* kOp = "choose_qparams_affine";

// The elements per qparam block when every block is a run of consecutive elements: block 1 on the
// leading dimensions, any divisor on one dimension, whole dimensions after it (the qparams are
// row-major over the blocks, so block i is elements [i * len, (i + 1) * len)). 0 otherwise.
int64_t runLength(const BlockLayout& l) {
  const size_t nd = l.sizes.size();
  size_t d = 0;
  while (d < nd && l.block[d] == 1) ++d;
  int64_t len = 1;
  for (size_t e = d; e < nd; ++e) {
    if (e > d && l.block[e] != l.sizes[e]) return 0;
    len *= l.block[e];
  }
  return len;
}

cuda::QParamsFromPieces qparamArgs(const ChooseQParamsSpec& spec, double eps) {
  const double qmin = static_cast<double>(spec.range.qmin), qmax = static_cast<double>(spec.range.qmax);
  cuda::QParamsFromPieces q;
  q.mapping = spec.mapping == MappingType::kSymmetric               ? cuda::Mapping::kSymmetric
              : spec.mapping == MappingType::kSymmetricNoClippingErr ? cuda::Mapping::kSymmetricNoClippingErr
                                                                     : cuda::Mapping::kAsymmetric;
  q.domain = cuda::domainOf(spec.domain);
  // the fp32 values ATen divides / multiplies by for these double scalars
  q.range = static_cast<float>(qmax - qmin);
  q.half_range = static_cast<float>((qmax - qmin) / 2);
  q.mid = static_cast<float>((qmax + qmin + 1) / 2);
  q.qmin_f = static_cast<float>(qmin);
  q.qmax_f = static_cast<float>(qmax);
  q.eps = static_cast<float>(eps);
  q.qmin = static_cast<int32_t>(spec.range.qmin);
  q.qmax = static_cast<int32_t>(spec.range.qmax);
  q.zp_value = static_cast<int32_t>(symmetricZeroPoint(spec.qdtype, spec.range, spec.domain));
  return q;
}


std::tuple<at::Tensor, at::Tensor> chooseQParamsAffineCuda(
    const at::Tensor& input, c10::string_view mapping_type, at::IntArrayRef block_size,
    at::ScalarType target_dtype, std::optional<int64_t> quant_min, std::optional<int64_t> quant_max,
    std::optional<double> eps, std::optional<at::ScalarType> scale_dtype,
    std::optional<at::ScalarType> zero_point_dtype, c10::string_view zero_point_domain) {
  const ChooseQParamsSpec spec = prepareChooseQParams(input, mapping_type, target_dtype, quant_min, quant_max,
                                                      scale_dtype, zero_point_dtype, zero_point_domain);
  const BlockLayout layout = chooseQParamsLayout(input, block_size);
  const int64_t len = runLength(layout);
  if (len == 0) {
    return chooseQParamsAffineRef(input, mapping_type, block_size, target_dtype, quant_min, quant_max, eps,
                                  scale_dtype, zero_point_dtype, zero_point_domain);
  }
  const c10::cuda::CUDAGuard guard(input.device());
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const at::Tensor x = input.contiguous();
  cuda::RunMinMax a;
  a.x = x.const_data_ptr();
  a.xt = cuda::floatTypeOf(x.scalar_type());
  a.runs = layout.num_blocks;
  a.len = len;
  a.splits = cuda::runMinMaxSplits(len);
  // One workspace: the pieces' extrema, then the first-bad-block word (an even float offset: 8-byte aligned).
  at::Tensor work = at::empty({2 * a.runs * a.splits + 2}, x.options().dtype(at::kFloat));
  a.mn = work.data_ptr<float>();
  a.mx = a.mn + a.runs * a.splits;
  auto* first_bad = reinterpret_cast<unsigned long long*>(a.mn + 2 * a.runs * a.splits);
  cuda::checkLaunch(cuda::runMinMax(a, stream), kOp);

  // qparamsFromMinMax's arithmetic needs a valid eps even when a bad block will throw first.
  const double e = eps.value_or(kDefaultQParamEps);
  cuda::QParamsFromPieces q = qparamArgs(spec, e);
  q.mn = a.mn;
  q.mx = a.mx;
  q.runs = a.runs;
  q.splits = a.splits;
  at::Tensor scale = at::empty({a.runs}, x.options().dtype(at::kFloat));
  const bool float_zp = spec.domain == ZeroPointDomain::kFloat;
  at::Tensor zp = at::empty({a.runs}, x.options().dtype(float_zp ? at::kFloat : at::kInt));
  q.scale = scale.data_ptr<float>();
  if (float_zp) {
    q.zp_float = zp.data_ptr<float>();
  } else {
    q.zp_int = zp.data_ptr<int32_t>();
  }
  q.first_bad = first_bad;
  cuda::checkLaunch(cudaMemsetAsync(first_bad, 0xFF, sizeof(unsigned long long), stream), kOp);
  cuda::checkLaunch(cuda::qparamsFromPieces(q, stream), kOp);
  unsigned long long bad = 0;
  cuda::checkLaunch(cudaMemcpyAsync(&bad, first_bad, sizeof(bad), cudaMemcpyDeviceToHost, stream), kOp);
  cuda::checkLaunch(cudaStreamSynchronize(stream), kOp);
  if (bad != ~0ULL) failNonFiniteBlock(layout, static_cast<int64_t>(bad));
  chooseQParamsEps(eps);  // its error, after the bad block's as on CPU
  return {scale.reshape(layout.scale_shape).to(spec.scale_dtype),
          zp.reshape(layout.scale_shape).to(spec.zero_point_dtype)};
}

}  // namespace
}  // namespace pt2q

TORCH_LIBRARY_IMPL(pt2q, CUDA, m) {
  m.impl("choose_qparams_affine", &pt2q::chooseQParamsAffineCuda);
}
