// CPU pack_int4 / unpack_int4: the ISA's byte-shuffling microkernel over parallel chunks.
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <atomic>
#include <limits>

#include "kernels/cpu/affine_microkernels.h"
#include "kernels/int4_pack_args.h"

namespace pt2q {
namespace {

constexpr int64_t kGrainBytes = 1 << 16;

at::Tensor packInt4Cpu(const at::Tensor& input, c10::string_view nibble_order) {
  const bool high_first = parseNibbleOrder(nibble_order, "pack_int4");
  checkPackInt4Input(input);
  const at::Tensor x = input.contiguous();
  at::Tensor out = at::empty(packedShape(x.sizes()), x.options().dtype(at::kByte));
  const auto* in = static_cast<const uint8_t*>(x.const_data_ptr());
  auto* o = out.data_ptr<uint8_t>();
  const bool is_signed = x.scalar_type() == at::kChar;
  const auto fn = cpu::affineKernels().pack_int4;
  std::atomic<int64_t> first_bad{std::numeric_limits<int64_t>::max()};
  at::parallel_for(0, out.numel(), kGrainBytes, [&](int64_t b, int64_t e) {
    const int64_t bad = fn(in + 2 * b, o + b, e - b, high_first, is_signed);
    if (bad >= 0) {
      int64_t cur = first_bad.load();
      while (2 * b + bad < cur && !first_bad.compare_exchange_weak(cur, 2 * b + bad)) {
      }
    }
  });
  if (first_bad.load() != std::numeric_limits<int64_t>::max()) failPackInt4Range(x, first_bad.load());
  return out;
}

at::Tensor unpackInt4Cpu(const at::Tensor& packed, bool is_signed, c10::string_view nibble_order) {
  const bool high_first = parseNibbleOrder(nibble_order, "unpack_int4");
  checkUnpackInt4Input(packed);
  const at::Tensor p = packed.contiguous();
  at::Tensor out = at::empty(unpackedShape(p.sizes()), p.options().dtype(is_signed ? at::kChar : at::kByte));
  const auto* in = p.const_data_ptr<uint8_t>();
  auto* o = static_cast<uint8_t*>(out.data_ptr());
  const auto fn = cpu::affineKernels().unpack_int4;
  at::parallel_for(0, p.numel(), kGrainBytes,
                   [&](int64_t b, int64_t e) { fn(in + b, o + 2 * b, e - b, high_first, is_signed); });
  return out;
}

}  // namespace
}  // namespace pt2q

TORCH_LIBRARY_IMPL(pt2q, CPU, m) {
  m.impl("pack_int4", &pt2q::packInt4Cpu);
  m.impl("unpack_int4", &pt2q::unpackInt4Cpu);
}
