// Argument checks of the MX / BFP ops, shared by the reference, CPU and Meta kernels.
#include "kernels/mx/mx_args.h"

#include <cmath>

#include <ATen/CPUGeneratorImpl.h>

#include <mutex>
#include <string>

namespace pt2q::mx {

MxSpec prepareMx(const at::Tensor& x, c10::string_view elem_format, int64_t block_size, int64_t axis,
                 c10::string_view rounding, c10::string_view scale_mode, bool flush_fp32_subnorms,
                 std::optional<int64_t> seed, const char* op) {
  const auto dt = x.scalar_type();
  TORCH_CHECK_TYPE(dt == at::kFloat || dt == at::kBFloat16 || dt == at::kHalf, op,
                   ": x must be float32, bfloat16 or float16, got ", dt);
  MxSpec s;
  TORCH_CHECK_VALUE(parseElemFormat(std::string(elem_format), &s.format), op, ": unknown elem_format \"",
                    elem_format, "\"; expected one of ", elemFormatNames());
  TORCH_CHECK_VALUE(parseRounding(std::string(rounding), &s.rounding), op, ": rounding must be \"nearest\", ",
                    "\"even\", \"floor\" or \"stochastic\", got \"", rounding, "\"");
  TORCH_CHECK_VALUE(parseScaleMode(std::string(scale_mode), &s.scale_mode), op, ": scale_mode must be \"floor\", ",
                    "\"ceil\", \"even\" or \"rceil\", got \"", scale_mode, "\"");
  const int64_t dim = std::max<int64_t>(x.dim(), 1);
  TORCH_CHECK_VALUE(axis >= -dim && axis < dim, op, ": axis ", axis, " is out of range for a tensor of ",
                    x.dim(), " dimensions");
  s.axis = axis < 0 ? axis + dim : axis;
  TORCH_CHECK_VALUE(block_size >= 0, op, ": block_size must be positive, or 0 for the whole axis, got ", block_size);
  const int64_t len = x.dim() == 0 ? 1 : x.size(s.axis);
  s.block = block_size == 0 ? std::max<int64_t>(len, 1) : block_size;
  s.flush_fp32_subnorms = flush_fp32_subnorms;
  if (seed.has_value()) {
    s.seed = static_cast<uint64_t>(*seed);
  } else if (s.rounding == Rounding::kStochastic) {
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    s.seed = gen.get<at::CPUGeneratorImpl>()->random64();
  } else {
    s.seed = 0;
  }
  return s;
}

MxSpec prepareMxQuantize(const at::Tensor& x, c10::string_view elem_format, int64_t block_size, int64_t axis,
                         c10::string_view rounding, c10::string_view scale_mode, bool flush_fp32_subnorms,
                         std::optional<int64_t> seed) {
  const MxSpec spec =
      prepareMx(x, elem_format, block_size, axis, rounding, scale_mode, flush_fp32_subnorms, seed, "mx_quantize");
  TORCH_CHECK_VALUE(x.dim() >= 1, "mx_quantize: x must have at least one dimension");
  return spec;
}

MxShape mxShape(const at::Tensor& x, const MxSpec& spec) {
  MxShape m;
  if (x.dim() == 0) return m;
  for (int64_t d = 0; d < spec.axis; ++d) m.outer *= x.size(d);
  m.len = x.size(spec.axis);
  for (int64_t d = spec.axis + 1; d < x.dim(); ++d) m.inner *= x.size(d);
  m.blocks_per_row = (m.len + spec.block - 1) / spec.block;
  return m;
}

CodeLayout codeLayout(const ElemFormat& f) {
  if (f.name == "fp8_e4m3") return {at::kFloat8_e4m3fn, 1, 1, 8};
  if (f.name == "fp8_e5m2") return {at::kFloat8_e5m2, 1, 1, 8};
  if (f.name == "fp4_e2m1" || f.name == "int4") return {at::kByte, 2, 1, 4};
  if (f.name == "int2") return {at::kByte, 4, 1, 2};
  if (f.name == "fp6_e3m2" || f.name == "fp6_e2m3") return {at::kByte, 4, 3, 6};
  if (f.is_int()) return f.mbits <= 8 ? CodeLayout{at::kChar, 1, 1, 8} : CodeLayout{at::kShort, 1, 1, 16};
  TORCH_INTERNAL_ASSERT(false, "no code layout for ", f.name);
}

MxDequantArgs prepareMxDequantize(const at::Tensor& codes, const at::Tensor& scales, c10::string_view elem_format,
                                  int64_t block_size, int64_t axis, std::optional<int64_t> last_dim,
                                  at::ScalarType output_dtype) {
  const char* op = "mx_dequantize";
  MxDequantArgs a;
  TORCH_CHECK_VALUE(parseElemFormat(std::string(elem_format), &a.format), op, ": unknown elem_format \"",
                    elem_format, "\"; expected one of ", elemFormatNames());
  TORCH_CHECK_TYPE(output_dtype == at::kFloat || output_dtype == at::kBFloat16 || output_dtype == at::kHalf, op,
                   ": output_dtype must be float32, bfloat16 or float16, got ", output_dtype);
  TORCH_CHECK_TYPE(scales.scalar_type() == at::kByte, op, ": scales must be uint8 (E8M0), got ", scales.scalar_type());
  TORCH_CHECK_VALUE(codes.dim() >= 1 && codes.dim() == scales.dim(), op, ": codes (", codes.dim(), "-d) and scales (",
                    scales.dim(), "-d) must have the same number of dimensions");
  a.layout = codeLayout(a.format);
  const ElemFormat& f = a.format;
  a.sizes.assign(codes.sizes().begin(), codes.sizes().end());
  if (a.layout.packed()) {
    TORCH_CHECK_TYPE(codes.scalar_type() == at::kByte, op, ": ", f.name, " codes are packed uint8, got ",
                     codes.scalar_type());
    const int64_t full = codes.size(-1) / a.layout.group_bytes * a.layout.per_group;
    const int64_t len = last_dim.value_or(full);
    TORCH_CHECK_VALUE(codes.size(-1) % a.layout.group_bytes == 0 && len > full - a.layout.per_group && len <= full,
                      op, ": last_dim ", len, " does not fit ", codes.size(-1), " packed bytes");
    a.sizes.back() = len;
  } else if (a.layout.dtype == at::kFloat8_e4m3fn || a.layout.dtype == at::kFloat8_e5m2) {
    TORCH_CHECK_TYPE(codes.scalar_type() == a.layout.dtype || codes.scalar_type() == at::kByte, op, ": ", f.name,
                     " codes must be ", a.layout.dtype, " or uint8, got ", codes.scalar_type());
  } else {
    TORCH_CHECK_TYPE(codes.scalar_type() == a.layout.dtype, op, ": ", f.name, " codes must be ", a.layout.dtype,
                     ", got ", codes.scalar_type());
  }
  const int64_t dim = codes.dim();
  TORCH_CHECK_VALUE(axis >= -dim && axis < dim, op, ": axis ", axis, " is out of range for ", dim, "-d codes");
  a.axis = axis < 0 ? axis + dim : axis;
  const int64_t len = a.sizes[a.axis];
  TORCH_CHECK_VALUE(block_size >= 0, op, ": block_size must be positive or 0, got ", block_size);
  a.block = block_size == 0 ? std::max<int64_t>(len, 1) : block_size;
  const int64_t nb = (len + a.block - 1) / a.block;
  for (int64_t d = 0; d < dim; ++d) {
    const int64_t want = d == a.axis ? nb : a.sizes[d];
    TORCH_CHECK_VALUE(scales.size(d) == want, op, ": scales has ", scales.size(d), " entries along dimension ", d,
                      " but ", d == a.axis ? std::to_string(len) + " elements in blocks of " + std::to_string(a.block) +
                                                 " need " + std::to_string(nb)
                                           : std::string("the codes have ") + std::to_string(want));
  }
  return a;
}

std::array<float, 256> codeTable(const ElemFormat& f, const CodeLayout& l) {
  std::array<float, 256> t{};
  const int m = f.stored_mbits();
  for (int code = 0; code < 256; ++code) {
    if (f.is_int()) {
      const int bits = l.bits;
      const int v = (code & (1 << (bits - 1))) ? (code & ((1 << bits) - 1)) - (1 << bits) : (code & ((1 << bits) - 1));
      t[code] = std::ldexp(static_cast<float>(v), -m);
      continue;
    }
    const int nbits = 1 + f.ebits + m;
    if (code >= (1 << nbits)) continue;
    const int sign = (code >> (f.ebits + m)) & 1;
    const int expf = (code >> m) & ((1 << f.ebits) - 1);
    const int mant = code & ((1 << m) - 1);
    const float mag = expf == 0 ? std::ldexp(static_cast<float>(mant), f.emin() - m)
                                : std::ldexp(1.0f + std::ldexp(static_cast<float>(mant), -m), expf - f.bias());
    t[code] = sign ? -mag : mag;
  }
  return t;
}

std::vector<int64_t> codesShape(at::IntArrayRef sizes, const CodeLayout& l) {
  std::vector<int64_t> s(sizes.begin(), sizes.end());
  if (l.packed()) s.back() = (s.back() + l.per_group - 1) / l.per_group * l.group_bytes;
  return s;
}

std::vector<int64_t> scalesShape(at::IntArrayRef sizes, const MxSpec& spec) {
  std::vector<int64_t> s(sizes.begin(), sizes.end());
  s[spec.axis] = (s[spec.axis] + spec.block - 1) / spec.block;
  return s;
}

}  // namespace pt2q::mx
