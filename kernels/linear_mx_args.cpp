// linear_mx's argument checks (kernels/linear_mx.h).
#include <ATen/core/dispatch/Dispatcher.h>

#include "kernels/linear_mx.h"

namespace pt2q {
namespace {

constexpr const char* kOp = "linear_mx";

mx::ElemFormat parseFormat(c10::string_view name, const char* arg) {
  mx::ElemFormat f;
  TORCH_CHECK_VALUE(mx::parseElemFormat(std::string(name), &f), kOp, ": unknown ", arg, " \"", name,
                    "\"; expected one of ", mx::elemFormatNames());
  return f;
}

}  // namespace

void checkLinearMxTypes(const at::Tensor& input, const at::Tensor& weight_codes, const at::Tensor& weight_scales,
                        c10::string_view weight_format, const std::optional<std::string>& input_format,
                        c10::string_view input_rounding, c10::string_view input_scale_mode) {
  const auto dt = input.scalar_type();
  TORCH_CHECK_TYPE(dt == at::kFloat || dt == at::kBFloat16 || dt == at::kHalf, kOp,
                   ": input must be float32, bfloat16 or float16, got ", dt);
  TORCH_CHECK_VALUE(input.dim() >= 1, kOp, ": input must have at least 1 dimension");
  const mx::ElemFormat f = parseFormat(weight_format, "weight_format");
  const mx::CodeLayout l = mx::codeLayout(f);
  const auto ct = weight_codes.scalar_type();
  const bool fp8 = l.dtype == at::kFloat8_e4m3fn || l.dtype == at::kFloat8_e5m2;
  TORCH_CHECK_TYPE(ct == l.dtype || (fp8 && ct == at::kByte), kOp, ": weight_codes of ", f.name, " must be ",
                   l.dtype, fp8 ? " or uint8" : "", " (mx_quantize's codes), got ", ct);
  TORCH_CHECK_TYPE(weight_scales.scalar_type() == at::kByte, kOp, ": weight_scales must be uint8 (E8M0), got ",
                   weight_scales.scalar_type());
  TORCH_CHECK_VALUE(weight_codes.dim() == 2 && weight_scales.dim() == 2, kOp,
                    ": weight_codes and weight_scales must be 2-d ([N, ...]), got ", weight_codes.dim(), "-d and ",
                    weight_scales.dim(), "-d");
  if (input_format.has_value()) {
    parseFormat(*input_format, "input_format");
    mx::Rounding r;
    TORCH_CHECK_VALUE(mx::parseRounding(std::string(input_rounding), &r) && r != mx::Rounding::kStochastic, kOp,
                      ": input_rounding must be nearest, even or floor (stochastic rounding of the input is not "
                      "reproducible inside the op), got \"", input_rounding, "\"");
    mx::ScaleMode s;
    TORCH_CHECK_VALUE(mx::parseScaleMode(std::string(input_scale_mode), &s), kOp,
                      ": input_scale_mode must be floor, ceil, even or rceil, got \"", input_scale_mode, "\"");
  }
}

LinearMxArgs checkLinearMx(const at::Tensor& input, const at::Tensor& weight_codes, const at::Tensor& weight_scales,
                           c10::string_view weight_format, int64_t block_size, const c10::optional<at::Tensor>& bias,
                           const std::optional<std::string>& input_format, int64_t input_block_size,
                           c10::string_view input_rounding, c10::string_view input_scale_mode) {
  checkLinearMxTypes(input, weight_codes, weight_scales, weight_format, input_format, input_rounding,
                     input_scale_mode);
  LinearMxArgs a;
  a.weight_format = parseFormat(weight_format, "weight_format");
  a.layout = mx::codeLayout(a.weight_format);
  a.k = input.size(-1);
  a.n = weight_codes.size(0);
  a.m = 1;
  for (int64_t d = 0; d + 1 < input.dim(); ++d) a.m *= input.size(d);
  TORCH_CHECK_VALUE(block_size >= 0, kOp, ": block_size must be positive or 0 (the whole row), got ", block_size);
  a.block = block_size == 0 ? std::max<int64_t>(a.k, 1) : block_size;
  a.row_bytes = a.layout.packed() ? (a.k + a.layout.per_group - 1) / a.layout.per_group * a.layout.group_bytes : a.k;
  TORCH_CHECK_VALUE(weight_codes.size(1) == a.row_bytes, kOp, ": weight_codes must be [N, ", a.row_bytes, "] for ",
                    a.k, " input features in ", a.weight_format.name, ", got ", weight_codes.sizes());
  const int64_t nb = (a.k + a.block - 1) / a.block;
  TORCH_CHECK_VALUE(weight_scales.size(0) == a.n && weight_scales.size(1) == nb, kOp, ": weight_scales must be [",
                    a.n, ", ", nb, "] (", a.k, " input features in blocks of ", a.block, "), got ",
                    weight_scales.sizes());
  if (bias.has_value()) {
    TORCH_CHECK_VALUE(bias->dim() == 1 && bias->size(0) == a.n, kOp, ": bias must be [", a.n, "], got ",
                      bias->sizes());
    TORCH_CHECK_TYPE(bias->is_floating_point(), kOp, ": bias must be floating point, got ", bias->scalar_type());
  }
  TORCH_CHECK_VALUE(!input_format.has_value() || input_block_size >= 0, kOp,
                    ": input_block_size must be positive or 0 (the whole row), got ", input_block_size);
  a.quantize_input = input_format.has_value();
  return a;
}

at::Tensor linearMxInput(const at::Tensor& input, const std::optional<std::string>& input_format,
                         int64_t input_block_size, c10::string_view input_rounding, c10::string_view input_scale_mode,
                         bool input_flush_fp32_subnorms) {
  if (!input_format.has_value()) return input;
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("pt2q::mx_fake_quantize", "")
                             .typed<at::Tensor(const at::Tensor&, c10::string_view, int64_t, int64_t,
                                               c10::string_view, c10::string_view, bool, std::optional<int64_t>)>();
  return op.call(input, *input_format, input_block_size, -1, input_rounding, input_scale_mode,
                 input_flush_fp32_subnorms, std::nullopt);
}

}  // namespace pt2q
