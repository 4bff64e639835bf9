// Meta kernels of the quantized linear ops (weight-only and dynamic) and quantize_per_token_int8: shapes and dtypes with the real kernels' type
// checks, sizes kept symbolic (SymInt) so export and compile trace them with dynamic shapes.
#include <torch/library.h>

#include "kernels/linear_weight_only_args.h"

namespace pt2q {
namespace {

template <int Bits>
at::Tensor packWeightMeta(const at::Tensor& weight) {
  checkPackWeight(weight, Bits);
  const c10::SymInt& n = weight.sym_size(0);
  const c10::SymInt& k = weight.sym_size(1);
  const int64_t chunk = packChunk(Bits);
  return at::empty_symint({(n + kPackRows - 1) / kPackRows, (k + chunk - 1) / chunk * chunk * kPackRows * Bits / 8},
                          weight.options());
}

template <int Bits, bool Dynamic>
at::Tensor linearWeightOnlyMeta(const at::Tensor& input, const at::Tensor& packed, const at::Tensor& scales,
                                const c10::optional<at::Tensor>& zero_points, const c10::optional<at::Tensor>& /*bias*/) {
  const char* op = Dynamic ? (Bits == 4 ? "linear_w4a8" : "linear_w8a8") : (Bits == 4 ? "linear_w4a16" : "linear_w8a16");
  checkLinearWeightOnlyTypes(op, input, packed, scales, zero_points);
  std::vector<c10::SymInt> sizes = input.sym_sizes().vec();
  sizes.back() = scales.sym_size(0);
  return at::empty_symint(sizes, input.options());
}

template <int Bits>
at::Tensor linearDynamicMeta(const at::Tensor& input, const at::Tensor& packed, const at::Tensor& scales,
                             const c10::optional<at::Tensor>& zero_points, const c10::optional<at::Tensor>& bias,
                             c10::optional<double> /*per_tensor_eps*/) {
  return linearWeightOnlyMeta<Bits, true>(input, packed, scales, zero_points, bias);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> quantizePerTokenMeta(const at::Tensor& input) {
  const auto dt = input.scalar_type();
  TORCH_CHECK_VALUE(dt == at::kFloat || dt == at::kBFloat16 || dt == at::kHalf,
                    "quantize_per_token_int8: input must be float32, bfloat16 or float16, got ", dt);
  TORCH_CHECK_VALUE(input.dim() >= 1, "quantize_per_token_int8: input must have at least 1 dimension");
  std::vector<c10::SymInt> q = input.sym_sizes().vec();
  q.back() = 1;
  return {at::empty_symint(input.sym_sizes(), input.options().dtype(at::kChar)),
          at::empty_symint(q, input.options().dtype(at::kDouble)), at::empty_symint(q, input.options().dtype(at::kLong))};
}

}  // namespace
}  // namespace pt2q

TORCH_LIBRARY_IMPL(pt2q, Meta, m) {
  m.impl("pack_weight_int8", &pt2q::packWeightMeta<8>);
  m.impl("pack_weight_int4", &pt2q::packWeightMeta<4>);
  m.impl("linear_w8a16", &pt2q::linearWeightOnlyMeta<8, false>);
  m.impl("linear_w4a16", &pt2q::linearWeightOnlyMeta<4, false>);
  m.impl("linear_w8a8", &pt2q::linearDynamicMeta<8>);
  m.impl("linear_w4a8", &pt2q::linearDynamicMeta<4>);
  m.impl("quantize_per_token_int8", &pt2q::quantizePerTokenMeta);
}
