// Validation and qparam arithmetic shared by every backend of the affine ops.
#include "kernels/affine_ops.h"

namespace pt2q {

AffineArgs prepareAffineArgs(const char* op, const at::Tensor& input, at::IntArrayRef block_size,
                             const at::Tensor& scale, const std::optional<at::Tensor>& zero_point,
                             at::ScalarType quant_dtype, std::optional<int64_t> quant_min,
                             std::optional<int64_t> quant_max, c10::string_view zero_point_domain) {
  AffineArgs a;
  a.domain = parseZeroPointDomain(zero_point_domain, op);
  a.qdtype = quantDtype(quant_dtype, op, "the quantized dtype");
  a.range = resolveQuantRange(a.qdtype, quant_min, quant_max, op);
  a.layout = makeBlockLayout(input.sizes(), block_size, op);
  checkQParams(a.layout, input, scale, zero_point, a.domain, op);
  a.scale = scaleAsFloat(scale);
  a.zp = zeroPointAsFloat(zero_point, a.domain);
  return a;
}

AffineCall prepareQuantize(const at::Tensor& input, at::IntArrayRef block_size, const at::Tensor& scale,
                           const std::optional<at::Tensor>& zero_point, at::ScalarType output_dtype,
                           std::optional<int64_t> quant_min, std::optional<int64_t> quant_max,
                           c10::string_view zero_point_domain) {
  const char* op = "quantize_affine";
  checkFloatInput(input, op, "input");
  AffineCall c;
  c.args = prepareAffineArgs(op, input, block_size, scale, zero_point, output_dtype, quant_min, quant_max,
                             zero_point_domain);
  c.in = input.contiguous();
  c.out = at::empty(input.sizes(), input.options().dtype(c.args.qdtype.storage));
  return c;
}

AffineCall prepareDequantize(const at::Tensor& input, at::IntArrayRef block_size, const at::Tensor& scale,
                             const std::optional<at::Tensor>& zero_point, at::ScalarType input_dtype,
                             std::optional<int64_t> quant_min, std::optional<int64_t> quant_max,
                             c10::string_view zero_point_domain, at::ScalarType output_dtype) {
  const char* op = "dequantize_affine";
  checkFloatDtype(output_dtype, op, "output_dtype");
  AffineCall c;
  c.args = prepareAffineArgs(op, input, block_size, scale, zero_point, input_dtype, quant_min, quant_max,
                             zero_point_domain);
  TORCH_CHECK_TYPE(input.scalar_type() == c.args.qdtype.storage, op, ": input holds ", input.scalar_type(),
                   " but input_dtype ", input_dtype, " is stored as ", c.args.qdtype.storage);
  c.in = input.contiguous();
  c.out = at::empty(input.sizes(), input.options().dtype(output_dtype));
  return c;
}

AffineCall prepareFakeQuantize(const at::Tensor& input, at::IntArrayRef block_size, const at::Tensor& scale,
                               const std::optional<at::Tensor>& zero_point, at::ScalarType quant_dtype,
                               std::optional<int64_t> quant_min, std::optional<int64_t> quant_max,
                               c10::string_view zero_point_domain, bool want_mask) {
  const char* op = "fake_quantize_affine";
  checkFloatInput(input, op, "input");
  AffineCall c;
  c.args = prepareAffineArgs(op, input, block_size, scale, zero_point, quant_dtype, quant_min, quant_max,
                             zero_point_domain);
  c.in = input.contiguous();
  c.out = at::empty(input.sizes(), input.options());
  if (want_mask) c.mask = at::empty(input.sizes(), input.options().dtype(at::kBool));
  return c;
}

ChooseQParamsSpec prepareChooseQParams(const at::Tensor& input, c10::string_view mapping_type,
                                       at::ScalarType target_dtype, std::optional<int64_t> quant_min,
                                       std::optional<int64_t> quant_max,
                                       std::optional<at::ScalarType> scale_dtype,
                                       std::optional<at::ScalarType> zero_point_dtype,
                                       c10::string_view zero_point_domain) {
  const char* op = "choose_qparams_affine";
  checkFloatInput(input, op, "input");
  ChooseQParamsSpec spec;
  spec.mapping = parseMappingType(mapping_type, op);
  spec.domain = parseZeroPointDomain(zero_point_domain, op);
  spec.qdtype = quantDtype(target_dtype, op, "target_dtype");
  spec.range = resolveQuantRange(spec.qdtype, quant_min, quant_max, op);
  TORCH_CHECK_VALUE(spec.domain != ZeroPointDomain::kFloat || spec.mapping == MappingType::kAsymmetric, op,
                    ": zero_point_domain \"float\" needs mapping_type \"asymmetric\"");
  TORCH_CHECK_VALUE(spec.mapping != MappingType::kSymmetricNoClippingErr || (spec.range.qmin < 0 && spec.range.qmax > 0),
                    op, ": mapping_type \"symmetric_no_clipping_err\" needs quant_min < 0 < quant_max, got [",
                    spec.range.qmin, ", ", spec.range.qmax, "]");
  if (scale_dtype) checkFloatDtype(*scale_dtype, op, "scale_dtype");
  if (zero_point_dtype && spec.domain == ZeroPointDomain::kFloat) {
    checkFloatDtype(*zero_point_dtype, op, "zero_point_dtype");
  }
  if (zero_point_dtype && spec.domain != ZeroPointDomain::kFloat) {
    TORCH_CHECK_TYPE(at::isIntegralType(*zero_point_dtype, false) || at::isFloatingType(*zero_point_dtype), op,
                     ": zero_point_dtype must be an integer or float dtype, got ", *zero_point_dtype);
  }
  spec.scale_dtype = scale_dtype.value_or(at::kFloat);
  spec.zero_point_dtype =
      zero_point_dtype.value_or(spec.domain == ZeroPointDomain::kFloat ? spec.scale_dtype : at::kInt);
  return spec;
}

BlockLayout chooseQParamsLayout(const at::Tensor& input, at::IntArrayRef block_size) {
  const char* op = "choose_qparams_affine";
  BlockLayout layout = makeBlockLayout(input.sizes(), block_size, op);
  TORCH_CHECK_VALUE(input.numel() > 0, op, ": input is empty (shape ", formatList(input.sizes()),
                    "); there is no range to choose qparams from");
  return layout;
}

void failNonFiniteBlock(const BlockLayout& layout, int64_t first) {
  C10_THROW_ERROR(ValueError, c10::str("choose_qparams_affine: input has NaN or Inf in block ", first, " of ",
                                       layout.num_blocks, " (block_size ", formatList(layout.block),
                                       "); qparams of such a block are undefined"));
}

double chooseQParamsEps(std::optional<double> eps) {
  const double e = eps.value_or(kDefaultQParamEps);
  TORCH_CHECK_VALUE(e >= 0, "choose_qparams_affine: eps must be non-negative, got ", e);
  return e;
}

std::tuple<at::Tensor, at::Tensor> finishChooseQParams(const at::Tensor& min_val, const at::Tensor& max_val,
                                                       const BlockLayout& layout, const ChooseQParamsSpec& spec,
                                                       std::optional<double> eps) {
  if (layout.num_blocks > 0) {
    const at::Tensor bad = at::logical_not(at::isfinite(min_val) & at::isfinite(max_val));
    if (bad.any().item<bool>()) failNonFiniteBlock(layout, bad.reshape({-1}).nonzero().index({0, 0}).item<int64_t>());
  }
  const double e = chooseQParamsEps(eps);
  auto [scale, zp] = qparamsFromMinMax(min_val, max_val, spec.mapping, spec.qdtype, spec.range, e, spec.domain);
  return {scale.reshape(layout.scale_shape).to(spec.scale_dtype),
          zp.reshape(layout.scale_shape).to(spec.zero_point_dtype)};
}

}  // namespace pt2q
