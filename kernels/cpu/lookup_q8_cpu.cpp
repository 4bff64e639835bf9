// CPU lookup_q8: the dense codes as one flat run in storage order (whatever their layout), split
// over threads, each chunk through the linear table's q8_lookup (kernels/cpu/q8_lookup_impl.h).
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <cstdint>

#include "kernels/cpu/linear_microkernels.h"
#include "kernels/lookup_q8.h"

namespace pt2q {
namespace {

at::Tensor lookupQ8Cpu(const at::Tensor& codes, const at::Tensor& table) {
  checkLookupQ8(codes, table);
  const at::Tensor x = codes.is_non_overlapping_and_dense() ? codes : codes.contiguous();
  const at::Tensor t = table.contiguous();
  at::Tensor out = lookupQ8Output(x, table);
  const auto* in = static_cast<const uint8_t*>(x.const_data_ptr());
  const auto* entries = static_cast<const uint8_t*>(t.const_data_ptr());
  auto* o = static_cast<uint8_t*>(out.data_ptr());
  const auto run = cpu::linearKernels().q8_lookup;
  // Both tensors dense with the same strides: element i of one's storage run is element i of the other's.
  at::parallel_for(0, x.numel(), 1 << 15, [&](int64_t b, int64_t e) { run(in + b, e - b, entries, o + b); });
  return out;
}

}  // namespace
}  // namespace pt2q

TORCH_LIBRARY_IMPL(pt2q, CPU, m) { m.impl("lookup_q8", &pt2q::lookupQ8Cpu); }
