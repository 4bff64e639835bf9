// The affine ops through the dispatcher (CPU kernels) against the reference implementations,
// over every granularity a block_size can spell, plus the error messages of bad arguments.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <string>
#include <vector>

#include "kernels/affine_ops.h"

namespace pt2q {
namespace {

// Loading libpt2q registers the ops; this reference keeps the linker from dropping it.
const auto& kQuantizeOp = c10::Dispatcher::singleton().findSchemaOrThrow("pt2q::quantize_affine", "");

at::Tensor quantizeCpu(const at::Tensor& x, std::vector<int64_t> block, const at::Tensor& s, const at::Tensor& z,
                       at::ScalarType dt) {
  static auto op = kQuantizeOp.typed<at::Tensor(const at::Tensor&, c10::SymIntArrayRef, const at::Tensor&,
                                                const std::optional<at::Tensor>&, at::ScalarType,
                                                std::optional<int64_t>, std::optional<int64_t>, c10::string_view)>();
  return op.call(x, c10::fromIntArrayRefSlow(block), s, z, dt, std::nullopt, std::nullopt, "int");
}

std::tuple<at::Tensor, at::Tensor> chooseCpu(const at::Tensor& x, std::vector<int64_t> block, at::ScalarType dt,
                                             const char* mapping) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("pt2q::choose_qparams_affine", "")
                       .typed<std::tuple<at::Tensor, at::Tensor>(
                           const at::Tensor&, c10::string_view, c10::SymIntArrayRef, at::ScalarType,
                           std::optional<int64_t>, std::optional<int64_t>, std::optional<double>,
                           std::optional<at::ScalarType>, std::optional<at::ScalarType>, c10::string_view)>();
  return op.call(x, mapping, c10::fromIntArrayRefSlow(block), dt, std::nullopt, std::nullopt, std::nullopt,
                 std::nullopt, std::nullopt, "int");
}

struct Granularity {
  std::vector<int64_t> shape;
  std::vector<int64_t> block;
};

// Per-tensor, per-channel on each axis, per-group, per-token, 2-d blocks, odd sizes, 0-d.
const std::vector<Granularity> kGranularities = {
    {{64, 96}, {64, 96}}, {{64, 96}, {1, 96}},     {{64, 96}, {64, 1}},       {{64, 96}, {1, 32}},
    {{3, 5, 96}, {1, 1, 96}}, {{4, 6, 10}, {2, 3, 5}}, {{7, 17}, {7, 1}},   {{1, 20000}, {1, 20000}},
    {{1, 20000}, {1, 1}},  {{33}, {11}},           {{}, {}},                  {{2, 0, 4}, {1, 1, 4}},
};

// CPU choose_qparams + quantize equal the reference bit for bit, for fp32 and bf16 inputs.
TEST(AffineOpsTest, CpuMatchesReferenceOnEveryGranularity) {
  at::manual_seed(0);
  for (const auto& g : kGranularities) {
    for (at::ScalarType in : {at::kFloat, at::kBFloat16}) {
      for (const char* mapping : {"asymmetric", "symmetric"}) {
        const at::Tensor x = (at::randn(g.shape) * 3).to(in);
        if (x.numel() == 0) continue;
        auto [s, z] = chooseCpu(x, g.block, at::kChar, mapping);
        auto [rs, rz] = chooseQParamsAffineRef(x, mapping, g.block, at::kChar, std::nullopt, std::nullopt,
                                               std::nullopt, std::nullopt, std::nullopt, "int");
        ASSERT_TRUE(at::equal(s, rs)) << mapping;
        ASSERT_TRUE(at::equal(z, rz)) << mapping;
        const at::Tensor q = quantizeCpu(x, g.block, s, z, at::kChar);
        const at::Tensor rq =
            quantizeAffineRef(x, g.block, s, z, at::kChar, std::nullopt, std::nullopt, "int");
        ASSERT_TRUE(at::equal(q, rq));
      }
    }
  }
}

std::string errorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  }
  return "";
}

// A block size that does not divide names the dimension, its size and the block size.
TEST(AffineOpsTest, NonDividingBlockSizeIsAClearError) {
  const at::Tensor x = at::randn({4, 10});
  const std::string msg = errorOf([&] { chooseCpu(x, {1, 3}, at::kChar, "symmetric"); });
  EXPECT_NE(msg.find("block_size[1] = 3 does not divide dimension 1 of size 10"), std::string::npos) << msg;
}

// A scale with the wrong number of elements names both counts and the expected shape.
TEST(AffineOpsTest, MismatchedScaleShapeIsAClearError) {
  const at::Tensor x = at::randn({4, 8});
  const std::string msg = errorOf([&] { quantizeCpu(x, {1, 8}, at::ones({3}), at::zeros({3}, at::kInt), at::kChar); });
  EXPECT_NE(msg.find("scale has 3 elements"), std::string::npos) << msg;
  EXPECT_NE(msg.find("expected shape [4]"), std::string::npos) << msg;
}

// Integer input to quantize is a type error naming the argument.
TEST(AffineOpsTest, WrongInputDtypeIsAClearError) {
  const at::Tensor x = at::ones({4}, at::kInt);
  const std::string msg = errorOf([&] { quantizeCpu(x, {4}, at::ones({1}), at::zeros({1}), at::kChar); });
  EXPECT_NE(msg.find("input must be float32, bfloat16 or float16"), std::string::npos) << msg;
}

}  // namespace
}  // namespace pt2q
