// NCHW <-> channels-last copies of 1-byte codes for conv2d_q8 on CPU: ATen's strided int8 copy
// moved ~4.5 GB/s on the 2-core Zen 5 VM, half of a ResNeXt 3x3 layer's time at 56 x 56.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace pt2q::cpu {

/// `input` [n, c, h, w] of 1-byte codes as a contiguous [n, h, w, c] tensor of `dtype` (kChar or
/// kByte), each byte XORed with `flip` (0x80 turns int8 codes into q + 128). No transpose for a
/// channels-last input.
at::Tensor channelsLastBytes(const at::Tensor& input, at::ScalarType dtype, uint8_t flip);

/// `nhwc` [n, h, w, c] contiguous 1-byte codes as a contiguous [n, c, h, w] tensor.
at::Tensor nchwFromChannelsLast(const at::Tensor& nhwc);

}  // namespace pt2q::cpu
