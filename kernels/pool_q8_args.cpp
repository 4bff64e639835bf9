// max_pool2d_q8's checks, geometry and reference (pool_q8.h).
#include "kernels/pool_q8.h"

namespace pt2q {

int64_t poolOutputSize(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dilation, bool ceil_mode) {
  const int64_t span = in + 2 * pad - dilation * (k - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  int64_t out = (span >= 0 ? span / stride : -((-span + stride - 1) / stride)) + 1;
  // A last window that would start in the right padding is dropped.
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

MaxPoolQ8Geometry checkMaxPoolQ8(const at::Tensor& input, at::IntArrayRef kernel_size, at::IntArrayRef stride,
                                 at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode) {
  TORCH_CHECK_VALUE(input.scalar_type() == at::kChar || input.scalar_type() == at::kByte,
                    "max_pool2d_q8: input must be int8 or uint8 codes, got ", input.scalar_type());
  TORCH_CHECK_VALUE(input.dim() == 3 || input.dim() == 4, "max_pool2d_q8: input must be [N, C, H, W] or [C, H, W], got ",
                    input.dim(), " dimensions");
  for (const auto& [name, v] : {std::pair<const char*, at::IntArrayRef>{"kernel_size", kernel_size},
                                {"stride", stride}, {"padding", padding}, {"dilation", dilation}}) {
    TORCH_CHECK_VALUE(v.size() <= 2 && (!v.empty() || std::string(name) == "stride"), "max_pool2d_q8: ", name,
                      " must have 1 or 2 values, got ", v.size());
  }
  MaxPoolQ8Geometry g;
  g.kh = poolArg(kernel_size, 0, 1), g.kw = poolArg(kernel_size, 1, 1);
  g.sh = poolArg(stride, 0, g.kh), g.sw = poolArg(stride, 1, g.kw);
  g.ph = poolArg(padding, 0, 0), g.pw = poolArg(padding, 1, 0);
  g.dh = poolArg(dilation, 0, 1), g.dw = poolArg(dilation, 1, 1);
  TORCH_CHECK_VALUE(g.kh > 0 && g.kw > 0 && g.sh > 0 && g.sw > 0 && g.dh > 0 && g.dw > 0,
                    "max_pool2d_q8: kernel_size, stride and dilation must be positive, got ", kernel_size, ", ", stride,
                    " and ", dilation);
  TORCH_CHECK_VALUE(g.ph >= 0 && g.pw >= 0 && g.ph <= g.kh / 2 && g.pw <= g.kw / 2,
                    "max_pool2d_q8: padding must be non-negative and at most half the kernel size, got ", padding,
                    " for kernel_size ", kernel_size);
  const int64_t d = input.dim();
  g.h = input.size(d - 2), g.w = input.size(d - 1);
  g.planes = input.numel() / std::max<int64_t>(1, g.h * g.w);
  g.oh = poolOutputSize(g.h, g.kh, g.ph, g.sh, g.dh, ceil_mode);
  g.ow = poolOutputSize(g.w, g.kw, g.pw, g.sw, g.dw, ceil_mode);
  TORCH_CHECK_VALUE(g.oh > 0 && g.ow > 0, "max_pool2d_q8: the output of a ", g.h, " x ", g.w,
                    " input would be empty for kernel_size ", kernel_size, ", stride ", stride, ", padding ", padding,
                    ", dilation ", dilation);
  return g;
}

std::vector<int64_t> maxPoolQ8Shape(const at::Tensor& input, const MaxPoolQ8Geometry& g) {
  std::vector<int64_t> shape = input.sizes().vec();
  shape[shape.size() - 2] = g.oh;
  shape[shape.size() - 1] = g.ow;
  return shape;
}

at::Tensor maxPoolQ8Ref(const at::Tensor& input, at::IntArrayRef kernel_size, at::IntArrayRef stride,
                        at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode) {
  checkMaxPoolQ8(input, kernel_size, stride, padding, dilation, ceil_mode);
  return at::max_pool2d(input.to(at::kFloat), kernel_size, stride, padding, dilation, ceil_mode)
      .to(input.scalar_type());
}

}  // namespace pt2q
