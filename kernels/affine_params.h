// Argument parsing and validation shared by every implementation of the affine ops, so that
// the reference, CPU, CUDA and Meta kernels accept and reject exactly the same inputs.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include <ATen/ATen.h>

namespace pt2q {

enum class ZeroPointDomain { kInt, kFloat, kNone };
enum class MappingType { kSymmetric, kSymmetricNoClippingErr, kAsymmetric };

/// Parses "int" / "float" / "none" (torchao's ZeroPointDomain names, any case).
ZeroPointDomain parseZeroPointDomain(std::string_view s, const char* op);
/// Parses "symmetric" / "symmetric_no_clipping_err" / "asymmetric" (torchao's MappingType names).
MappingType parseMappingType(std::string_view s, const char* op);

/// A target quantized dtype: the dtype its codes are stored in and its full value range.
/// torch.int4 is stored in int8 with range [-8, 7]; torch.uint4 in uint8 with [0, 15].
struct QuantDtype {
  at::ScalarType dtype;    // as the user named it
  at::ScalarType storage;  // what the tensor holds
  int64_t lo;
  int64_t hi;
};
/// Throws naming `op` and `arg` when `t` is not a supported integer quantization dtype.
QuantDtype quantDtype(at::ScalarType t, const char* op, const char* arg);

/// [qmin, qmax] after defaults; `custom` is torch.ao's has_customized_qrange (both given).
struct QuantRange {
  int64_t qmin;
  int64_t qmax;
  bool custom;
};
QuantRange resolveQuantRange(const QuantDtype& q, std::optional<int64_t> qmin, std::optional<int64_t> qmax,
                             const char* op);

/// How a block_size tiles a tensor (torchao's _get_reduction_params). Dimension d has
/// nblocks[d] = sizes[d] / block[d] blocks; the qparam of element i sits at
/// sum_d (i_d / block[d]) * qstride[d] in a contiguous qparam tensor of num_blocks elements.
struct BlockLayout {
  std::vector<int64_t> sizes;
  std::vector<int64_t> block;
  std::vector<int64_t> nblocks;
  std::vector<int64_t> qstride;
  std::vector<int64_t> shape_for_reduction;
  std::vector<int64_t> reduction_dims;
  std::vector<int64_t> shape_after_reduction;  // shape_for_reduction with reduced dims set to 1
  std::vector<int64_t> scale_shape;            // shape_for_reduction without the reduced dims
  int64_t num_blocks = 1;
};
/// Validates block_size against `sizes` (same rank, positive, divides each dimension).
BlockLayout makeBlockLayout(at::IntArrayRef sizes, at::IntArrayRef block_size, const char* op);

/// Checks scale / zero_point against the layout and domain: element counts, dtypes, devices.
void checkQParams(const BlockLayout& layout, const at::Tensor& input, const at::Tensor& scale,
                  const std::optional<at::Tensor>& zero_point, ZeroPointDomain domain, const char* op);

/// Checks that `input` is a floating tensor pt2q quantizes from (fp32, bf16, fp16).
void checkFloatInput(const at::Tensor& input, const char* op, const char* arg);
/// Checks that `dtype` is an output dtype pt2q dequantizes to (fp32, bf16, fp16).
void checkFloatDtype(at::ScalarType dtype, const char* op, const char* arg);

/// Scale and zero point as contiguous fp32 tensors of num_blocks elements (exact for fp32,
/// bf16 and fp16 scales; zero points as fp32, which is what PyTorch's q/dq ops add too).
/// Absent zero point (or domain "none") gives an undefined tensor.
at::Tensor scaleAsFloat(const at::Tensor& scale);
at::Tensor zeroPointAsFloat(const std::optional<at::Tensor>& zero_point, ZeroPointDomain domain);

/// The pair (min, max) -> (scale, zero_point) of choose_qparams_affine, on fp32 tensors of
/// per-block extrema. One implementation, used by every backend, so qparams match bit for bit.
std::tuple<at::Tensor, at::Tensor> qparamsFromMinMax(const at::Tensor& min_val, const at::Tensor& max_val,
                                                     MappingType mapping, const QuantDtype& qdtype,
                                                     const QuantRange& range, double eps,
                                                     ZeroPointDomain domain);

/// The zero point of the symmetric mappings (qparamsFromMinMax): the centre of an unsigned range.
int64_t symmetricZeroPoint(const QuantDtype& qdtype, const QuantRange& range, ZeroPointDomain domain);

/// Formats an int list as "[a, b, c]" for error messages.
std::string formatList(at::IntArrayRef v);

}  // namespace pt2q
