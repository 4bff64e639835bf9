// CPU linear_w8a8 / linear_w4a8 / quantize_per_token_int8. The input's rows are quantized once
// (per-token int8, stored as unsigned bytes q + 128), then the panel loop (cpu/linear_panels.h)
// takes the integer dot products; the token scale and bias are applied as each panel finishes,
// so the int32 products never go to memory.
#include <torch/library.h>

#include <atomic>
#include <vector>

#include "kernels/cpu/linear_panels.h"
#include "kernels/linear_dynamic.h"
#include "kernels/linear_weight_only_args.h"

namespace pt2q {
namespace {

// Per-token codes of x ([m, k] fp32) into xu ([m, kp], zero padding), with scales and zero points.
void quantizeTokens(const char* op, const at::Tensor& input, const at::Tensor& x, at::Tensor& xu, double* sx,
                    int32_t* zx) {
  const int64_t m = x.size(0), k = x.size(1), kp = xu.size(1);
  const auto fn = cpu::linearKernels().quantize_rows_i8;
  std::atomic<int64_t> bad{m};
  at::parallel_for(0, m, 16, [&](int64_t r0, int64_t r1) {
    const int64_t r = fn(x.const_data_ptr<float>() + r0 * k, r1 - r0, k, k, xu.data_ptr<uint8_t>() + r0 * kp, kp,
                         sx + r0, zx + r0);
    if (r >= 0) {
      int64_t cur = bad.load();
      while (r0 + r < cur && !bad.compare_exchange_weak(cur, r0 + r)) {
      }
    }
  });
  if (bad.load() < m) failNonFiniteToken(op, input, bad.load());
}

template <int Bits>
at::Tensor linearDynamicCpu(const at::Tensor& input, const at::Tensor& packed, const at::Tensor& scales,
                            const c10::optional<at::Tensor>& zero_points, const c10::optional<at::Tensor>& bias,
                            c10::optional<double> per_tensor_eps) {
  const char* op = Bits == 4 ? "linear_w4a8" : "linear_w8a8";
  const LinearWeightOnlyGeometry g = checkLinearWeightOnly(op, Bits, input, packed, scales, zero_points, bias);
  const int64_t n = g.n, k = g.k, m = g.m, chunk = packChunk(Bits), kp = roundUp(k, chunk);
  const int64_t group_chunks = g.groups == 1 ? kp / chunk : g.group_size / chunk;
  at::Tensor out = at::empty({m, n}, input.options().dtype(at::kFloat));
  if (m == 0) return out.to(input.scalar_type()).reshape(linearOutputShape(input.sizes(), n));

  const at::Tensor x = input.reshape({m, k}).to(at::kFloat).contiguous();
  // Rows one cache line longer than kp: rows kp apart (a power of two) would share L1 sets.
  const int64_t xs = kp + 64;
  at::Tensor xu = at::zeros({m, xs}, x.options().dtype(at::kByte));
  std::vector<double> sx(m);
  std::vector<int32_t> zx(m);
  if (per_tensor_eps.has_value()) {
    // One scale for all rows: torch's own ops choose and apply it (same kernels, same codes).
    const auto [codes, scale, zp] = quantizePerTensorRef(op, input.reshape({m, k}), *per_tensor_eps);
    xu.slice(1, 0, k).copy_(codes.view(at::kByte).bitwise_xor(128));
    std::fill(sx.begin(), sx.end(), scale);
    std::fill(zx.begin(), zx.end(), static_cast<int32_t>(zp));
  } else {
    quantizeTokens(op, input, x, xu, sx.data(), zx.data());
  }
  std::vector<int32_t> zx128(m);
  std::vector<float> sxf(m);
  for (int64_t i = 0; i < m; ++i) {
    zx128[i] = zx[i] + 128;
    sxf[i] = static_cast<float>(sx[i]);
  }
  const at::Tensor s4 = panelScales(scales, n, g.groups);
  const at::Tensor b32 = bias.has_value() ? bias->to(at::kFloat).contiguous() : at::Tensor();
  const at::Tensor pw = packed.contiguous();
  PanelWeight pwt{pw.const_data_ptr<int8_t>(), Bits, n, kp, g.groups, group_chunks, s4.const_data_ptr<float>()};
  float* o = out.data_ptr<float>();
  const float* bp = b32.defined() ? b32.const_data_ptr<float>() : nullptr;
  runPanels(pwt, xu.const_data_ptr<uint8_t>(), xs, m, zx128.data(),
            [&](int64_t r0, int64_t rows, int64_t c0, int64_t cols, const float* tmp) {
    const int64_t c1 = std::min(n, c0 + cols);
    for (int64_t i = r0; i < r0 + rows; ++i) {
      const float* t = tmp + (i - r0) * cols;
      float* oi = o + i * n;
      for (int64_t c = c0; c < c1; ++c) oi[c] = t[c - c0] * sxf[i] + (bp != nullptr ? bp[c] : 0.0f);
    }
  });
  if (zero_points.has_value()) {
    // sum_k (q - zx)(w - zw) s_w = [the kernel's sum] - sum_g s_w zw sum_{k in g} (q - zx)
    const at::Tensor q = xu.slice(1, 0, k).to(at::kInt).reshape({m, g.groups, g.group_size}).sum(-1);
    const at::Tensor zxt = at::from_blob(zx128.data(), {m, 1}, at::kInt);
    const at::Tensor qsum = (q - zxt * g.group_size).to(at::kDouble);
    const at::Tensor sz = scales.to(at::kDouble).reshape({n, g.groups}) * zero_points->to(at::kDouble).reshape({n, g.groups});
    const at::Tensor sxt = at::from_blob(sx.data(), {m, 1}, at::kDouble);
    out.sub_((at::mm(qsum, sz.t()) * sxt).to(at::kFloat));
  }
  return out.to(input.scalar_type()).reshape(linearOutputShape(input.sizes(), n));
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> quantizePerTokenCpu(const at::Tensor& input) {
  checkPerTokenInput(input);
  const int64_t k = input.size(-1), m = input.numel() / k;
  const at::Tensor x = input.reshape({m, k}).to(at::kFloat).contiguous();
  at::Tensor xu = at::empty({m, k}, x.options().dtype(at::kByte));
  at::Tensor sx = at::empty({m}, x.options().dtype(at::kDouble));
  std::vector<int32_t> zx(m);
  quantizeTokens("quantize_per_token_int8", input, x, xu, sx.data_ptr<double>(), zx.data());
  // q = xu - 128 is xu with its top bit flipped, read as int8.
  at::Tensor codes = xu.bitwise_xor(128).view(at::kChar).reshape(input.sizes());
  std::vector<int64_t> qshape(input.sizes().begin(), input.sizes().end());
  qshape.back() = 1;
  const at::Tensor zp = at::from_blob(zx.data(), {m}, at::kInt).to(at::kLong).reshape(qshape);
  return {codes, sx.reshape(qshape), zp};
}

}  // namespace
}  // namespace pt2q

TORCH_LIBRARY_IMPL(pt2q, CPU, m) {
  m.impl("linear_w8a8", &pt2q::linearDynamicCpu<8>);
  m.impl("linear_w4a8", &pt2q::linearDynamicCpu<4>);
  m.impl("quantize_per_token_int8", &pt2q::quantizePerTokenCpu);
}
