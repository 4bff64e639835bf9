// CUDA glue of pack_int4 / unpack_int4 / pack_weight_int8 / pack_weight_int4: the shared checks,
// one kernel (pack_cuda_kernels.cu), and for the packing ops one read of the first out-of-range
// index to raise the CPU op's error (a host sync, as the range check needs one anyway).
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <limits>

#include "kernels/cuda/glue.h"
#include "kernels/cuda/pack_cuda_kernels.h"
#include "kernels/int4_pack_args.h"
#include "kernels/linear_weight_only_args.h"

namespace pt2q {
namespace {

constexpr int64_t kNoneBad = std::numeric_limits<int64_t>::max();

// A device word for the kernels' atomicMin of the first bad index, and its read-back.
at::Tensor firstBadWord(const at::Tensor& like) { return at::full({1}, kNoneBad, like.options().dtype(at::kLong)); }
unsigned long long* wordPtr(at::Tensor& word) { return reinterpret_cast<unsigned long long*>(word.data_ptr<int64_t>()); }

at::Tensor packInt4Cuda(const at::Tensor& input, c10::string_view nibble_order) {
  const bool high_first = parseNibbleOrder(nibble_order, "pack_int4");
  checkPackInt4Input(input);
  const c10::cuda::CUDAGuard guard(input.device());
  const at::Tensor x = input.contiguous();
  at::Tensor out = at::empty(packedShape(x.sizes()), x.options().dtype(at::kByte));
  at::Tensor bad = firstBadWord(x);
  cuda::checkLaunch(cuda::packInt4(static_cast<const uint8_t*>(x.const_data_ptr()), out.data_ptr<uint8_t>(),
                                   out.numel(), high_first, x.scalar_type() == at::kChar, wordPtr(bad),
                                   at::cuda::getCurrentCUDAStream()),
                    "pack_int4");
  const int64_t first = bad.item<int64_t>();
  if (first != kNoneBad) failPackInt4Range(x, first);
  return out;
}

at::Tensor unpackInt4Cuda(const at::Tensor& packed, bool is_signed, c10::string_view nibble_order) {
  const bool high_first = parseNibbleOrder(nibble_order, "unpack_int4");
  checkUnpackInt4Input(packed);
  const c10::cuda::CUDAGuard guard(packed.device());
  const at::Tensor p = packed.contiguous();
  at::Tensor out = at::empty(unpackedShape(p.sizes()), p.options().dtype(is_signed ? at::kChar : at::kByte));
  cuda::checkLaunch(cuda::unpackInt4(p.const_data_ptr<uint8_t>(), static_cast<uint8_t*>(out.data_ptr()), p.numel(),
                                     high_first, is_signed, at::cuda::getCurrentCUDAStream()),
                    "unpack_int4");
  return out;
}

template <int Bits>
at::Tensor packWeightCuda(const at::Tensor& weight) {
  checkPackWeight(weight, Bits);
  const c10::cuda::CUDAGuard guard(weight.device());
  const at::Tensor w = weight.contiguous();
  const int64_t n = w.size(0), k = w.size(1);
  at::Tensor out = at::empty(packedWeightShape(n, k, Bits), w.options());
  at::Tensor bad = firstBadWord(w);
  cuda::checkLaunch(cuda::packWeight(w.const_data_ptr<int8_t>(), n, k, Bits, out.data_ptr<int8_t>(), wordPtr(bad),
                                     at::cuda::getCurrentCUDAStream()),
                    Bits == 4 ? "pack_weight_int4" : "pack_weight_int8");
  if (Bits == 4) {
    const int64_t first = bad.item<int64_t>();
    if (first != kNoneBad) failPackInt4Value(w, first);
  }
  return out;
}

}  // namespace
}  // namespace pt2q

TORCH_LIBRARY_IMPL(pt2q, CUDA, m) {
  m.impl("pack_int4", &pt2q::packInt4Cuda);
  m.impl("unpack_int4", &pt2q::unpackInt4Cuda);
  m.impl("pack_weight_int8", &pt2q::packWeightCuda<8>);
  m.impl("pack_weight_int4", &pt2q::packWeightCuda<4>);
}
