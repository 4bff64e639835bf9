// Meta kernels of the affine and int4 packing ops: output shapes and dtypes only, with the
// same argument checks as the real kernels, so torch.export / torch.compile trace them and
// reject bad arguments at trace time. Sizes stay symbolic (SymInt) where possible.
#include <torch/library.h>

#include "kernels/affine_ops.h"
#include "kernels/int4_pack_args.h"

namespace pt2q {
namespace {

// Scale shape of choose_qparams_affine (torchao's: shape_for_reduction minus reduced dims).
std::vector<c10::SymInt> symScaleShape(c10::SymIntArrayRef sizes, c10::SymIntArrayRef block, const char* op) {
  TORCH_CHECK_VALUE(block.size() == sizes.size(), op, ": block_size has ", block.size(),
                    " entries but the input has ", sizes.size(), " dimensions");
  std::vector<c10::SymInt> out;
  for (size_t d = 0; d < sizes.size(); ++d) {
    const c10::SymInt& n = sizes[d];
    const c10::SymInt& b = block[d];
    TORCH_CHECK_VALUE(b > 0, op, ": block_size[", d, "] must be positive, got ", b);
    TORCH_CHECK_VALUE(n % b == 0, op, ": block_size[", d, "] = ", b, " does not divide dimension ", d,
                      " of size ", n);
    if (b == 1) {
      out.push_back(n);
    } else if (b != n) {
      out.push_back(n / b);
    }
  }
  return out;
}

c10::SymInt symNumBlocks(c10::SymIntArrayRef sizes, c10::SymIntArrayRef block, const char* op) {
  c10::SymInt nb = 1;
  for (const auto& s : symScaleShape(sizes, block, op)) nb = nb * s;
  return nb;
}

void checkQParamsMeta(const at::Tensor& input, c10::SymIntArrayRef block_size, const at::Tensor& scale,
                      const std::optional<at::Tensor>& zero_point, ZeroPointDomain domain, const char* op) {
  const c10::SymInt nb = symNumBlocks(input.sym_sizes(), block_size, op);
  TORCH_CHECK_VALUE(scale.sym_numel() == nb, op, ": scale has ", scale.sym_numel(), " elements but block_size ",
                    "splits the input into ", nb, " blocks");
  TORCH_CHECK_TYPE(at::isFloatingType(scale.scalar_type()), op, ": scale must be a float tensor, got ",
                   scale.scalar_type());
  const bool has_zp = zero_point.has_value() && zero_point->defined();
  TORCH_CHECK_VALUE(domain != ZeroPointDomain::kNone || !has_zp, op,
                    ": zero_point must be None when zero_point_domain is \"none\"");
  TORCH_CHECK_VALUE(domain != ZeroPointDomain::kFloat || has_zp, op,
                    ": zero_point_domain \"float\" needs a zero_point tensor");
  if (has_zp && zero_point->sym_numel() != 0) {
    TORCH_CHECK_VALUE(zero_point->sym_numel() == nb, op, ": zero_point has ", zero_point->sym_numel(),
                      " elements but scale needs ", nb);
  }
}

std::tuple<at::Tensor, at::Tensor> chooseQParamsAffineMeta(
    const at::Tensor& input, c10::string_view mapping_type, c10::SymIntArrayRef block_size,
    at::ScalarType target_dtype, std::optional<int64_t> quant_min, std::optional<int64_t> quant_max,
    std::optional<double> eps, std::optional<at::ScalarType> scale_dtype,
    std::optional<at::ScalarType> zero_point_dtype, c10::string_view zero_point_domain) {
  const ChooseQParamsSpec spec = prepareChooseQParams(input, mapping_type, target_dtype, quant_min, quant_max,
                                                      scale_dtype, zero_point_dtype, zero_point_domain);
  const auto shape = symScaleShape(input.sym_sizes(), block_size, "choose_qparams_affine");
  const at::ScalarType sdt = spec.scale_dtype, zdt = spec.zero_point_dtype;
  return {at::empty_symint(shape, input.options().dtype(sdt)), at::empty_symint(shape, input.options().dtype(zdt))};
}

at::Tensor quantizeAffineMeta(const at::Tensor& input, c10::SymIntArrayRef block_size, const at::Tensor& scale,
                              const std::optional<at::Tensor>& zero_point, at::ScalarType output_dtype,
                              std::optional<int64_t> quant_min, std::optional<int64_t> quant_max,
                              c10::string_view zero_point_domain) {
  const char* op = "quantize_affine";
  checkFloatInput(input, op, "input");
  const QuantDtype q = quantDtype(output_dtype, op, "output_dtype");
  resolveQuantRange(q, quant_min, quant_max, op);
  checkQParamsMeta(input, block_size, scale, zero_point, parseZeroPointDomain(zero_point_domain, op), op);
  return at::empty_symint(input.sym_sizes(), input.options().dtype(q.storage));
}

at::Tensor dequantizeAffineMeta(const at::Tensor& input, c10::SymIntArrayRef block_size, const at::Tensor& scale,
                                const std::optional<at::Tensor>& zero_point, at::ScalarType input_dtype,
                                std::optional<int64_t> quant_min, std::optional<int64_t> quant_max,
                                c10::string_view zero_point_domain, at::ScalarType output_dtype) {
  const char* op = "dequantize_affine";
  checkFloatDtype(output_dtype, op, "output_dtype");
  const QuantDtype q = quantDtype(input_dtype, op, "input_dtype");
  resolveQuantRange(q, quant_min, quant_max, op);
  TORCH_CHECK_TYPE(input.scalar_type() == q.storage, op, ": input holds ", input.scalar_type(),
                   " but input_dtype ", input_dtype, " is stored as ", q.storage);
  checkQParamsMeta(input, block_size, scale, zero_point, parseZeroPointDomain(zero_point_domain, op), op);
  return at::empty_symint(input.sym_sizes(), input.options().dtype(output_dtype));
}

std::tuple<at::Tensor, at::Tensor> fakeQuantizeAffineCachemaskMeta(
    const at::Tensor& input, c10::SymIntArrayRef block_size, const at::Tensor& scale,
    const std::optional<at::Tensor>& zero_point, at::ScalarType quant_dtype, std::optional<int64_t> quant_min,
    std::optional<int64_t> quant_max, c10::string_view zero_point_domain) {
  const char* op = "fake_quantize_affine";
  checkFloatInput(input, op, "input");
  resolveQuantRange(quantDtype(quant_dtype, op, "quant_dtype"), quant_min, quant_max, op);
  checkQParamsMeta(input, block_size, scale, zero_point, parseZeroPointDomain(zero_point_domain, op), op);
  return {at::empty_symint(input.sym_sizes(), input.options()),
          at::empty_symint(input.sym_sizes(), input.options().dtype(at::kBool))};
}

at::Tensor fakeQuantizeAffineMeta(const at::Tensor& input, c10::SymIntArrayRef block_size, const at::Tensor& scale,
                                  const std::optional<at::Tensor>& zero_point, at::ScalarType quant_dtype,
                                  std::optional<int64_t> quant_min, std::optional<int64_t> quant_max,
                                  c10::string_view zero_point_domain) {
  return std::get<0>(fakeQuantizeAffineCachemaskMeta(input, block_size, scale, zero_point, quant_dtype, quant_min,
                                                     quant_max, zero_point_domain));
}

std::vector<c10::SymInt> symLastDimScaled(c10::SymIntArrayRef sizes, bool halve) {
  std::vector<c10::SymInt> s(sizes.begin(), sizes.end());
  s.back() = halve ? s.back() / 2 : s.back() * 2;
  return s;
}

at::Tensor packInt4Meta(const at::Tensor& input, c10::string_view nibble_order) {
  parseNibbleOrder(nibble_order, "pack_int4");
  TORCH_CHECK_TYPE(input.scalar_type() == at::kChar || input.scalar_type() == at::kByte,
                   "pack_int4: input must be int8 or uint8, got ", input.scalar_type());
  TORCH_CHECK_VALUE(input.dim() >= 1, "pack_int4: input must have at least one dimension");
  TORCH_CHECK_VALUE(input.sym_size(-1) % 2 == 0, "pack_int4: the last dimension must be even, got ",
                    input.sym_size(-1));
  return at::empty_symint(symLastDimScaled(input.sym_sizes(), true), input.options().dtype(at::kByte));
}

at::Tensor unpackInt4Meta(const at::Tensor& packed, bool is_signed, c10::string_view nibble_order) {
  parseNibbleOrder(nibble_order, "unpack_int4");
  checkUnpackInt4Input(packed);
  return at::empty_symint(symLastDimScaled(packed.sym_sizes(), false),
                          packed.options().dtype(is_signed ? at::kChar : at::kByte));
}

}  // namespace
}  // namespace pt2q

TORCH_LIBRARY_IMPL(pt2q, Meta, m) {
  m.impl("choose_qparams_affine", &pt2q::chooseQParamsAffineMeta);
  m.impl("quantize_affine", &pt2q::quantizeAffineMeta);
  m.impl("dequantize_affine", &pt2q::dequantizeAffineMeta);
  m.impl("fake_quantize_affine", &pt2q::fakeQuantizeAffineMeta);
  m.impl("fake_quantize_affine_cachemask", &pt2q::fakeQuantizeAffineCachemaskMeta);
  m.impl("pack_int4", &pt2q::packInt4Meta);
  m.impl("unpack_int4", &pt2q::unpackInt4Meta);
}
