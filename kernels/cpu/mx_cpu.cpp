// CPU kernel of mx_fake_quantize: shared checks, then the ISA's fused kernel over block rows
// in parallel (one pass over memory; each block row is independent).
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <cstdlib>
#include <string>

#include "kernels/cpu/mx_microkernels.h"
#include "kernels/mx/mx_args.h"

namespace pt2q::mx {
namespace {

int floatKind(at::ScalarType t) {
  return t == at::kFloat ? 0 : (t == at::kBFloat16 ? 1 : 2);
}

// The kernel arguments of one call. Outputs of 16 MiB or more get streaming stores, the rule
// of the affine kernels (kernels/cpu/affine_cpu.cpp); PT2Q_STREAMING_STORES=0/1 overrides.
cpu::MxCall makeMxCall(const MxSpec& spec, const MxShape& shape, int64_t out_bytes) {
  cpu::MxCall c{};
  c.is_int = spec.format.is_int();
  c.emin = spec.format.emin();
  c.m = spec.format.stored_mbits();
  c.emax = spec.format.emax;
  c.max_norm = spec.format.max_norm;
  c.rounding = static_cast<uint8_t>(spec.rounding);
  c.scale_mode = static_cast<uint8_t>(spec.scale_mode);
  c.flush_fp32_subnorms = spec.flush_fp32_subnorms;
  c.random_key = streamKey(spec.seed);
  c.len = shape.len;
  c.inner = shape.inner;
  c.block = spec.block;
  const char* env = std::getenv("PT2Q_STREAMING_STORES");
  c.stream_stores = env != nullptr ? std::string(env) == "1" : out_bytes >= (int64_t(16) << 20);
  return c;
}

int64_t blockRowGrain(const MxSpec& spec, const MxShape& shape) {
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, std::min(spec.block, shape.len) * shape.inner));
}

at::Tensor mxFakeQuantizeCpu(const at::Tensor& x, c10::string_view elem_format, int64_t block_size, int64_t axis,
                             c10::string_view rounding, c10::string_view scale_mode, bool flush_fp32_subnorms,
                             std::optional<int64_t> seed) {
  const MxSpec spec =
      prepareMx(x, elem_format, block_size, axis, rounding, scale_mode, flush_fp32_subnorms, seed, "mx_fake_quantize");
  const at::Tensor xc = x.contiguous();
  at::Tensor y = at::empty_like(xc);
  if (x.numel() == 0) return y;
  const MxShape shape = mxShape(xc, spec);
  const cpu::MxCall c = makeMxCall(spec, shape, y.numel() * y.element_size());
  const auto fn = cpu::mxKernels().fake_quantize[floatKind(xc.scalar_type())];
  const int64_t rows = shape.outer * shape.blocks_per_row;
  const int64_t grain = blockRowGrain(spec, shape);
  const void* xp = xc.const_data_ptr();
  void* yp = y.data_ptr();
  at::parallel_for(0, rows, grain, [&](int64_t b, int64_t e) { fn(xp, yp, b, e, c); });
  return y;
}

// Packs codes (one byte each) along the last dimension: `per_group` codes of `bits` bits, low
// bits first, into `group_bytes` bytes; a partial last group is zero-padded.
void packCodes(const uint8_t* in, uint8_t* out, int64_t rows, int64_t len, const CodeLayout& l) {
  const int64_t groups = (len + l.per_group - 1) / l.per_group;
  at::parallel_for(0, rows, std::max<int64_t>(1, 65536 / std::max<int64_t>(len, 1)), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const uint8_t* src = in + r * len;
      uint8_t* dst = out + r * groups * l.group_bytes;
      // Whole groups in simple loops the compiler vectorizes; the partial last group below.
      const int64_t whole = len / l.per_group;
      int64_t g0 = 0;
      if (l.per_group == 2) {
        for (int64_t g = 0; g < whole; ++g) dst[g] = static_cast<uint8_t>(src[2 * g] | (src[2 * g + 1] << 4));
        g0 = whole;
      } else if (l.per_group == 4 && l.group_bytes == 1) {
        for (int64_t g = 0; g < whole; ++g) {
          dst[g] = static_cast<uint8_t>(src[4 * g] | (src[4 * g + 1] << 2) | (src[4 * g + 2] << 4) | (src[4 * g + 3] << 6));
        }
        g0 = whole;
      } else if (l.per_group == 4 && l.group_bytes == 3) {
        for (int64_t g = 0; g < whole; ++g) {
          const uint32_t w = src[4 * g] | (src[4 * g + 1] << 6) | (src[4 * g + 2] << 12) | (uint32_t(src[4 * g + 3]) << 18);
          dst[3 * g] = w & 0xFF;
          dst[3 * g + 1] = (w >> 8) & 0xFF;
          dst[3 * g + 2] = (w >> 16) & 0xFF;
        }
        g0 = whole;
      }
      for (int64_t g = g0; g < groups; ++g) {
        uint32_t word = 0;
        for (int i = 0; i < l.per_group; ++i) {
          const int64_t k = g * l.per_group + i;
          if (k < len) word |= static_cast<uint32_t>(src[k]) << (i * l.bits);
        }
        for (int byte = 0; byte < l.group_bytes; ++byte) dst[g * l.group_bytes + byte] = (word >> (8 * byte)) & 0xFF;
      }
    }
  });
}

std::tuple<at::Tensor, at::Tensor> mxQuantizeCpu(const at::Tensor& x, c10::string_view elem_format,
                                                 int64_t block_size, int64_t axis, c10::string_view rounding,
                                                 c10::string_view scale_mode, bool flush_fp32_subnorms,
                                                 std::optional<int64_t> seed) {
  const MxSpec spec =
      prepareMx(x, elem_format, block_size, axis, rounding, scale_mode, flush_fp32_subnorms, seed, "mx_quantize");
  TORCH_CHECK_VALUE(x.dim() >= 1, "mx_quantize: x must have at least one dimension");
  const CodeLayout layout = codeLayout(spec.format);
  const at::Tensor xc = x.contiguous();
  const bool wide = layout.bits > 8;
  at::Tensor codes = at::empty(xc.sizes(), xc.options().dtype(wide ? at::kShort : at::kByte));
  at::Tensor scales = at::empty(scalesShape(xc.sizes(), spec), xc.options().dtype(at::kByte));
  if (xc.numel() > 0) {
    const MxShape shape = mxShape(xc, spec);
    cpu::MxCall c = makeMxCall(spec, shape, codes.numel() * codes.element_size());
    c.code_bits = layout.bits;
    c.ebits = spec.format.ebits;
    const auto fn = cpu::mxKernels().quantize[floatKind(xc.scalar_type())];
    const int64_t rows = shape.outer * shape.blocks_per_row;
    const int64_t grain = blockRowGrain(spec, shape);
    const void* xp = xc.const_data_ptr();
    void* cp = codes.data_ptr();
    uint8_t* sp = scales.data_ptr<uint8_t>();
    at::parallel_for(0, rows, grain, [&](int64_t b, int64_t e) { fn(xp, cp, sp, b, e, c); });
  }
  if (layout.packed()) {
    at::Tensor packed = at::empty(codesShape(xc.sizes(), layout), xc.options().dtype(at::kByte));
    const int64_t len = xc.size(-1);
    packCodes(codes.data_ptr<uint8_t>(), packed.data_ptr<uint8_t>(), len == 0 ? 0 : xc.numel() / len, len, layout);
    return {packed, scales};
  }
  return {codes.view(layout.dtype), scales};
}

}  // namespace
}  // namespace pt2q::mx

TORCH_LIBRARY_IMPL(pt2q, CPU, m) {
  m.impl("mx_fake_quantize", &pt2q::mx::mxFakeQuantizeCpu);
  m.impl("mx_quantize", &pt2q::mx::mxQuantizeCpu);
}
