// Reference mx_quantize / mx_dequantize: MX values to their stored bits and back (see "MX
// code layout" in kernels/README.md). The element values come from the same reference
// blocks as mx_fake_quantize (kernels/reference/mx.cpp); encoding, packing and decoding are
// plain ATen bit operations, so this runs on any device.
#include <torch/library.h>

#include "kernels/mx/mx_args.h"

namespace pt2q::mx {
namespace {

at::Tensor scaleFromBytes(const at::Tensor& s_u8) {
  const at::Tensor s = s_u8.to(at::kInt);
  const at::Tensor bits = at::where(s == 0, at::full({}, 0x00400000, s.options()),
                                    at::where(s == 255, at::full({}, 0x7FC00000, s.options()), s.bitwise_left_shift(23)));
  return bits.view(at::kFloat);
}

// Broadcasts per-block scales back over the elements of `axis` (length len).
at::Tensor expandScales(const at::Tensor& scale, int64_t axis, int64_t block, int64_t len) {
  return scale.repeat_interleave(block, axis).narrow(axis, 0, len);
}

// Element values (|e| <= max_norm, on the grid) to integer codes of `bits` bits.
at::Tensor encodeElements(const at::Tensor& e, const ElemFormat& f) {
  if (f.is_int()) return at::round(e * std::ldexp(1.0, f.stored_mbits())).to(at::kInt);  // exact
  const int m = f.stored_mbits(), bias = f.bias(), emin = f.emin();
  const at::Tensor b = e.view(at::kInt);
  const at::Tensor sign = b.bitwise_right_shift(31).bitwise_and(1);
  const at::Tensor a = e.abs();
  const at::Tensor ea = a.view(at::kInt).bitwise_right_shift(23).bitwise_and(0xFF) - 127;
  const at::Tensor sub = ea < emin;
  const at::Tensor mant_sub = at::round(a * std::ldexp(1.0, m - emin)).to(at::kInt);
  const at::Tensor mant_norm = (a * at::exp2((m - ea).to(at::kFloat))).to(at::kInt) - (1 << m);
  const at::Tensor expf = at::where(sub, 0, ea + bias);
  at::Tensor code = expf.bitwise_left_shift(m).bitwise_or(at::where(sub, mant_sub, mant_norm));
  code = at::where(a == 0, 0, code);
  return code.bitwise_or(sign.bitwise_left_shift(f.ebits + m));
}

at::Tensor decodeElements(const at::Tensor& code, const ElemFormat& f) {
  if (f.is_int()) return code.to(at::kFloat) * std::ldexp(1.0, -f.stored_mbits());
  const int m = f.stored_mbits(), bias = f.bias(), emin = f.emin();
  const at::Tensor c = code.to(at::kInt);
  const at::Tensor sign = c.bitwise_right_shift(f.ebits + m).bitwise_and(1);
  const at::Tensor expf = c.bitwise_right_shift(m).bitwise_and((1 << f.ebits) - 1);
  const at::Tensor mant = c.bitwise_and((1 << m) - 1).to(at::kFloat);
  const at::Tensor sub_val = mant * std::ldexp(1.0, emin - m);
  const at::Tensor norm_val = (mant * std::ldexp(1.0, -m) + 1.0) * at::exp2((expf - bias).to(at::kFloat));
  const at::Tensor mag = at::where(expf == 0, sub_val, norm_val);
  return at::where(sign == 1, -mag, mag);
}

// Packs `per_group` codes of `bits` bits (low bits first) into `group_bytes` bytes along the
// last dimension, zero-padding a partial last group.
at::Tensor packLast(const at::Tensor& codes, const CodeLayout& l) {
  const int64_t len = codes.size(-1);
  const int64_t groups = (len + l.per_group - 1) / l.per_group;
  at::Tensor c = at::constant_pad_nd(codes.to(at::kLong).bitwise_and((int64_t(1) << l.bits) - 1),
                                     {0, groups * l.per_group - len}, 0);
  std::vector<int64_t> shape(c.sizes().begin(), c.sizes().end() - 1);
  shape.push_back(groups);
  shape.push_back(l.per_group);
  c = c.reshape(shape);
  const at::Tensor shifts = at::arange(l.per_group, c.options()) * l.bits;
  const at::Tensor word = c.bitwise_left_shift(shifts).sum(-1);  // disjoint bits: sum == or
  const at::Tensor byte_shift = at::arange(l.group_bytes, c.options()) * 8;
  at::Tensor bytes = word.unsqueeze(-1).bitwise_right_shift(byte_shift).bitwise_and(0xFF);
  shape.pop_back();
  shape.back() = groups * l.group_bytes;
  return bytes.reshape(shape).to(at::kByte);
}

at::Tensor unpackLast(const at::Tensor& packed, const CodeLayout& l, int64_t len) {
  const int64_t nbytes = packed.size(-1);
  TORCH_CHECK_VALUE(nbytes % l.group_bytes == 0, "mx_dequantize: packed codes' last dimension (", nbytes,
                    ") is not a multiple of ", l.group_bytes, " bytes");
  const int64_t groups = nbytes / l.group_bytes;
  std::vector<int64_t> shape(packed.sizes().begin(), packed.sizes().end() - 1);
  shape.push_back(groups);
  shape.push_back(l.group_bytes);
  const at::Tensor b = packed.to(at::kLong).reshape(shape);
  const at::Tensor word = b.bitwise_left_shift(at::arange(l.group_bytes, b.options()) * 8).sum(-1);
  at::Tensor codes = word.unsqueeze(-1)
                         .bitwise_right_shift(at::arange(l.per_group, b.options()) * l.bits)
                         .bitwise_and((int64_t(1) << l.bits) - 1);
  shape.pop_back();
  shape.back() = groups * l.per_group;
  codes = codes.reshape(shape).narrow(-1, 0, len);
  return codes;
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> mxQuantizeRef(const at::Tensor& x, c10::string_view elem_format,
                                                 int64_t block_size, int64_t axis, c10::string_view rounding,
                                                 c10::string_view scale_mode, bool flush_fp32_subnorms,
                                                 std::optional<int64_t> seed) {
  const MxSpec spec = prepareMxQuantize(x, elem_format, block_size, axis, rounding, scale_mode, flush_fp32_subnorms, seed);
  const CodeLayout layout = codeLayout(spec.format);
  if (x.numel() == 0) {
    return {at::empty(codesShape(x.sizes(), layout), x.options().dtype(layout.dtype)),
            at::empty(scalesShape(x.sizes(), spec), x.options().dtype(at::kByte))};
  }
  const MxBlocks b = mxBlocksRef(x, spec);
  // NaN blocks store code 0 (their scale byte says NaN); flushed blocks are +0.
  const at::Tensor e = mxUnblockRef(at::where(b.dead | b.flushed, 0.0, b.q), b, spec, x.sizes());
  at::Tensor codes = encodeElements(e, spec.format);
  const at::Tensor scales = b.s.squeeze(-1).to(at::kByte).movedim(-1, spec.axis).contiguous();
  if (layout.packed()) {
    codes = packLast(codes, layout);
  } else if (layout.dtype == at::kFloat8_e4m3fn || layout.dtype == at::kFloat8_e5m2) {
    codes = codes.to(at::kByte).view(layout.dtype);
  } else {
    codes = codes.to(layout.dtype);
  }
  return {codes, scales};
}

at::Tensor mxDequantizeRef(const at::Tensor& codes, const at::Tensor& scales, c10::string_view elem_format,
                           int64_t block_size, int64_t axis, std::optional<int64_t> last_dim,
                           at::ScalarType output_dtype) {
  const MxDequantArgs a = prepareMxDequantize(codes, scales, elem_format, block_size, axis, last_dim, output_dtype);
  const ElemFormat& f = a.format;
  at::Tensor c;
  if (a.layout.packed()) {
    c = unpackLast(codes, a.layout, a.sizes.back());
    if (f.is_int()) c = at::where(c >= (int64_t(1) << (a.layout.bits - 1)), c - (int64_t(1) << a.layout.bits), c);
  } else if (a.layout.dtype == at::kFloat8_e4m3fn || a.layout.dtype == at::kFloat8_e5m2) {
    c = (codes.scalar_type() == at::kByte ? codes : codes.view(at::kByte)).to(at::kInt);
  } else {
    c = codes.to(at::kInt);
  }
  const at::Tensor scale = expandScales(scaleFromBytes(scales), a.axis, a.block, a.sizes[a.axis]);
  return (decodeElements(c, f) * scale).to(output_dtype);
}

}  // namespace pt2q::mx

TORCH_LIBRARY_IMPL(pt2q, CompositeExplicitAutograd, m) {
  m.impl("mx_quantize", &pt2q::mx::mxQuantizeRef);
  m.impl("mx_dequantize", &pt2q::mx::mxDequantizeRef);
}
