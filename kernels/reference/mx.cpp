// Reference MX / BFP fake-quantization in plain ATen ops (any device): the same arithmetic as
// kernels/mx/mx_numerics.h, written over whole tensors. Slow (tens of passes over memory) and
// the baseline the fused kernels are measured against.
#include <torch/library.h>

#include "kernels/mx/mx_args.h"

namespace pt2q::mx {
namespace {

constexpr int64_t kMask32 = 0xFFFFFFFFLL;

at::Tensor bitsToFloat(const at::Tensor& i32) { return i32.view(at::kFloat); }

// hash32 of kernels/mx/mx_numerics.h on int64 tensors holding uint32 values.
at::Tensor hash32(at::Tensor x) {
  x = x.bitwise_xor(x.bitwise_right_shift(16));
  x = (x * 0x7feb352dLL).bitwise_and(kMask32);
  x = x.bitwise_xor(x.bitwise_right_shift(15));
  x = (x * 0x846ca68bLL).bitwise_and(kMask32);
  return x.bitwise_xor(x.bitwise_right_shift(16));
}

// Per-block E8M0 exponent (int32, 0..255) from the NaN-propagating block max.
at::Tensor sharedScaleBits(const at::Tensor& amax, const ElemFormat& f, ScaleMode mode) {
  const at::Tensor b = amax.view(at::kInt);
  const at::Tensor eb = b.bitwise_right_shift(23).bitwise_and(0xFF);
  const at::Tensor mant = b.bitwise_and(0x7FFFFF);
  at::Tensor u;
  if (mode == ScaleMode::kRceil) {
    const at::Tensor t = (amax / f.max_norm).view(at::kInt);
    const at::Tensor te = t.bitwise_right_shift(23).bitwise_and(0xFF), tm = t.bitwise_and(0x7FFFFF);
    at::Tensor byte = at::where(te == 0, (tm > 0x400000).to(at::kInt), te + (tm != 0).to(at::kInt));
    byte = at::where(byte > 254, 255, byte);
    return at::where(te == 255, 255, byte).to(at::kInt);
  }
  if (mode == ScaleMode::kEven) {
    const int shift = 23 - f.stored_mbits() - 1;
    const at::Tensor r = (b.to(at::kLong) + (int64_t(1) << shift)).bitwise_and(0x7F800000LL);
    u = r.bitwise_right_shift(23).to(at::kInt) - 127 - f.emax;
  } else {
    u = eb - 127 - f.emax;
    if (mode == ScaleMode::kCeil) u = u + (mant != 0).to(at::kInt);
  }
  at::Tensor s = u + 127;
  s = at::where(s > 254, 255, at::where(s < 0, 0, s));
  return at::where(eb == 255, 255, s).to(at::kInt);
}

at::Tensor quantizeElements(const at::Tensor& v, const ElemFormat& f, Rounding rounding, const at::Tensor& rnd) {
  const at::Tensor b = v.view(at::kInt);
  const at::Tensor sign = b.bitwise_and(static_cast<int32_t>(0x80000000u));
  const at::Tensor av = bitsToFloat(b.bitwise_and(0x7FFFFFFF));
  const at::Tensor e = b.bitwise_right_shift(23).bitwise_and(0xFF) - 127;
  const at::Tensor se = (f.is_int() ? at::zeros_like(e) : at::clamp_min(e, f.emin())) - f.stored_mbits();
  const at::Tensor scaled = av * bitsToFloat((127 - se).bitwise_left_shift(23));
  const at::Tensor n0 = at::trunc(scaled);
  const at::Tensor frac = scaled - n0;
  at::Tensor up;
  switch (rounding) {
    case Rounding::kNearest: up = frac >= 0.5; break;
    case Rounding::kEven: up = (frac > 0.5) | ((frac == 0.5) & (n0.to(at::kInt).bitwise_and(1) == 1)); break;
    case Rounding::kFloor: up = at::zeros_like(frac, frac.options().dtype(at::kBool)); break;
    case Rounding::kStochastic: up = (frac * 4294967296.0).to(at::kLong) > rnd; break;
  }
  at::Tensor q = (n0 + up.to(at::kFloat)) * bitsToFloat((127 + se).bitwise_left_shift(23));
  q = at::clamp_max(q, f.max_norm);
  const at::Tensor qb = q.view(at::kInt).bitwise_or(at::where(q != 0, sign, 0));
  return bitsToFloat(qb);
}

}  // namespace

MxBlocks mxBlocksRef(const at::Tensor& x, const MxSpec& spec) {
  MxBlocks out;
  const at::Tensor x1 = x.dim() == 0 ? x.reshape({1}) : x;
  // The quantized axis last, zero-padded to whole blocks (zeros never change a block max).
  const at::Tensor xt = x1.to(at::kFloat).movedim(spec.axis, -1).contiguous();
  out.moved_sizes.assign(xt.sizes().begin(), xt.sizes().end());
  out.len = xt.size(-1);
  out.nb = (out.len + spec.block - 1) / spec.block;
  const int64_t pad = out.nb * spec.block - out.len;
  std::vector<int64_t> blocked(xt.sizes().begin(), xt.sizes().end() - 1);
  blocked.push_back(out.nb);
  blocked.push_back(spec.block);
  const at::Tensor xp = at::constant_pad_nd(xt, {0, pad}, 0.0).view(blocked);
  const at::Tensor amax = xp.abs().amax(-1, /*keepdim=*/true);  // NaN propagates
  out.s = sharedScaleBits(amax, spec.format, spec.scale_mode);
  out.scale =
      at::where(out.s == 0, at::full({}, 0x00400000, out.s.options()), out.s.bitwise_left_shift(23)).view(at::kFloat);
  at::Tensor rnd;
  if (spec.rounding == Rounding::kStochastic) {
    // Random bits per element from its index in the original contiguous layout.
    const uint32_t key = streamKey(spec.seed);
    const at::Tensor idx = at::arange(x1.numel(), x.options().dtype(at::kLong)).view(x1.sizes())
                               .movedim(spec.axis, -1).contiguous();
    const at::Tensor idxp = at::constant_pad_nd(idx, {0, pad}, 0).view(blocked);
    const at::Tensor inner = hash32(idxp.bitwise_right_shift(32).bitwise_xor(static_cast<int64_t>(key)));
    rnd = hash32(idxp.bitwise_and(kMask32).bitwise_xor(inner));
  }
  out.q = quantizeElements(xp / out.scale, spec.format, spec.rounding, rnd);
  out.dead = out.s == 255;  // NaN blocks
  out.flushed = at::zeros_like(out.dead);
  if (spec.flush_fp32_subnorms) {
    out.flushed = (amax.view(at::kInt).bitwise_right_shift(23).bitwise_and(0xFF) == 0) & ~out.dead;
  }
  return out;
}

at::Tensor mxUnblockRef(const at::Tensor& blocked, const MxBlocks& b, const MxSpec& spec, at::IntArrayRef sizes) {
  std::vector<int64_t> unblocked(b.moved_sizes.begin(), b.moved_sizes.end() - 1);
  unblocked.push_back(b.nb * spec.block);
  return blocked.reshape(unblocked).narrow(-1, 0, b.len).movedim(-1, spec.axis).reshape(sizes).contiguous();
}

at::Tensor mxFakeQuantizeRef(const at::Tensor& x, c10::string_view elem_format, int64_t block_size, int64_t axis,
                             c10::string_view rounding, c10::string_view scale_mode, bool flush_fp32_subnorms,
                             std::optional<int64_t> seed) {
  const MxSpec spec =
      prepareMx(x, elem_format, block_size, axis, rounding, scale_mode, flush_fp32_subnorms, seed, "mx_fake_quantize");
  if (x.numel() == 0) return x.clone();
  const MxBlocks b = mxBlocksRef(x, spec);
  at::Tensor q = at::where(b.dead, std::numeric_limits<float>::quiet_NaN(), b.q * b.scale);
  q = at::where(b.flushed, 0.0, q);
  return mxUnblockRef(q, b, spec, x.sizes()).to(x.scalar_type());
}

namespace {

at::Tensor bfpFakeQuantize(const at::Tensor& x, int64_t bits, int64_t block_size, int64_t axis,
                           c10::string_view rounding, c10::string_view scale_mode, bool flush_fp32_subnorms,
                           std::optional<int64_t> seed) {
  TORCH_CHECK_VALUE(bits >= 2 && bits <= 16, "bfp_fake_quantize: bits must be in [2, 16] (sign included), got ",
                    bits);
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("pt2q::mx_fake_quantize", "")
                       .typed<at::Tensor(const at::Tensor&, c10::string_view, int64_t, int64_t, c10::string_view,
                                         c10::string_view, bool, std::optional<int64_t>)>();
  const std::string format = "int" + std::to_string(bits);
  return op.call(x, format, block_size, axis, rounding, scale_mode, flush_fp32_subnorms, seed);
}

}  // namespace
}  // namespace pt2q::mx

TORCH_LIBRARY_IMPL(pt2q, CompositeExplicitAutograd, m) {
  m.impl("mx_fake_quantize", &pt2q::mx::mxFakeQuantizeRef);
}

// BFP is MX with integer elements: an alias, so the numerics are never forked.
TORCH_LIBRARY_IMPL(pt2q, CompositeImplicitAutograd, m) {
  m.impl("bfp_fake_quantize", &pt2q::mx::bfpFakeQuantize);
}
