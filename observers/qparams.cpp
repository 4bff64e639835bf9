// Quantization parameters from observed ranges, exactly as torch.ao computes them (fp32 tensor
// arithmetic in the same order, Python-float divisors applied as scalars). Contract §3.1-3.2.
#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <cmath>

#include "observers/observer.h"

namespace pt2q {

std::pair<int64_t, int64_t> calculateQminQmax(const ObserverSpec& s) {
  if (s.quant_min.has_value() != s.quant_max.has_value()) {
    TORCH_CHECK(false, "observer: quant_min and quant_max must be given together (got only ",
                s.quant_min ? "quant_min" : "quant_max", ")");
  }
  if (s.quant_min) {
    const int64_t qmin = *s.quant_min, qmax = *s.quant_max;
    TORCH_CHECK(qmin <= 0 && 0 <= qmax, "observer: the range [", qmin, ", ", qmax, "] must include 0");
    TORCH_CHECK(qmin < qmax, "observer: quant_min ", qmin, " must be below quant_max ", qmax);
    if (s.dtype == c10::kChar || s.dtype == c10::kByte) {
      TORCH_CHECK(qmax - qmin + 1 <= 256, "observer: an 8-bit range holds at most 256 values, got [", qmin, ", ",
                  qmax, "]");
    }
    // Python's floor division.
    auto floordiv2 = [](int64_t v) { return v >= 0 ? v / 2 : -((-v + 1) / 2); };
    return s.reduce_range ? std::make_pair(floordiv2(qmin), floordiv2(qmax)) : std::make_pair(qmin, qmax);
  }
  switch (s.dtype) {
    case c10::kChar: return s.reduce_range ? std::make_pair(int64_t{-64}, int64_t{63}) : std::make_pair(int64_t{-128}, int64_t{127});
    case c10::kByte: return s.reduce_range ? std::make_pair(int64_t{0}, int64_t{127}) : std::make_pair(int64_t{0}, int64_t{255});
    case c10::kInt: return {-(int64_t{1} << 31), (int64_t{1} << 31) - 1};
    case c10::kUInt16: return {0, 65535};
    case c10::kShort: return {-32768, 32767};
    default: return {0, 15};
  }
}

QParams calculateQParams(const at::Tensor& min_val, const at::Tensor& max_val, const ObserverSpec& spec) {
  const auto [qmin, qmax] = calculateQminQmax(spec);
  // check_min_max_valid: nothing observed yet gives the neutral (1.0, 0).
  if (min_val.numel() == 0 || max_val.numel() == 0 ||
      (min_val.dim() == 0 && std::isinf(min_val.item<float>()) && min_val.item<float>() > 0 &&
       std::isinf(max_val.item<float>()) && max_val.item<float>() < 0)) {
    return {at::ones({1}, at::kFloat), at::zeros({1}, at::kLong)};
  }
  TORCH_CHECK(at::all(at::le(min_val, max_val)).item<bool>(), "observer: min_val must not exceed max_val (got ",
              min_val, " and ", max_val, ")");
  const at::Tensor min_neg = at::minimum(min_val, at::zeros_like(min_val));
  const at::Tensor max_pos = at::maximum(max_val, at::zeros_like(max_val));
  const at::Tensor eps = at::full({}, spec.eps, at::kFloat);
  at::Tensor scale, zp;
  const bool symmetric = spec.qscheme == QScheme::kPerTensorSymmetric || spec.qscheme == QScheme::kPerChannelSymmetric;
  if (symmetric) {
    const at::Tensor amax = at::maximum(-min_neg, max_pos);
    scale = at::maximum(amax / (static_cast<double>(qmax - qmin) / 2), eps);
    int64_t z = 0;
    if (spec.dtype == c10::kByte) {
      z = spec.quant_min.has_value() ? (qmin + qmax) / 2 : 128;
    } else if (spec.dtype == c10::kUInt16) {
      z = int64_t{1} << 15;
    }
    zp = at::full(min_neg.sizes(), z, at::kLong);
  } else if (spec.qscheme == QScheme::kPerChannelAffineFloatQParams) {
    scale = (max_val - min_val) / static_cast<double>(qmax - qmin);
    scale = at::where(scale > eps, scale, at::ones_like(scale));
    zp = -min_val / scale;
  } else {
    scale = at::maximum((max_pos - min_neg) / static_cast<double>(qmax - qmin), eps);
    zp = at::clamp(qmin - at::round(min_neg / scale).to(at::kInt), qmin, qmax);
  }
  if (scale.dim() == 0) scale = scale.reshape({1});
  if (zp.dim() == 0) zp = zp.reshape({1});
  return {scale, zp};
}

}  // namespace pt2q
