// Argument parsing and validation shared by every implementation of the affine ops.
#include "kernels/affine_params.h"

#include <algorithm>
#include <cctype>
#include <sstream>
#include <string>

namespace pt2q {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

bool isFloatDtype(at::ScalarType t) {
  return t == at::kFloat || t == at::kBFloat16 || t == at::kHalf;
}

}  // namespace

std::string formatList(at::IntArrayRef v) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  os << "]";
  return os.str();
}

ZeroPointDomain parseZeroPointDomain(std::string_view s, const char* op) {
  const std::string v = lower(s);
  if (v == "int") return ZeroPointDomain::kInt;
  if (v == "float") return ZeroPointDomain::kFloat;
  if (v == "none") return ZeroPointDomain::kNone;
  TORCH_CHECK_VALUE(false, op, ": zero_point_domain must be \"int\", \"float\" or \"none\", got \"", s, "\"");
}

MappingType parseMappingType(std::string_view s, const char* op) {
  const std::string v = lower(s);
  if (v == "symmetric") return MappingType::kSymmetric;
  if (v == "symmetric_no_clipping_err") return MappingType::kSymmetricNoClippingErr;
  if (v == "asymmetric") return MappingType::kAsymmetric;
  TORCH_CHECK_VALUE(false, op, ": mapping_type must be \"symmetric\", \"symmetric_no_clipping_err\" or ",
                    "\"asymmetric\", got \"", s, "\"");
}

QuantDtype quantDtype(at::ScalarType t, const char* op, const char* arg) {
  switch (t) {
    case at::kChar: return {t, t, -128, 127};
    case at::kByte: return {t, t, 0, 255};
    case at::kShort: return {t, t, -32768, 32767};
    case at::kUInt16: return {t, t, 0, 65535};
    case at::kInt: return {t, t, INT32_MIN, INT32_MAX};
    default: break;
  }
  // Sub-byte types: torch.int1..int7 are stored in int8, torch.uint1..uint7 in uint8.
  static const at::ScalarType kSigned[] = {at::ScalarType::Int1, at::ScalarType::Int2, at::ScalarType::Int3,
                                           at::ScalarType::Int4, at::ScalarType::Int5, at::ScalarType::Int6,
                                           at::ScalarType::Int7};
  static const at::ScalarType kUnsigned[] = {at::ScalarType::UInt1, at::ScalarType::UInt2, at::ScalarType::UInt3,
                                             at::ScalarType::UInt4, at::ScalarType::UInt5, at::ScalarType::UInt6,
                                             at::ScalarType::UInt7};
  for (int bits = 1; bits <= 7; ++bits) {
    if (t == kSigned[bits - 1]) return {t, at::kChar, -(int64_t(1) << (bits - 1)), (int64_t(1) << (bits - 1)) - 1};
    if (t == kUnsigned[bits - 1]) return {t, at::kByte, 0, (int64_t(1) << bits) - 1};
  }
  TORCH_CHECK_TYPE(false, op, ": ", arg, " must be an integer quantization dtype (int8, uint8, int16, uint16, ",
                   "int32, torch.int1..int7, torch.uint1..uint7), got ", t);
}

QuantRange resolveQuantRange(const QuantDtype& q, std::optional<int64_t> qmin, std::optional<int64_t> qmax,
                             const char* op) {
  QuantRange r{qmin.value_or(q.lo), qmax.value_or(q.hi), qmin.has_value() && qmax.has_value()};
  TORCH_CHECK_VALUE(r.qmin >= q.lo && r.qmax <= q.hi, op, ": quant range [", r.qmin, ", ", r.qmax,
                    "] is outside the range [", q.lo, ", ", q.hi, "] of ", q.dtype);
  TORCH_CHECK_VALUE(r.qmin <= r.qmax, op, ": quant_min (", r.qmin, ") must not exceed quant_max (", r.qmax, ")");
  return r;
}

BlockLayout makeBlockLayout(at::IntArrayRef sizes, at::IntArrayRef block_size, const char* op) {
  TORCH_CHECK_VALUE(block_size.size() == sizes.size(), op, ": block_size ", formatList(block_size), " has ",
                    block_size.size(), " entries but the input has ", sizes.size(), " dimensions (shape ",
                    formatList(sizes), ")");
  BlockLayout l;
  const size_t nd = sizes.size();
  l.sizes.assign(sizes.begin(), sizes.end());
  l.block.assign(block_size.begin(), block_size.end());
  l.nblocks.resize(nd);
  l.qstride.resize(nd);
  for (size_t d = 0; d < nd; ++d) {
    const int64_t b = block_size[d], n = sizes[d];
    TORCH_CHECK_VALUE(b > 0 || (b == 0 && n == 0), op, ": block_size[", d, "] must be positive, got ", b,
                      " (block_size ", formatList(block_size), ")");
    TORCH_CHECK_VALUE(b <= n || n == 0, op, ": block_size[", d, "] = ", b, " exceeds dimension ", d,
                      " of size ", n, " (input shape ", formatList(sizes), ")");
    TORCH_CHECK_VALUE(n == 0 || n % b == 0, op, ": block_size[", d, "] = ", b, " does not divide dimension ", d,
                      " of size ", n, " (input shape ", formatList(sizes), ", block_size ",
                      formatList(block_size), ")");
    l.nblocks[d] = (n == 0) ? 0 : n / b;
  }
  int64_t stride = 1;
  for (size_t i = nd; i-- > 0;) {
    l.qstride[i] = stride;
    stride *= std::max<int64_t>(l.nblocks[i], 1);
  }
  // torchao's _get_reduction_params: a dimension split into groups becomes (n/b, b) and the b
  // part is reduced; a dimension kept whole with block > 1 is reduced in place.
  for (size_t d = 0; d < nd; ++d) {
    const int64_t b = l.block[d], n = l.sizes[d];
    const int64_t cur = static_cast<int64_t>(l.shape_for_reduction.size());
    if (b != n && b > 1) {
      l.shape_for_reduction.push_back(n / b);
      l.shape_for_reduction.push_back(b);
      l.reduction_dims.push_back(cur + 1);
    } else {
      l.shape_for_reduction.push_back(n);
      if (b != 1) l.reduction_dims.push_back(cur);
    }
  }
  l.shape_after_reduction = l.shape_for_reduction;
  for (int64_t r : l.reduction_dims) l.shape_after_reduction[r] = 1;
  for (size_t i = 0; i < l.shape_for_reduction.size(); ++i) {
    if (std::find(l.reduction_dims.begin(), l.reduction_dims.end(), int64_t(i)) == l.reduction_dims.end()) {
      l.scale_shape.push_back(l.shape_for_reduction[i]);
    }
  }
  l.num_blocks = 1;
  for (int64_t n : l.nblocks) l.num_blocks *= n;
  return l;
}

void checkFloatInput(const at::Tensor& input, const char* op, const char* arg) {
  TORCH_CHECK_TYPE(isFloatDtype(input.scalar_type()), op, ": ", arg,
                   " must be float32, bfloat16 or float16, got ", input.scalar_type());
}

void checkFloatDtype(at::ScalarType dtype, const char* op, const char* arg) {
  TORCH_CHECK_TYPE(isFloatDtype(dtype), op, ": ", arg, " must be float32, bfloat16 or float16, got ", dtype);
}

void checkQParams(const BlockLayout& layout, const at::Tensor& input, const at::Tensor& scale,
                  const std::optional<at::Tensor>& zero_point, ZeroPointDomain domain, const char* op) {
  TORCH_CHECK_TYPE(isFloatDtype(scale.scalar_type()), op, ": scale must be float32, bfloat16 or float16, got ",
                   scale.scalar_type());
  TORCH_CHECK_VALUE(scale.numel() == layout.num_blocks, op, ": scale has ", scale.numel(), " elements (shape ",
                    formatList(scale.sizes()), ") but block_size ", formatList(layout.block), " splits input of shape ",
                    formatList(layout.sizes), " into ", layout.num_blocks, " blocks (expected shape ",
                    formatList(layout.scale_shape), ")");
  TORCH_CHECK_VALUE(scale.device() == input.device(), op, ": scale is on ", scale.device(), " but input is on ",
                    input.device());
  const bool has_zp = zero_point.has_value() && zero_point->defined() && zero_point->numel() > 0;
  if (domain == ZeroPointDomain::kNone) {
    TORCH_CHECK_VALUE(!has_zp, op, ": zero_point must be None when zero_point_domain is \"none\"");
    return;
  }
  if (domain == ZeroPointDomain::kFloat) {
    TORCH_CHECK_VALUE(has_zp, op, ": zero_point_domain \"float\" needs a zero_point tensor");
  }
  if (!has_zp) return;
  const auto zt = zero_point->scalar_type();
  TORCH_CHECK_TYPE(at::isIntegralType(zt, /*includeBool=*/false) || isFloatDtype(zt), op,
                   ": zero_point must be an integer or float tensor, got ", zt);
  if (domain == ZeroPointDomain::kFloat) {
    TORCH_CHECK_TYPE(isFloatDtype(zt), op, ": zero_point_domain \"float\" needs a float zero_point, got ", zt);
  }
  TORCH_CHECK_VALUE(zero_point->numel() == layout.num_blocks, op, ": zero_point has ", zero_point->numel(),
                    " elements (shape ", formatList(zero_point->sizes()), ") but scale needs ", layout.num_blocks,
                    " (expected shape ", formatList(layout.scale_shape), ")");
  TORCH_CHECK_VALUE(zero_point->device() == input.device(), op, ": zero_point is on ", zero_point->device(),
                    " but input is on ", input.device());
}

at::Tensor scaleAsFloat(const at::Tensor& scale) {
  return scale.to(at::kFloat).contiguous().view({-1});
}

at::Tensor zeroPointAsFloat(const std::optional<at::Tensor>& zero_point, ZeroPointDomain domain) {
  if (domain == ZeroPointDomain::kNone || !zero_point.has_value() || !zero_point->defined() ||
      zero_point->numel() == 0) {
    return at::Tensor();
  }
  return zero_point->to(at::kFloat).contiguous().view({-1});
}

std::tuple<at::Tensor, at::Tensor> qparamsFromMinMax(const at::Tensor& min_val, const at::Tensor& max_val,
                                                     MappingType mapping, const QuantDtype& qdtype,
                                                     const QuantRange& range, double eps,
                                                     ZeroPointDomain domain) {
  // See Note [Affine qparam rules] in kernels/README.md: torch.ao's observer arithmetic, fp32.
  const double qmin = static_cast<double>(range.qmin), qmax = static_cast<double>(range.qmax);
  const at::Tensor eps_t = at::full({}, eps, min_val.options());
  // Divisors as tensors on the extrema's device: ATen on CUDA turns a division by a scalar into a
  // product with its reciprocal, which can differ from the CPU's quotient in the last bit.
  const auto divisor = [&](double v) { return at::full({}, v, min_val.options()); };
  if (domain == ZeroPointDomain::kFloat) {
    // torchao's tinygemm rule: zero need not be representable; zero point in float domain.
    at::Tensor scale = at::clamp_min((max_val - min_val) / divisor(qmax - qmin), eps_t);
    const double mid = (qmax + qmin + 1) / 2;
    at::Tensor zp = min_val + scale * mid;
    return {scale, zp};
  }
  at::Tensor min_neg = at::minimum(min_val, at::zeros_like(min_val));
  at::Tensor max_pos = at::maximum(max_val, at::zeros_like(max_val));
  if (mapping == MappingType::kAsymmetric) {
    at::Tensor scale = at::maximum((max_pos - min_neg) / divisor(qmax - qmin), eps_t);
    at::Tensor zp = at::clamp(range.qmin - at::round(min_neg / scale).to(at::kInt), range.qmin, range.qmax);
    if (domain == ZeroPointDomain::kNone) zp = at::zeros_like(zp);
    return {scale, zp};
  }
  at::Tensor scale;
  if (mapping == MappingType::kSymmetric) {
    scale = at::maximum(at::maximum(-min_neg, max_pos) / divisor((qmax - qmin) / 2), eps_t);
  } else {
    // torchao's SYMMETRIC_NO_CLIPPING_ERR: the larger of the two one-sided scales.
    at::Tensor smin = min_neg / divisor(qmin);
    at::Tensor smax = max_pos / divisor(qmax);
    scale = at::clamp_min(at::where(smin > smax, smin, smax), eps_t);
  }
  at::Tensor zp = at::full(scale.sizes(), symmetricZeroPoint(qdtype, range, domain), scale.options().dtype(at::kInt));
  return {scale, zp};
}

int64_t symmetricZeroPoint(const QuantDtype& qdtype, const QuantRange& range, ZeroPointDomain domain) {
  // torch.ao: unsigned types centre at 2^(bits-1) on their full range, at (qmin+qmax)//2 on a
  // custom one; signed types at 0.
  if (qdtype.lo != 0 || domain == ZeroPointDomain::kNone) return 0;
  return range.custom ? (range.qmin + range.qmax) / 2 : (qdtype.hi + 1) / 2;
}

}  // namespace pt2q
