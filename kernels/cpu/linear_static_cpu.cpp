// CPU linear_q8 / conv2d_q8. The input codes become unsigned rows (xu = q + 128; conv2d: im2col
// rows from a channels-last copy, a tap's C bytes at a time, padding with the zero point's code), the panel loop (cpu/linear_panels.h) takes the
// integer dot products, and each panel is requantized while in cache: y = s_x * [s_w * sum] + b,
// then quantize_per_tensor's rounding in fp32 (round(y * (1 / s_o)) + z_o, clamped).
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/linear_panels.h"
#include "kernels/linear_static.h"
#include "kernels/linear_weight_only_args.h"

namespace pt2q {
namespace {

// Runs the panels over xu ([rows, xs], k valid bytes per row) and writes requantized codes into
// out ([rows, n], row-major).
void gemmRequantize(const uint8_t* xu, int64_t xs, int64_t rows, int64_t k, int32_t zx, double input_scale,
                    const at::Tensor& packed, const at::Tensor& weight_scales, const c10::optional<at::Tensor>& bias,
                    const Q8Output& q, int8_t* out) {
  const int64_t n = weight_scales.size(0), kp = roundUp(k, packChunk(8));
  const at::Tensor s4 = panelScales(weight_scales, n, 1);
  const at::Tensor pw = packed.contiguous();
  const at::Tensor b32 = bias.has_value() ? bias->to(at::kFloat).contiguous() : at::Tensor();
  const float* bp = b32.defined() ? b32.const_data_ptr<float>() : nullptr;
  const std::vector<int32_t> zx128(rows, zx + 128);
  const PanelWeight w{pw.const_data_ptr<int8_t>(), 8, n, kp, 1, kp / packChunk(8), s4.const_data_ptr<float>()};
  const float sx = static_cast<float>(input_scale), inv = static_cast<float>(1.0 / q.scale);
  const float zo = static_cast<float>(q.zero_point), lo = static_cast<float>(q.quant_min);
  const float hi = static_cast<float>(q.quant_max);
  runPanels(w, xu, xs, rows, zx128.data(), [&](int64_t r0, int64_t nr, int64_t c0, int64_t cols, const float* tmp) {
    const int64_t c1 = std::min(n, c0 + cols);
    for (int64_t i = r0; i < r0 + nr; ++i) {
      const float* t = tmp + (i - r0) * cols;
      int8_t* o = out + i * n;
      for (int64_t c = c0; c < c1; ++c) {
        const float y = t[c - c0] * sx + (bp != nullptr ? bp[c] : 0.0f);
        // Clamped first (the codes saturate anyway), so |v| < 2^22 and adding then subtracting
        // 1.5 * 2^23 rounds half to even as torch.round does, without a libm call.
        const float v = std::min(std::max(y * inv, lo - zo - 1.0f), hi - zo + 1.0f);
        const float r = (v + 12582912.0f) - 12582912.0f + zo;
        o[c] = static_cast<int8_t>(std::min(std::max(r, lo), hi));
      }
    }
  });
}

at::Tensor linearQ8Cpu(const at::Tensor& input, double input_scale, int64_t input_zero_point, const at::Tensor& packed,
                       const at::Tensor& weight_scales, const c10::optional<at::Tensor>& bias, double output_scale,
                       int64_t output_zero_point, int64_t qmin, int64_t qmax) {
  const Q8Output q{output_scale, output_zero_point, qmin, qmax};
  const auto [m, k, n] = checkLinearQ8(input, input_scale, input_zero_point, packed, weight_scales, bias, q);
  at::Tensor out = at::empty({m, n}, input.options());
  if (m > 0) {
    // Rows one cache line longer than kp: rows kp apart (a power of two) would share L1 sets.
    const int64_t xs = roundUp(k, packChunk(8)) + 64;
    at::Tensor xu = at::zeros({m, xs}, input.options().dtype(at::kByte));
    xu.slice(1, 0, k).copy_(input.reshape({m, k}).view(at::kByte).bitwise_xor(128));
    gemmRequantize(xu.const_data_ptr<uint8_t>(), xs, m, k, static_cast<int32_t>(input_zero_point), input_scale,
                   packed, weight_scales, bias, q, out.data_ptr<int8_t>());
  }
  return out.reshape(linearOutputShape(input.sizes(), n));
}

at::Tensor conv2dQ8Cpu(const at::Tensor& input, double input_scale, int64_t input_zero_point, const at::Tensor& packed,
                       const at::Tensor& weight_scales, const c10::optional<at::Tensor>& bias,
                       at::IntArrayRef kernel_size, at::IntArrayRef stride, at::IntArrayRef padding,
                       at::IntArrayRef dilation, double output_scale, int64_t output_zero_point, int64_t qmin,
                       int64_t qmax) {
  const Q8Output q{output_scale, output_zero_point, qmin, qmax};
  const Conv2dQ8Geometry g = checkConv2dQ8(input, input_scale, input_zero_point, packed, weight_scales, bias,
                                           kernel_size, stride, padding, dilation, q);
  const int64_t rows = g.n * g.oh * g.ow, k = g.k(), xs = roundUp(k, packChunk(8)) + 64;
  at::Tensor xu = at::empty({rows, xs}, input.options().dtype(at::kByte));
  // Channels last, as unsigned codes: one kernel tap of one output pixel is C contiguous bytes.
  const at::Tensor x = input.permute({0, 2, 3, 1}).view(at::kByte).bitwise_xor(128).contiguous();
  const uint8_t* src = x.const_data_ptr<uint8_t>();
  uint8_t* dst = xu.data_ptr<uint8_t>();
  const auto pad = static_cast<uint8_t>(input_zero_point + 128);
  at::parallel_for(0, g.n * g.oh, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / g.oh, oh = r % g.oh;
      for (int64_t ow = 0; ow < g.ow; ++ow) {
        uint8_t* row = dst + (r * g.ow + ow) * xs;
        for (int64_t i = 0; i < g.kh; ++i) {
          const int64_t ih = oh * g.sh - g.ph + i * g.dh;
          for (int64_t j = 0; j < g.kw; ++j) {
            const int64_t iw = ow * g.sw - g.pw + j * g.dw;
            uint8_t* tap = row + (i * g.kw + j) * g.c;
            if (ih >= 0 && ih < g.h && iw >= 0 && iw < g.w) {
              std::memcpy(tap, src + ((b * g.h + ih) * g.w + iw) * g.c, g.c);
            } else {
              std::memset(tap, pad, g.c);
            }
          }
        }
        std::memset(row + k, 0, xs - k);
      }
    }
  });
  at::Tensor out = at::empty({g.n, g.oh, g.ow, g.oc}, input.options());
  gemmRequantize(xu.const_data_ptr<uint8_t>(), xs, rows, k, static_cast<int32_t>(input_zero_point), input_scale,
                 packed, weight_scales, bias, q, out.data_ptr<int8_t>());
  return out.permute({0, 3, 1, 2}).contiguous();
}

}  // namespace
}  // namespace pt2q

TORCH_LIBRARY_IMPL(pt2q, CPU, m) {
  m.impl("linear_q8", &pt2q::linearQ8Cpu);
  m.impl("conv2d_q8", &pt2q::conv2dQ8Cpu);
}
