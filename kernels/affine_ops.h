// C++ entry points of the affine ops, shared by the backends that redispatch or fall back to
// the reference (declared once here so every file agrees on the signatures).
#pragma once

#include <optional>
#include <string>
#include <tuple>

#include <ATen/ATen.h>

#include "kernels/affine_params.h"

namespace pt2q {

/// Validated arguments of quantize/dequantize/fake_quantize: what every backend needs.
struct AffineArgs {
  BlockLayout layout;
  QuantDtype qdtype;
  QuantRange range;
  ZeroPointDomain domain;
  at::Tensor scale;  // fp32, contiguous, num_blocks elements
  at::Tensor zp;     // fp32, contiguous, num_blocks elements; undefined when absent
};

/// Validates the common arguments; `op` names the op in error messages.
AffineArgs prepareAffineArgs(const char* op, const at::Tensor& input, at::IntArrayRef block_size,
                             const at::Tensor& scale, const std::optional<at::Tensor>& zero_point,
                             at::ScalarType quant_dtype, std::optional<int64_t> quant_min,
                             std::optional<int64_t> quant_max, c10::string_view zero_point_domain);

/// One call of quantize / dequantize / fake-quantize, ready for a backend: validated
/// arguments, the input made contiguous and the outputs allocated (same device).
struct AffineCall {
  AffineArgs args;
  at::Tensor in;
  at::Tensor out;
  at::Tensor mask;  // fake-quantize with a mask only
};
AffineCall prepareQuantize(const at::Tensor& input, at::IntArrayRef block_size, const at::Tensor& scale,
                           const std::optional<at::Tensor>& zero_point, at::ScalarType output_dtype,
                           std::optional<int64_t> quant_min, std::optional<int64_t> quant_max,
                           c10::string_view zero_point_domain);
AffineCall prepareDequantize(const at::Tensor& input, at::IntArrayRef block_size, const at::Tensor& scale,
                             const std::optional<at::Tensor>& zero_point, at::ScalarType input_dtype,
                             std::optional<int64_t> quant_min, std::optional<int64_t> quant_max,
                             c10::string_view zero_point_domain, at::ScalarType output_dtype);
AffineCall prepareFakeQuantize(const at::Tensor& input, at::IntArrayRef block_size, const at::Tensor& scale,
                               const std::optional<at::Tensor>& zero_point, at::ScalarType quant_dtype,
                               std::optional<int64_t> quant_min, std::optional<int64_t> quant_max,
                               c10::string_view zero_point_domain, bool want_mask);

/// Validated non-shape arguments of choose_qparams_affine, shared by every backend.
struct ChooseQParamsSpec {
  MappingType mapping;
  ZeroPointDomain domain;
  QuantDtype qdtype;
  QuantRange range;
  at::ScalarType scale_dtype;       // default fp32
  at::ScalarType zero_point_dtype;  // default int32, or the scale dtype in the float domain
};
ChooseQParamsSpec prepareChooseQParams(const at::Tensor& input, c10::string_view mapping_type,
                                       at::ScalarType target_dtype, std::optional<int64_t> quant_min,
                                       std::optional<int64_t> quant_max,
                                       std::optional<at::ScalarType> scale_dtype,
                                       std::optional<at::ScalarType> zero_point_dtype,
                                       c10::string_view zero_point_domain);
/// The block layout of a choose_qparams_affine input (non-empty, block_size dividing it).
BlockLayout chooseQParamsLayout(const at::Tensor& input, at::IntArrayRef block_size);

/// Reference implementations (plain ATen, any device); see kernels/reference/affine.cpp.
std::tuple<at::Tensor, at::Tensor> chooseQParamsAffineRef(
    const at::Tensor& input, c10::string_view mapping_type, at::IntArrayRef block_size,
    at::ScalarType target_dtype, std::optional<int64_t> quant_min, std::optional<int64_t> quant_max,
    std::optional<double> eps, std::optional<at::ScalarType> scale_dtype,
    std::optional<at::ScalarType> zero_point_dtype, c10::string_view zero_point_domain);
at::Tensor quantizeAffineRef(const at::Tensor& input, at::IntArrayRef block_size, const at::Tensor& scale,
                             const std::optional<at::Tensor>& zero_point, at::ScalarType output_dtype,
                             std::optional<int64_t> quant_min, std::optional<int64_t> quant_max,
                             c10::string_view zero_point_domain);
at::Tensor dequantizeAffineRef(const at::Tensor& input, at::IntArrayRef block_size, const at::Tensor& scale,
                               const std::optional<at::Tensor>& zero_point, at::ScalarType input_dtype,
                               std::optional<int64_t> quant_min, std::optional<int64_t> quant_max,
                               c10::string_view zero_point_domain, at::ScalarType output_dtype);
std::tuple<at::Tensor, at::Tensor> fakeQuantizeAffineCachemaskRef(
    const at::Tensor& input, at::IntArrayRef block_size, const at::Tensor& scale,
    const std::optional<at::Tensor>& zero_point, at::ScalarType quant_dtype, std::optional<int64_t> quant_min,
    std::optional<int64_t> quant_max, c10::string_view zero_point_domain);
at::Tensor fakeQuantizeAffineRef(const at::Tensor& input, at::IntArrayRef block_size, const at::Tensor& scale,
                                 const std::optional<at::Tensor>& zero_point, at::ScalarType quant_dtype,
                                 std::optional<int64_t> quant_min, std::optional<int64_t> quant_max,
                                 c10::string_view zero_point_domain);

/// Final qparam step shared by all backends: checks the extrema are finite, then applies
/// qparamsFromMinMax and the output dtypes/shape of choose_qparams_affine.
std::tuple<at::Tensor, at::Tensor> finishChooseQParams(const at::Tensor& min_val, const at::Tensor& max_val,
                                                       const BlockLayout& layout, const ChooseQParamsSpec& spec,
                                                       std::optional<double> eps);

/// choose_qparams_affine's error for a block holding NaN or Inf (`first`: the lowest such block).
[[noreturn]] void failNonFiniteBlock(const BlockLayout& layout, int64_t first);
/// eps after its default, checked non-negative.
double chooseQParamsEps(std::optional<double> eps);

/// Default eps of choose_qparams_affine: torch.finfo(torch.float32).eps, as torch.ao observers.
constexpr double kDefaultQParamEps = 1.1920928955078125e-07;

}  // namespace pt2q
