// lookup_q8's checks, output and reference (lookup_q8.h).
#include "kernels/lookup_q8.h"

namespace pt2q {

void checkLookupQ8(const at::Tensor& codes, const at::Tensor& table) {
  TORCH_CHECK_VALUE(codes.scalar_type() == at::kChar || codes.scalar_type() == at::kByte,
                    "lookup_q8: codes must be int8 or uint8, got ", codes.scalar_type());
  TORCH_CHECK_VALUE(table.scalar_type() == at::kChar || table.scalar_type() == at::kByte,
                    "lookup_q8: table must be int8 or uint8, got ", table.scalar_type());
  TORCH_CHECK_VALUE(table.dim() == 1 && table.size(0) == 256, "lookup_q8: table must have shape [256], got ",
                    table.sizes());
  TORCH_CHECK_VALUE(table.device() == codes.device(), "lookup_q8: table is on ", table.device(), ", codes on ",
                    codes.device());
}

at::Tensor lookupQ8Output(const at::Tensor& codes, const at::Tensor& table) {
  const auto options = codes.options().dtype(table.scalar_type());
  if (codes.is_non_overlapping_and_dense()) return at::empty_like(codes, options);
  return at::empty(codes.sizes(), options);
}

at::Tensor lookupQ8Ref(const at::Tensor& codes, const at::Tensor& table) {
  checkLookupQ8(codes, table);
  const at::Tensor index = codes.to(at::kLong).bitwise_and(255);
  return lookupQ8Output(codes, table).copy_(table.index({index}));
}

}  // namespace pt2q
