// Max pooling of int8 / uint8 codes (max_pool2d_q8): the window geometry aten.max_pool2d uses,
// checked once for every backend, and the reference implementation.
#pragma once

#include <ATen/ATen.h>

namespace pt2q {

struct MaxPoolQ8Geometry {
  int64_t planes = 0, h = 0, w = 0, oh = 0, ow = 0;  // planes: N * C
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
};

/// Value i of a pooling argument of 0, 1 or 2 values (one value: both dimensions; none: dflt).
inline int64_t poolArg(at::IntArrayRef v, size_t i, int64_t dflt) {
  return v.empty() ? dflt : v.size() == 1 ? v[0] : v[i];
}

/// One output extent as aten's pooling_output_shape computes it.
int64_t poolOutputSize(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dilation, bool ceil_mode);

/// max_pool2d_q8's checks (codes, a 3-d or 4-d input, aten.max_pool2d's rules on the window) and its
/// geometry. An empty stride means the kernel size, as in aten.
MaxPoolQ8Geometry checkMaxPoolQ8(const at::Tensor& input, at::IntArrayRef kernel_size, at::IntArrayRef stride,
                                 at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode);

/// The output's shape: input's with H, W replaced.
std::vector<int64_t> maxPoolQ8Shape(const at::Tensor& input, const MaxPoolQ8Geometry& g);

/// Reference (plain ATen, any device): aten.max_pool2d on the codes as floats, which are exact.
at::Tensor maxPoolQ8Ref(const at::Tensor& input, at::IntArrayRef kernel_size, at::IntArrayRef stride,
                        at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode);

}  // namespace pt2q
