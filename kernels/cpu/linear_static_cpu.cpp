// CPU linear_q8 / conv2d_q8. The input codes become unsigned rows (xu = q + 128; conv2d: im2col
// rows from a channels-last copy, a tap's C bytes at a time, padding with the zero point's code),
// the panel loop (cpu/linear_panels.h) takes the integer dot products, and each panel is
// requantized while in cache: y = s_x * [s_w * sum] + b, then quantize_per_tensor's rounding in
// fp32 (round(y * (1 / s_o)) + z_o, clamped). Grouped conv2d runs each group so; depthwise conv2d
// (one input channel per group) sums its taps directly, over all channels at once. A residual
// (X86's conv -> add) joins the bias of each output in the panels' epilogue; conv2d_q8_float's
// panels store y unrounded, as fp32.
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/channels_last_bytes.h"
#include "kernels/cpu/grouped_q8_weights.h"
#include "kernels/cpu/linear_panels.h"
#include "kernels/linear_static.h"
#include "kernels/linear_weight_only_args.h"

namespace pt2q {
namespace {

cpu::Q8Epilogue epilogueOf(double input_scale, const Q8Output& q) {
  return {static_cast<float>(input_scale), static_cast<float>(1.0 / q.scale), static_cast<float>(q.zero_point),
          static_cast<float>(q.quant_min), static_cast<float>(q.quant_max)};
}

// conv2d_q8's residual as the panels meet it: int8 codes channels last, output row i's at codes +
// i * stride (the output's layout), null when there is none.
struct RowResidual {
  const int8_t* codes = nullptr;
  int64_t stride = 0;
  float scale = 0.0f, zero_point = 0.0f;
};

RowResidual rowResidual(const Q8Residual& r, const at::Tensor& channels_last) {
  if (!r.on()) return {};
  return {channels_last.const_data_ptr<int8_t>(), channels_last.size(3), static_cast<float>(r.scale),
          static_cast<float>(r.zero_point)};
}

// Where the panels' results go, row i at base + i * stride: requantized int8 codes (with an
// optional residual) or, for conv2d_q8_float, fp32 values y = t * s_x + bias.
struct PanelOut {
  int8_t* codes = nullptr;
  float* values = nullptr;
  int64_t stride = 0;
  RowResidual res;
  // The same destination `c` columns further on (a group's first output channel).
  PanelOut at(int64_t c) const {
    PanelOut o = *this;
    if (codes != nullptr) o.codes += c;
    if (values != nullptr) o.values += c;
    if (res.codes != nullptr) o.res.codes += c;
    return o;
  }
};

// Runs the panels of w over xu ([rows, xs]) and writes each row of results to out. zx128: each
// row's zero point + 128. A residual's row joins the ISA's epilogue.
void panelsRequantize(const PanelWeight& w, const uint8_t* xu, int64_t xs, int64_t rows, const int32_t* zx128,
                      const float* bias, const cpu::Q8Epilogue& rq, const PanelOut& out) {
  const auto requantize = cpu::linearKernels().q8_requantize;
  const auto scale = cpu::linearKernels().q8_scale;
  const RowResidual& res = out.res;
  runPanels(w, xu, xs, rows, zx128, [&](int64_t r0, int64_t nr, int64_t c0, int64_t cols, const float* tmp) {
    const int64_t c1 = std::min(w.n, c0 + cols);
    const float* b = bias != nullptr ? bias + c0 : nullptr;
    for (int64_t i = r0; i < r0 + nr; ++i) {
      if (out.values != nullptr) {
        scale(tmp + (i - r0) * cols, b, c1 - c0, rq.sx, out.values + i * out.stride + c0);
        continue;
      }
      const cpu::Q8RowResidual row{res.codes != nullptr ? res.codes + i * res.stride + c0 : nullptr, res.scale,
                                   res.zero_point};
      requantize(tmp + (i - r0) * cols, b, row.codes != nullptr ? &row : nullptr, c1 - c0, rq,
                 out.codes + i * out.stride + c0);
    }
  });
}

// The same from the op's tensors (k valid bytes per row of xu).
void gemmRequantize(const uint8_t* xu, int64_t xs, int64_t rows, int64_t k, int32_t zx, double input_scale,
                    const at::Tensor& packed, const at::Tensor& weight_scales, const c10::optional<at::Tensor>& bias,
                    const Q8Output& q, const PanelOut& out) {
  const int64_t n = weight_scales.size(0), kp = roundUp(k, packChunk(8));
  const at::Tensor s4 = panelScales(weight_scales, n, 1);
  const at::Tensor pw = packed.contiguous();
  const at::Tensor b32 = bias.has_value() ? bias->to(at::kFloat).contiguous() : at::Tensor();
  const std::vector<int32_t> zx128(rows, zx + 128);
  const PanelWeight w{pw.const_data_ptr<int8_t>(), 8, n, kp, 1, kp / packChunk(8), s4.const_data_ptr<float>()};
  panelsRequantize(w, xu, xs, rows, zx128.data(), b32.defined() ? b32.const_data_ptr<float>() : nullptr,
                   epilogueOf(input_scale, q), out);
}

// linear_q8 / linear_q8_float: x's m rows of k codes as unsigned rows, then the panels into out.
void linearPanels(const at::Tensor& input, int64_t m, int64_t k, double input_scale, int64_t input_zero_point,
                  const at::Tensor& packed, const at::Tensor& weight_scales, const c10::optional<at::Tensor>& bias,
                  const Q8Output& q, const PanelOut& out) {
  if (m == 0) return;
  // Rows one cache line longer than kp: rows kp apart (a power of two) would share L1 sets.
  const int64_t xs = roundUp(k, packChunk(8)) + 64;
  at::Tensor xu = at::zeros({m, xs}, input.options().dtype(at::kByte));
  xu.slice(1, 0, k).copy_(input.reshape({m, k}).view(at::kByte).bitwise_xor(128));
  gemmRequantize(xu.const_data_ptr<uint8_t>(), xs, m, k, static_cast<int32_t>(input_zero_point), input_scale, packed,
                 weight_scales, bias, q, out);
}

at::Tensor linearQ8Cpu(const at::Tensor& input, double input_scale, int64_t input_zero_point, const at::Tensor& packed,
                       const at::Tensor& weight_scales, const c10::optional<at::Tensor>& bias, double output_scale,
                       int64_t output_zero_point, int64_t qmin, int64_t qmax) {
  const Q8Output q{output_scale, output_zero_point, qmin, qmax};
  const auto [m, k, n] = checkLinearQ8(input, input_scale, input_zero_point, packed, weight_scales, bias, q);
  at::Tensor out = at::empty({m, n}, input.options());
  linearPanels(input, m, k, input_scale, input_zero_point, packed, weight_scales, bias, q,
               PanelOut{out.data_ptr<int8_t>(), nullptr, n, {}});
  return out.reshape(linearOutputShape(input.sizes(), n));
}

at::Tensor linearQ8FloatCpu(const at::Tensor& input, double input_scale, int64_t input_zero_point,
                            const at::Tensor& packed, const at::Tensor& weight_scales,
                            const c10::optional<at::Tensor>& bias) {
  const Q8Output q;
  const auto [m, k, n] =
      checkLinearQ8(input, input_scale, input_zero_point, packed, weight_scales, bias, q, "linear_q8_float");
  at::Tensor out = at::empty({m, n}, input.options().dtype(at::kFloat));
  linearPanels(input, m, k, input_scale, input_zero_point, packed, weight_scales, bias, q,
               PanelOut{nullptr, out.data_ptr<float>(), n, {}});
  return out.reshape(linearOutputShape(input.sizes(), n));
}

// n bytes (a kernel row of a first layer: 3 to 48) without a call into libc's memmove, which took
// a tenth of an RGB stem's time: two overlapping fixed-size copies cover any n from w to 2w.
inline void copyShort(uint8_t* dst, const uint8_t* src, int64_t n) {
  if (n >= 16 && n <= 32) {
    std::memcpy(dst, src, 16);
    std::memcpy(dst + n - 16, src + n - 16, 16);
  } else if (n >= 8 && n < 16) {
    std::memcpy(dst, src, 8);
    std::memcpy(dst + n - 8, src + n - 8, 8);
  } else if (n >= 4 && n < 8) {
    std::memcpy(dst, src, 4);
    std::memcpy(dst + n - 4, src + n - 4, 4);
  } else if (n < 4) {
    for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
  } else {
    std::memcpy(dst, src, static_cast<size_t>(n));
  }
}

// im2col rows of channels [c0, c0 + cg) of the channels-last unsigned codes x into dst ([rows,
// xs]); taps outside the input hold the zero point's code, and each row's tail from k to the
// packed length kp (what the dot products read) is zeroed.
// CG: cg known at compile time (0: not), so that a small group's tap is one load and store
// rather than a memcpy call (grouped convs copy rows x taps x groups such pieces). Without groups
// and dilation a kernel row's taps are kw neighbouring pixels, kw * c contiguous bytes of x: one
// copy where the row lies inside (an RGB 7x7 stem copies 21 bytes a row instead of 7 x 3).
template <int CG>
void im2colRows(const Conv2dQ8Geometry& g, const uint8_t* x, int64_t c0, uint8_t pad, uint8_t* dst, int64_t xs) {
  const int64_t cg = CG > 0 ? CG : g.cg(), k = g.k(), kp = roundUp(k, packChunk(8));
  const bool whole_rows = g.groups == 1 && g.dw == 1;
  at::parallel_for(0, g.n * g.oh, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / g.oh, oh = r % g.oh;
      for (int64_t ow = 0; ow < g.ow; ++ow) {
        uint8_t* row = dst + (r * g.ow + ow) * xs;
        const int64_t iw0 = ow * g.sw - g.pw;
        for (int64_t i = 0; i < g.kh; ++i) {
          const int64_t ih = oh * g.sh - g.ph + i * g.dh;
          if (whole_rows && ih >= 0 && ih < g.h && iw0 >= 0 && iw0 + g.kw <= g.w) {
            copyShort(row + i * g.kw * cg, x + ((b * g.h + ih) * g.w + iw0) * g.c, g.kw * cg);
            continue;
          }
          for (int64_t j = 0; j < g.kw; ++j) {
            const int64_t iw = ow * g.sw - g.pw + j * g.dw;
            uint8_t* tap = row + (i * g.kw + j) * cg;
            if (ih >= 0 && ih < g.h && iw >= 0 && iw < g.w) {
              std::memcpy(tap, x + ((b * g.h + ih) * g.w + iw) * g.c + c0, cg);
            } else {
              std::memset(tap, pad, cg);
            }
          }
        }
        std::memset(row + k, 0, kp - k);
      }
    }
  });
}

void im2col(const Conv2dQ8Geometry& g, const uint8_t* x, int64_t c0, uint8_t pad, uint8_t* dst, int64_t xs) {
  switch (g.cg()) {
    case 1: return im2colRows<1>(g, x, c0, pad, dst, xs);  // a grayscale first layer
    case 2: return im2colRows<2>(g, x, c0, pad, dst, xs);
    case 3: return im2colRows<3>(g, x, c0, pad, dst, xs);  // an RGB first layer
    case 4: return im2colRows<4>(g, x, c0, pad, dst, xs);
    case 8: return im2colRows<8>(g, x, c0, pad, dst, xs);
    case 16: return im2colRows<16>(g, x, c0, pad, dst, xs);
    default: return im2colRows<0>(g, x, c0, pad, dst, xs);
  }
}

cpu::ConvPixels pixelsOf(const Conv2dQ8Geometry& g) {
  cpu::ConvPixels p;
  p.n = g.n, p.h = g.h, p.w = g.w, p.c = g.c, p.oc = g.oc, p.kh = g.kh, p.kw = g.kw, p.oh = g.oh, p.ow = g.ow;
  p.sh = g.sh, p.sw = g.sw, p.ph = g.ph, p.pw = g.pw, p.dh = g.dh, p.dw = g.dw;
  return p;
}

// Depthwise (one input channel per group): the ISA's microkernel over output rows in parallel.
void depthwiseRequantize(const Conv2dQ8Geometry& g, const int8_t* x, int32_t zx, const at::Tensor& packed,
                         const at::Tensor& weight_scales, const c10::optional<at::Tensor>& bias,
                         const cpu::Q8Epilogue& e, int8_t* out) {
  const int64_t taps = g.kh * g.kw;
  const at::Tensor wt = unpackWeightRef(packed, g.oc, taps, 8).t().to(at::kInt).contiguous();  // [taps, oc]
  const at::Tensor s = weight_scales.to(at::kFloat).contiguous();
  const at::Tensor b = bias.has_value() ? bias->to(at::kFloat).contiguous() : at::zeros({g.oc}, s.options());
  cpu::DepthwiseQ8 a;
  a.x = x;
  static_cast<cpu::ConvPixels&>(a) = pixelsOf(g);
  a.zx = zx;
  a.wt = wt.const_data_ptr<int32_t>();
  a.scales = s.const_data_ptr<float>();
  a.bias = b.const_data_ptr<float>();
  a.epilogue = e;
  a.out = out;
  const auto fn = cpu::linearKernels().depthwise_q8;
  at::parallel_for(0, g.n * g.oh, 1, [&](int64_t r0, int64_t r1) {
    std::vector<int32_t> acc(g.oc);
    fn(a, r0, r1, acc.data());
  });
}

// Grouped (several input channels per group): each group is a convolution of its own, its
// channels' im2col rows against its rows of the weight. Every group's weight rows are repacked at
// once (a group's rows need not start a packed block of 4) with its scales in the panels' layout;
// then many groups run in parallel, each group's im2col and panels inline on one thread (a
// parallel region per group per step cost more than the arithmetic of small groups), and few
// groups run one after another with the rows in parallel.
void groupedRequantize(const Conv2dQ8Geometry& g, const uint8_t* src, uint8_t pad, int32_t zx, double input_scale,
                       const at::Tensor& packed, const at::Tensor& weight_scales,
                       const c10::optional<at::Tensor>& bias, const Q8Output& q, const PanelOut& out) {
  const int64_t groups = g.groups, ocg = g.ocg(), k = g.k(), rows = g.n * g.oh * g.ow;
  const int64_t ocgp = roundUp(ocg, kPackRows), kp = roundUp(k, packChunk(8)), xs = kp + 64;
  const at::Tensor w = unpackWeightRef(packed, g.oc, k, 8).reshape({groups, ocg, k});
  // [groups, ocgp / 4 blocks, kp / 16 chunks, 4 rows, 16 bytes]: pack_weight_int8's layout per group
  const at::Tensor gp = at::constant_pad_nd(w, {0, kp - k, 0, ocgp - ocg}, 0)
                            .reshape({groups, ocgp / kPackRows, kPackRows, kp / packChunk(8), packChunk(8)})
                            .permute({0, 1, 3, 2, 4})
                            .contiguous();
  const at::Tensor s4 = at::constant_pad_nd(weight_scales.to(at::kFloat).reshape({groups, ocg}), {0, ocgp - ocg}, 0)
                            .contiguous();
  const at::Tensor b32 = bias.has_value() ? bias->to(at::kFloat).contiguous() : at::Tensor();
  const std::vector<int32_t> zx128(rows, zx + 128);
  const cpu::Q8Epilogue rq = epilogueOf(input_scale, q);
  auto run = [&](int64_t gi, uint8_t* xu) {
    im2col(g, src, gi * g.cg(), pad, xu, xs);
    const PanelWeight pw{gp.const_data_ptr<int8_t>() + gi * ocgp * kp, 8, ocg, kp, 1, kp / packChunk(8),
                         s4.const_data_ptr<float>() + gi * ocgp};
    panelsRequantize(pw, xu, xs, rows, zx128.data(), b32.defined() ? b32.const_data_ptr<float>() + gi * ocg : nullptr,
                     rq, out.at(gi * ocg));
  };
  if (groups >= 2 * at::get_num_threads()) {
    at::parallel_for(0, groups, 1, [&](int64_t g0, int64_t g1) {
      std::vector<uint8_t> xu(rows * xs);
      for (int64_t gi = g0; gi < g1; ++gi) run(gi, xu.data());
    });
  } else {
    std::vector<uint8_t> xu(rows * xs);
    for (int64_t gi = 0; gi < groups; ++gi) run(gi, xu.data());
  }
}

// Grouped with 4, 8, ... channels per group where the ISA's direct kernel takes the layer
// (grouped_q8_impl.h):
// the weight in its tap-major lane order and its per-tap sums, then output pixels in parallel.
void groupedDirectRequantize(const Conv2dQ8Geometry& g, const uint8_t* src, int32_t zx, const at::Tensor& packed,
                             const at::Tensor& weight_scales, const c10::optional<at::Tensor>& bias,
                             const cpu::Q8Epilogue& e, cpu::GroupedQ8Fn fn, int8_t* out) {
  const int64_t taps = g.kh * g.kw, cgq = g.cg() / 4, ocp = roundUp(g.oc, 16);
  const int64_t chunk = packChunk(8), block_bytes = kPackRows * roundUp(g.k(), chunk);
  at::Tensor wq = at::zeros({taps, cgq, ocp, 4}, packed.options());
  at::Tensor wsum = at::zeros({taps + 1, ocp}, packed.options().dtype(at::kInt));  // and their total
  const at::Tensor pc = packed.contiguous();
  cpu::groupedQ8Weights(reinterpret_cast<const uint8_t*>(pc.const_data_ptr<int8_t>()), block_bytes, g.oc, taps, cgq,
                        ocp, zx + 128, reinterpret_cast<uint32_t*>(wq.data_ptr<int8_t>()), wsum.data_ptr<int32_t>());
  // Scales and bias padded to ocp: the AVX2 kernel reads whole vectors of 8.
  const at::Tensor s = at::zeros({ocp}, weight_scales.options().dtype(at::kFloat));
  s.narrow(0, 0, g.oc).copy_(weight_scales.reshape({g.oc}));
  const at::Tensor b = at::zeros({ocp}, s.options());
  if (bias.has_value()) b.narrow(0, 0, g.oc).copy_(bias->reshape({g.oc}));
  cpu::GroupedQ8 a;
  a.x = src;
  static_cast<cpu::ConvPixels&>(a) = pixelsOf(g);
  a.cg = g.cg(), a.ocg = g.ocg();
  a.wq = wq.const_data_ptr<int8_t>();
  a.wsum = wsum.const_data_ptr<int32_t>();
  a.scales = s.const_data_ptr<float>();
  a.bias = b.const_data_ptr<float>();
  a.epilogue = e;
  a.out = out;
  // By pixels, not rows: the deep layers have 7-14 rows, uneven over the threads.
  at::parallel_for(0, g.n * g.oh * g.ow, 8, [&](int64_t p0, int64_t p1) { fn(a, p0, p1); });
}

// conv2d_q8 / conv2d_q8_float on CPU: `out` [n, oh, ow, oc] channels last receives codes or values.
void conv2dPanels(const Conv2dQ8Geometry& g, const at::Tensor& input, double input_scale, int64_t input_zero_point,
                  const at::Tensor& packed, const at::Tensor& weight_scales, const c10::optional<at::Tensor>& bias,
                  const Q8Output& q, const PanelOut& out) {
  const auto pad = static_cast<uint8_t>(input_zero_point + 128);
  const auto zx = static_cast<int32_t>(input_zero_point);
  // Rows a power of two apart would share L1 sets: those get a cache line more.
  const int64_t rows = g.n * g.oh * g.ow, k = g.k(), kp = roundUp(k, packChunk(8));
  const int64_t xs = (kp & (kp - 1)) == 0 ? kp + 64 : kp;
  // A residual or a float output takes the panels, whose epilogues do both (grouped convolutions a
  // GEMM per group): X86's conv -> add fusion and float convs meet plain convolutions.
  const bool direct_ok = out.codes != nullptr && out.res.codes == nullptr;
  if (g.groups > 1 && g.cg() == 1 && direct_ok) {
    // Channels last (no copy for a channels-last input), signed codes.
    const at::Tensor x = cpu::channelsLastBytes(input, at::kChar, 0);
    depthwiseRequantize(g, x.const_data_ptr<int8_t>(), zx, packed, weight_scales, bias, epilogueOf(input_scale, q),
                        out.codes);
    return;
  }
  // Channels last, as unsigned codes: one kernel tap of one output pixel is C contiguous bytes.
  const at::Tensor x = cpu::channelsLastBytes(input, at::kByte, 0x80);
  const uint8_t* src = x.const_data_ptr<uint8_t>();
  const cpu::LinearKernels& kernels = cpu::linearKernels();
  const cpu::GroupedQ8Fn direct = kernels.grouped_q8;
  if (g.groups > 1 && direct_ok && direct != nullptr && kernels.grouped_q8_takes(g.cg(), g.ocg(), g.oc, g.kh * g.kw)) {
    groupedDirectRequantize(g, src, zx, packed, weight_scales, bias, epilogueOf(input_scale, q), direct, out.codes);
  } else if (g.groups > 1) {
    groupedRequantize(g, src, pad, zx, input_scale, packed, weight_scales, bias, q, out);
  } else {
    at::Tensor xu = at::empty({rows, xs}, input.options().dtype(at::kByte));
    im2col(g, src, 0, pad, xu.data_ptr<uint8_t>(), xs);
    gemmRequantize(xu.const_data_ptr<uint8_t>(), xs, rows, k, zx, input_scale, packed, weight_scales, bias, q, out);
  }
}

at::Tensor conv2dQ8Cpu(const at::Tensor& input, double input_scale, int64_t input_zero_point, const at::Tensor& packed,
                       const at::Tensor& weight_scales, const c10::optional<at::Tensor>& bias,
                       at::IntArrayRef kernel_size, at::IntArrayRef stride, at::IntArrayRef padding,
                       at::IntArrayRef dilation, double output_scale, int64_t output_zero_point, int64_t qmin,
                       int64_t qmax, int64_t groups, const c10::optional<at::Tensor>& residual,
                       double residual_scale, int64_t residual_zero_point) {
  const Q8Output q{output_scale, output_zero_point, qmin, qmax};
  const Q8Residual r{residual, residual_scale, residual_zero_point};
  const Conv2dQ8Geometry g = checkConv2dQ8(input, input_scale, input_zero_point, packed, weight_scales, bias,
                                           kernel_size, stride, padding, dilation, q, groups, r);
  at::Tensor out = at::empty({g.n, g.oh, g.ow, g.oc}, input.options());
  // The residual in the layout of the epilogue's rows (no copy when it is channels last).
  const at::Tensor res_cl = r.on() ? cpu::channelsLastBytes(*r.codes, at::kChar, 0) : at::Tensor();
  conv2dPanels(g, input, input_scale, input_zero_point, packed, weight_scales, bias, q,
               PanelOut{out.data_ptr<int8_t>(), nullptr, g.oc, rowResidual(r, res_cl)});
  return cpu::nchwFromChannelsLast(out);
}

at::Tensor conv2dQ8FloatCpu(const at::Tensor& input, double input_scale, int64_t input_zero_point,
                            const at::Tensor& packed, const at::Tensor& weight_scales,
                            const c10::optional<at::Tensor>& bias, at::IntArrayRef kernel_size, at::IntArrayRef stride,
                            at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups) {
  const Q8Output q;
  const Conv2dQ8Geometry g = checkConv2dQ8(input, input_scale, input_zero_point, packed, weight_scales, bias,
                                           kernel_size, stride, padding, dilation, q, groups, {}, "conv2d_q8_float");
  at::Tensor out = at::empty({g.n, g.oh, g.ow, g.oc}, input.options().dtype(at::kFloat));
  conv2dPanels(g, input, input_scale, input_zero_point, packed, weight_scales, bias, q,
               PanelOut{nullptr, out.data_ptr<float>(), g.oc, {}});
  return out.permute({0, 3, 1, 2}).contiguous();
}

}  // namespace
}  // namespace pt2q

TORCH_LIBRARY_IMPL(pt2q, CPU, m) {
  m.impl("linear_q8", &pt2q::linearQ8Cpu);
  m.impl("conv2d_q8", &pt2q::conv2dQ8Cpu);
  m.impl("conv2d_q8_float", &pt2q::conv2dQ8FloatCpu);
  m.impl("linear_q8_float", &pt2q::linearQ8FloatCpu);
}
