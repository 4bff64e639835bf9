// Argument checks and geometry of the weight-only linear ops (pack_weight_int8 / linear_w8a16,
// pack_weight_int4 / linear_w4a16), shared by every backend.
#pragma once

#include <ATen/ATen.h>

namespace pt2q {

/// Rows per block of the packed layouts, and bytes of one row in one chunk.
constexpr int64_t kPackRows = 4;
constexpr int64_t kPackChunkBytes = 16;

/// k-values per chunk: 16 int8 codes ("n4k16") or 32 int4 codes ("n4k32").
inline int64_t packChunk(int bits) { return bits == 4 ? 32 : 16; }

inline int64_t roundUp(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

/// pack_weight_int{bits}'s input: a 2-d int8 tensor (in [-8, 7] for 4 bits: checked by the
/// kernels, which name the first bad index).
void checkPackWeight(const at::Tensor& weight, int bits);
/// The packed shape [ceil(N / 4), roundUp(K, chunk) * 4 * bits / 8].
std::vector<int64_t> packedWeightShape(int64_t n, int64_t k, int bits);
[[noreturn]] void failPackInt4Value(const at::Tensor& weight, int64_t flat_index);

/// What a weight-only linear's arguments describe, after the checks.
struct LinearWeightOnlyGeometry {
  int64_t n = 0;           // output features (scales.size(0))
  int64_t k = 0;           // input features (input.size(-1))
  int64_t m = 0;           // rows of input (all leading dims)
  int64_t groups = 1;      // scales per row
  int64_t group_size = 0;  // k / groups
};

/// The checks that need no sizes (dtypes and ranks), for the Meta kernels under symbolic shapes.
void checkLinearWeightOnlyTypes(const char* op, const at::Tensor& input, const at::Tensor& packed,
                                const at::Tensor& scales, const c10::optional<at::Tensor>& zero_points);
/// Checks a weight-only linear's arguments (dtypes, shapes, the packed size, the group size a
/// multiple of the chunk); errors name the op, the argument and what was expected.
LinearWeightOnlyGeometry checkLinearWeightOnly(const char* op, int bits, const at::Tensor& input,
                                               const at::Tensor& packed, const at::Tensor& scales,
                                               const c10::optional<at::Tensor>& zero_points,
                                               const c10::optional<at::Tensor>& bias);

/// The output shape: input's with the last dimension replaced by n.
std::vector<int64_t> linearOutputShape(at::IntArrayRef input_sizes, int64_t n);

/// Reference implementations (plain ATen, any device); kernels/reference/linear_weight_only.cpp.
at::Tensor packWeightRef(const at::Tensor& weight, int bits);
/// The int8 codes [N, K] held by a packed tensor.
at::Tensor unpackWeightRef(const at::Tensor& packed, int64_t n, int64_t k, int bits);
at::Tensor linearWeightOnlyRef(const char* op, int bits, const at::Tensor& input, const at::Tensor& packed,
                               const at::Tensor& scales, const c10::optional<at::Tensor>& zero_points,
                               const c10::optional<at::Tensor>& bias);

}  // namespace pt2q
