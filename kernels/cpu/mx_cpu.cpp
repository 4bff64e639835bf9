// CPU kernel of mx_fake_quantize: shared checks, then the ISA's fused kernel over block rows
// in parallel (one pass over memory; each block row is independent).
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <array>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <vector>
#include <type_traits>
#include <string>

#include "kernels/cpu/mx_code_pack.h"
#include "kernels/cpu/mx_microkernels.h"
#include "kernels/linear_mx.h"
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
  fillMxModes(spec, c);
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
      // Whole groups first; the partial last group below.
      const int64_t whole = len / l.per_group;
      cpu::packCodeRun(src, whole * l.per_group, l.bits, dst);
      const int64_t g0 = whole;
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
  const MxSpec spec = prepareMxQuantize(x, elem_format, block_size, axis, rounding, scale_mode, flush_fp32_subnorms, seed);
  const CodeLayout layout = codeLayout(spec.format);
  const at::Tensor xc = x.contiguous();
  const bool wide = layout.bits > 8;
  // The kernels (every ISA) pack sub-byte codes themselves when no packing group straddles a
  // row or, along the last axis, a block (strided blocks are packed across neighbouring
  // columns, which never straddle); otherwise packCodes does it in a second pass.
  const bool axis_last = spec.axis == xc.dim() - 1;
  const bool pack_in_kernel = layout.packed() && xc.dim() > 0 && xc.size(-1) % layout.per_group == 0 &&
                              (!axis_last || spec.block % layout.per_group == 0);
  at::Tensor codes = pack_in_kernel ? at::empty(codesShape(xc.sizes(), layout), xc.options().dtype(at::kByte))
                                    : at::empty(xc.sizes(), xc.options().dtype(wide ? at::kShort : at::kByte));
  at::Tensor scales = at::empty(scalesShape(xc.sizes(), spec), xc.options().dtype(at::kByte));
  if (xc.numel() > 0) {
    const MxShape shape = mxShape(xc, spec);
    cpu::MxCall c = makeMxCall(spec, shape, codes.numel() * codes.element_size());
    c.code_bits = layout.bits;
    c.ebits = spec.format.ebits;
    c.pack_bits = pack_in_kernel ? layout.bits : 0;
    const auto fn = cpu::mxKernels().quantize[floatKind(xc.scalar_type())];
    const int64_t rows = shape.outer * shape.blocks_per_row;
    const int64_t grain = blockRowGrain(spec, shape);
    const void* xp = xc.const_data_ptr();
    void* cp = codes.data_ptr();
    uint8_t* sp = scales.data_ptr<uint8_t>();
    at::parallel_for(0, rows, grain, [&](int64_t b, int64_t e) { fn(xp, cp, sp, b, e, c); });
  }
  if (pack_in_kernel) return {codes, scales};
  if (layout.packed()) {
    at::Tensor packed = at::empty(codesShape(xc.sizes(), layout), xc.options().dtype(at::kByte));
    const int64_t len = xc.size(-1);
    packCodes(codes.data_ptr<uint8_t>(), packed.data_ptr<uint8_t>(), len == 0 ? 0 : xc.numel() / len, len, layout);
    return {packed, scales};
  }
  return {codes.view(layout.dtype), scales};
}

template <typename Out>
Out fromFloat(float v) {
  return static_cast<Out>(v);  // c10::BFloat16 / c10::Half round to nearest even
}

// y = table[code] * scale of its block, over block rows of the [outer, len, inner] layout.
template <typename Out, typename CodeT>
void dequantizeRows(const CodeT* codes, const uint8_t* scales, Out* y, const std::array<float, 256>* table, int m,
                    const MxShape& sh, int64_t block, int64_t rb, int64_t re) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float int_step = std::ldexp(1.0f, -m);
  std::vector<float> scale(sh.inner);
  for (int64_t r = rb; r < re; ++r) {
    const int64_t o = r / sh.blocks_per_row, j = r % sh.blocks_per_row;
    const int64_t l0 = j * block, l1 = std::min(sh.len, l0 + block);
    for (int64_t w = 0; w < sh.inner; ++w) {
      const uint8_t sb = scales[r * sh.inner + w];
      scale[w] = sb == 255 ? nan : (sb == 0 ? std::ldexp(1.0f, -127) : std::ldexp(1.0f, sb - 127));
    }
    for (int64_t l = l0; l < l1; ++l) {
      const int64_t base = (o * sh.len + l) * sh.inner;
      for (int64_t w = 0; w < sh.inner; ++w) {
        float v;
        if constexpr (sizeof(CodeT) == 1) {
          v = (*table)[codes[base + w]];
        } else {
          v = static_cast<float>(codes[base + w]) * int_step;
        }
        y[base + w] = fromFloat<Out>(v * scale[w]);
      }
    }
  }
}

at::Tensor mxDequantizeCpu(const at::Tensor& codes, const at::Tensor& scales, c10::string_view elem_format,
                           int64_t block_size, int64_t axis, std::optional<int64_t> last_dim,
                           at::ScalarType output_dtype) {
  const MxDequantArgs a = prepareMxDequantize(codes, scales, elem_format, block_size, axis, last_dim, output_dtype);
  const CodeLayout& l = a.layout;
  // Blocks along the last axis: rows of codes, decoded by linear_mx's vector decoders (the same
  // values, 32 codes at a time) instead of one code at a time.
  // Other axes: the same decoders, each element scaled by its own block's byte.
  const int64_t len = a.sizes.back();
  if (len > 0 && codes.numel() > 0) {
    LinearMxArgs g;
    g.weight_format = a.format;
    g.layout = l;
    g.k = len;
    g.n = codes.numel() / codes.size(-1);
    g.block = a.block;
    g.row_bytes = codes.size(-1);
    at::Tensor y = at::empty({g.n, len}, codes.options().dtype(output_dtype));
    const at::Tensor c2 = codes.contiguous().reshape({g.n, g.row_bytes});
    if (a.axis + 1 == static_cast<int64_t>(a.sizes.size())) {
      mxDecodeRowsCpu(g, c2, scales.contiguous().reshape({g.n, -1}), y);
      return y.reshape(a.sizes);
    }
    int64_t inner = 1;
    for (size_t d = a.axis + 1; d < a.sizes.size(); ++d) inner *= a.sizes[d];
    const int64_t axis_len = a.sizes[a.axis];
    if (mxDecodeInnerCpu(g, c2, scales.contiguous(), axis_len, (axis_len + a.block - 1) / a.block, a.block,
                         inner / len, y)) {
      return y.reshape(a.sizes);
    }
  }
  // One code per element: unpack sub-byte codes first (a cheap pass over the small array).
  at::Tensor per_elem;
  if (l.packed()) {
    per_elem = at::empty(a.sizes, codes.options().dtype(at::kByte));
    const at::Tensor cc = codes.contiguous();
    const int64_t len = a.sizes.back(), nbytes = cc.size(-1), rows = len == 0 ? 0 : per_elem.numel() / len;
    const uint8_t* src = cc.const_data_ptr<uint8_t>();
    uint8_t* dst = per_elem.data_ptr<uint8_t>();
    const uint32_t mask = (1u << l.bits) - 1u;
    at::parallel_for(0, rows, std::max<int64_t>(1, 65536 / std::max<int64_t>(len, 1)), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const uint8_t* in = src + r * nbytes;
        uint8_t* out = dst + r * len;
        for (int64_t g = 0; g * l.per_group < len; ++g) {
          uint32_t word = in[g * l.group_bytes];
          if (l.group_bytes == 3) word |= (uint32_t(in[g * 3 + 1]) << 8) | (uint32_t(in[g * 3 + 2]) << 16);
          const int64_t n = std::min<int64_t>(l.per_group, len - g * l.per_group);
          for (int64_t i = 0; i < n; ++i) out[g * l.per_group + i] = static_cast<uint8_t>((word >> (i * l.bits)) & mask);
        }
      }
    });
  } else {
    per_elem = codes.contiguous();
    if (per_elem.element_size() == 1) per_elem = per_elem.view(at::kByte);
  }
  const at::Tensor sc = scales.contiguous();
  at::Tensor y = at::empty(a.sizes, codes.options().dtype(output_dtype));
  if (y.numel() == 0) return y;
  MxSpec spec;
  spec.axis = a.axis;
  spec.block = a.block;
  const MxShape sh = mxShape(y, spec);
  const std::array<float, 256> table = codeTable(a.format, l);
  const int m = a.format.stored_mbits();
  const int64_t rows = sh.outer * sh.blocks_per_row;
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, std::min(a.block, sh.len) * sh.inner));
  const uint8_t* sp = sc.const_data_ptr<uint8_t>();
  auto run = [&](auto* out) {
    using Out = std::remove_pointer_t<decltype(out)>;
    if (per_elem.element_size() == 1) {
      const uint8_t* cp = per_elem.const_data_ptr<uint8_t>();
      at::parallel_for(0, rows, grain, [&](int64_t b, int64_t e) {
        dequantizeRows<Out, uint8_t>(cp, sp, out, &table, m, sh, a.block, b, e);
      });
    } else {
      const int16_t* cp = per_elem.const_data_ptr<int16_t>();
      at::parallel_for(0, rows, grain, [&](int64_t b, int64_t e) {
        dequantizeRows<Out, int16_t>(cp, sp, out, &table, m, sh, a.block, b, e);
      });
    }
  };
  if (output_dtype == at::kFloat) {
    run(y.data_ptr<float>());
  } else if (output_dtype == at::kBFloat16) {
    run(y.data_ptr<c10::BFloat16>());
  } else {
    run(y.data_ptr<c10::Half>());
  }
  return y;
}

}  // namespace
}  // namespace pt2q::mx

TORCH_LIBRARY_IMPL(pt2q, CPU, m) {
  m.impl("mx_dequantize", &pt2q::mx::mxDequantizeCpu);
  m.impl("mx_fake_quantize", &pt2q::mx::mxFakeQuantizeCpu);
  m.impl("mx_quantize", &pt2q::mx::mxQuantizeCpu);
}
