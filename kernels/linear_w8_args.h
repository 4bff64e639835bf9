// Argument checks and geometry of pack_weight_int8 / linear_w8a16, shared by every backend.
#pragma once

#include <ATen/ATen.h>

namespace pt2q {

/// Rows per block and k-values per chunk of the "n4k16" packed int8 layout.
constexpr int64_t kPackRows = 4;
constexpr int64_t kPackChunk = 16;

inline int64_t roundUp(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

/// pack_weight_int8's input: a 2-d int8 tensor.
void checkPackWeightInt8(const at::Tensor& weight);
/// The packed shape [ceil(N / 4), roundUp(K, 16) * 4].
std::vector<int64_t> packedWeightInt8Shape(int64_t n, int64_t k);

/// What linear_w8a16's arguments describe, after the checks.
struct LinearW8Geometry {
  int64_t n = 0;           // output features (scales.size(0))
  int64_t k = 0;           // input features (input.size(-1))
  int64_t m = 0;           // rows of input (all leading dims)
  int64_t groups = 1;      // scales per row
  int64_t group_size = 0;  // k / groups
};

/// The checks that need no sizes (dtypes and ranks), for the Meta kernel under symbolic shapes.
void checkLinearW8a16Types(const at::Tensor& input, const at::Tensor& packed, const at::Tensor& scales,
                           const c10::optional<at::Tensor>& zero_points);
/// Checks linear_w8a16's arguments (dtypes, shapes, the packed size, group size a multiple of
/// 16); errors name the argument and what was expected.
LinearW8Geometry checkLinearW8a16(const at::Tensor& input, const at::Tensor& packed, const at::Tensor& scales,
                                  const c10::optional<at::Tensor>& zero_points, const c10::optional<at::Tensor>& bias);

/// The output shape: input's with the last dimension replaced by n.
std::vector<int64_t> linearOutputShape(at::IntArrayRef input_sizes, int64_t n);

/// Reference implementations (plain ATen, any device); kernels/reference/linear_w8.cpp.
at::Tensor packWeightInt8Ref(const at::Tensor& weight);
/// The int8 weight [N, K] held by a packed tensor.
at::Tensor unpackWeightInt8(const at::Tensor& packed, int64_t n, int64_t k);
at::Tensor linearW8a16Ref(const at::Tensor& input, const at::Tensor& packed, const at::Tensor& scales,
                          const c10::optional<at::Tensor>& zero_points, const c10::optional<at::Tensor>& bias);

}  // namespace pt2q
