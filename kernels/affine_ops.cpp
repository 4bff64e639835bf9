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

void checkChooseQParamsArgs(MappingType mapping, ZeroPointDomain domain, const QuantRange& range,
                            const QuantDtype& qdtype, std::optional<at::ScalarType> scale_dtype,
                            std::optional<at::ScalarType> zero_point_dtype) {
  const char* op = "choose_qparams_affine";
  TORCH_CHECK_VALUE(domain != ZeroPointDomain::kFloat || mapping == MappingType::kAsymmetric, op,
                    ": zero_point_domain \"float\" needs mapping_type \"asymmetric\"");
  TORCH_CHECK_VALUE(mapping != MappingType::kSymmetricNoClippingErr || (range.qmin < 0 && range.qmax > 0), op,
                    ": mapping_type \"symmetric_no_clipping_err\" needs quant_min < 0 < quant_max, got [",
                    range.qmin, ", ", range.qmax, "]");
  if (scale_dtype) checkFloatDtype(*scale_dtype, op, "scale_dtype");
  if (zero_point_dtype && domain == ZeroPointDomain::kFloat) {
    checkFloatDtype(*zero_point_dtype, op, "zero_point_dtype");
  }
  if (zero_point_dtype && domain != ZeroPointDomain::kFloat) {
    TORCH_CHECK_TYPE(at::isIntegralType(*zero_point_dtype, false) || at::isFloatingType(*zero_point_dtype), op,
                     ": zero_point_dtype must be an integer or float dtype, got ", *zero_point_dtype);
  }
}

std::tuple<at::Tensor, at::Tensor> finishChooseQParams(const at::Tensor& min_val, const at::Tensor& max_val,
                                                       const BlockLayout& layout, MappingType mapping,
                                                       const QuantDtype& qdtype, const QuantRange& range,
                                                       std::optional<double> eps,
                                                       std::optional<at::ScalarType> scale_dtype,
                                                       std::optional<at::ScalarType> zero_point_dtype,
                                                       ZeroPointDomain domain) {
  const char* op = "choose_qparams_affine";
  if (layout.num_blocks > 0) {
    const at::Tensor bad = at::logical_not(at::isfinite(min_val) & at::isfinite(max_val));
    if (bad.any().item<bool>()) {
      const int64_t first = bad.reshape({-1}).nonzero().index({0, 0}).item<int64_t>();
      TORCH_CHECK_VALUE(false, op, ": input has NaN or Inf in block ", first, " of ", layout.num_blocks,
                        " (block_size ", formatList(layout.block), "); qparams of such a block are undefined");
    }
  }
  const double e = eps.value_or(kDefaultQParamEps);
  TORCH_CHECK_VALUE(e >= 0, op, ": eps must be non-negative, got ", e);
  auto [scale, zp] = qparamsFromMinMax(min_val, max_val, mapping, qdtype, range, e, domain);
  const at::ScalarType sdt = scale_dtype.value_or(at::kFloat);
  const at::ScalarType zdt =
      zero_point_dtype.value_or(domain == ZeroPointDomain::kFloat ? sdt : at::kInt);
  return {scale.reshape(layout.scale_shape).to(sdt), zp.reshape(layout.scale_shape).to(zdt)};
}

}  // namespace pt2q
