// Reference implementations of the affine ops: plain ATen, any device, written to read like
// the formulas in kernels/README.md. They are the ground truth the CPU and CUDA kernels are
// tested against, and the fallback on devices without a native kernel.
#include <torch/library.h>

#include "kernels/affine_ops.h"

namespace pt2q {
namespace {

// Input viewed as torchao's shape_for_reduction, so qparams broadcast per block.
at::Tensor asBlocks(const at::Tensor& t, const BlockLayout& l) {
  return t.reshape(l.shape_for_reduction);
}

at::Tensor qparamView(const at::Tensor& q, const BlockLayout& l) {
  return q.view(l.shape_after_reduction);
}

// Codes before clamping, in fp32 (integer-valued, or NaN). See Note [NaN codes].
at::Tensor unclampedCodes(const at::Tensor& x, const AffineArgs& a) {
  const at::Tensor xb = asBlocks(x.to(at::kFloat), a.layout);
  const at::Tensor s = qparamView(a.scale, a.layout);
  if (a.domain == ZeroPointDomain::kFloat) {
    const double mid = static_cast<double>(a.range.qmin + a.range.qmax + 1) / 2;
    const at::Tensor min_val = qparamView(a.zp, a.layout) - s * mid;
    return at::round((xb - min_val) / s);
  }
  at::Tensor v = at::round(xb * at::reciprocal(s));
  if (a.zp.defined()) v = v + qparamView(a.zp, a.layout);
  return v;
}

// Clamps to [qmin, qmax]; NaN becomes qmin (Note [NaN codes] in kernels/README.md). Adding 0
// turns a -0 code (round(-0.3)) into +0, as an integer code would be.
at::Tensor clampCodes(const at::Tensor& v, const AffineArgs& a) {
  at::Tensor c = at::clamp(v, static_cast<double>(a.range.qmin), static_cast<double>(a.range.qmax));
  return at::where(at::isnan(c), at::full({}, static_cast<double>(a.range.qmin), c.options()), c) + 0.0;
}

// codes: integer-valued, any dtype. With an int-domain zero point, code - zp is taken exactly
// (int64 -> double) and then rounded to fp32, as torch's per-channel dequantize and
// fake_quantize do; this differs from pure fp32 only for int32 codes beyond 2^24.
at::Tensor dequantizeCodes(const at::Tensor& codes, const AffineArgs& a) {
  const at::Tensor s = qparamView(a.scale, a.layout);
  if (a.domain == ZeroPointDomain::kFloat) {
    const double mid = static_cast<double>(a.range.qmin + a.range.qmax + 1) / 2;
    return (codes.to(at::kFloat) - mid) * s + qparamView(a.zp, a.layout);
  }
  if (!a.zp.defined()) return codes.to(at::kFloat) * s;
  const at::Tensor diff = codes.to(at::kLong).to(at::kDouble) - qparamView(a.zp, a.layout).to(at::kDouble);
  return diff.to(at::kFloat) * s;
}

// Clamped fp32 codes as int64: fp32 holds 2^31 where an int32 code saturates at 2^31 - 1.
at::Tensor clampedIntCodes(const at::Tensor& v, const AffineArgs& a) {
  return at::clamp(clampCodes(v, a).to(at::kLong), a.range.qmin, a.range.qmax);
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> chooseQParamsAffineRef(
    const at::Tensor& input, c10::string_view mapping_type, at::IntArrayRef block_size,
    at::ScalarType target_dtype, std::optional<int64_t> quant_min, std::optional<int64_t> quant_max,
    std::optional<double> eps, std::optional<at::ScalarType> scale_dtype,
    std::optional<at::ScalarType> zero_point_dtype, c10::string_view zero_point_domain) {
  const ChooseQParamsSpec spec = prepareChooseQParams(input, mapping_type, target_dtype, quant_min, quant_max,
                                                      scale_dtype, zero_point_dtype, zero_point_domain);
  const BlockLayout layout = chooseQParamsLayout(input, block_size);
  const at::Tensor xb = asBlocks(input.to(at::kFloat), layout);
  at::Tensor min_val = xb, max_val = xb;
  if (!layout.reduction_dims.empty()) {
    min_val = at::amin(xb, layout.reduction_dims);
    max_val = at::amax(xb, layout.reduction_dims);
  }
  return finishChooseQParams(min_val.reshape({-1}), max_val.reshape({-1}), layout, spec, eps);
}

at::Tensor quantizeAffineRef(const at::Tensor& input, at::IntArrayRef block_size, const at::Tensor& scale,
                             const std::optional<at::Tensor>& zero_point, at::ScalarType output_dtype,
                             std::optional<int64_t> quant_min, std::optional<int64_t> quant_max,
                             c10::string_view zero_point_domain) {
  const char* op = "quantize_affine";
  checkFloatInput(input, op, "input");
  const AffineArgs a = prepareAffineArgs(op, input, block_size, scale, zero_point, output_dtype, quant_min,
                                         quant_max, zero_point_domain);
  return clampedIntCodes(unclampedCodes(input, a), a).to(a.qdtype.storage).reshape(input.sizes());
}

at::Tensor dequantizeAffineRef(const at::Tensor& input, at::IntArrayRef block_size, const at::Tensor& scale,
                               const std::optional<at::Tensor>& zero_point, at::ScalarType input_dtype,
                               std::optional<int64_t> quant_min, std::optional<int64_t> quant_max,
                               c10::string_view zero_point_domain, at::ScalarType output_dtype) {
  const char* op = "dequantize_affine";
  checkFloatDtype(output_dtype, op, "output_dtype");
  const AffineArgs a = prepareAffineArgs(op, input, block_size, scale, zero_point, input_dtype, quant_min,
                                         quant_max, zero_point_domain);
  TORCH_CHECK_TYPE(input.scalar_type() == a.qdtype.storage, op, ": input holds ", input.scalar_type(),
                   " but input_dtype ", input_dtype, " is stored as ", a.qdtype.storage);
  return dequantizeCodes(asBlocks(input, a.layout), a).to(output_dtype).reshape(input.sizes());
}

std::tuple<at::Tensor, at::Tensor> fakeQuantizeAffineCachemaskRef(
    const at::Tensor& input, at::IntArrayRef block_size, const at::Tensor& scale,
    const std::optional<at::Tensor>& zero_point, at::ScalarType quant_dtype, std::optional<int64_t> quant_min,
    std::optional<int64_t> quant_max, c10::string_view zero_point_domain) {
  const char* op = "fake_quantize_affine";
  checkFloatInput(input, op, "input");
  const AffineArgs a = prepareAffineArgs(op, input, block_size, scale, zero_point, quant_dtype, quant_min,
                                         quant_max, zero_point_domain);
  const at::Tensor v = unclampedCodes(input, a);
  const at::Tensor mask = (v >= static_cast<double>(a.range.qmin)) & (v <= static_cast<double>(a.range.qmax));
  const at::Tensor y = dequantizeCodes(clampedIntCodes(v, a), a);
  return {y.to(input.scalar_type()).reshape(input.sizes()), mask.reshape(input.sizes())};
}

at::Tensor fakeQuantizeAffineRef(const at::Tensor& input, at::IntArrayRef block_size, const at::Tensor& scale,
                                 const std::optional<at::Tensor>& zero_point, at::ScalarType quant_dtype,
                                 std::optional<int64_t> quant_min, std::optional<int64_t> quant_max,
                                 c10::string_view zero_point_domain) {
  return std::get<0>(fakeQuantizeAffineCachemaskRef(input, block_size, scale, zero_point, quant_dtype, quant_min,
                                                    quant_max, zero_point_domain));
}

}  // namespace pt2q

TORCH_LIBRARY_IMPL(pt2q, CompositeExplicitAutograd, m) {
  m.impl("choose_qparams_affine", &pt2q::chooseQParamsAffineRef);
  m.impl("quantize_affine", &pt2q::quantizeAffineRef);
  m.impl("dequantize_affine", &pt2q::dequantizeAffineRef);
  m.impl("fake_quantize_affine", &pt2q::fakeQuantizeAffineRef);
  m.impl("fake_quantize_affine_cachemask", &pt2q::fakeQuantizeAffineCachemaskRef);
}
