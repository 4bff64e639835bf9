// The vectorized affine CUDA kernels' index arithmetic (kernels/cuda/vec_index.h) on the host:
// FastDiv against the division operator, VecIndex (merged layout) against the qparam index summed
// over the unmerged dimensions.
#include "kernels/cuda/vec_index.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

namespace pt2q::cuda {
namespace {

TEST(FastDiv, MatchesDivisionOnEdgesAndRandomValues) {
  std::mt19937_64 rng(7);
  const uint32_t top = (1u << 31) - 1;
  std::vector<uint32_t> divisors = {1, 2, 3, 5, 7, 8, 12, 641, 6700417, (1u << 16) + 1, (1u << 30) + 1, top - 1, top};
  for (int i = 0; i < 64; ++i) divisors.push_back(static_cast<uint32_t>(rng() % top) + 1);
  for (int k = 0; k < 31; ++k) divisors.push_back(1u << k), divisors.push_back((1u << k) + 1);
  for (uint32_t d : divisors) {
    const FastDiv f = FastDiv::of(d);
    std::vector<uint32_t> ns = {0, 1, d - 1, d, top, top - 1};
    if (d <= top / 2) ns.push_back(2 * d - 1), ns.push_back(2 * d);
    for (uint32_t m = 1; m < 8 && uint64_t{d} * m <= top; ++m) ns.push_back(d * m - 1), ns.push_back(d * m);
    ns.push_back(top - top % d), ns.push_back(top - top % d - 1);
    for (int i = 0; i < 2000; ++i) ns.push_back(static_cast<uint32_t>(rng() % (uint64_t{top} + 1)));
    for (uint32_t n : ns) ASSERT_EQ(f.div(n), n / d) << n << " / " << d;
  }
}

// sum_d (i_d / block_d) * qstride_d over the layout as given.
uint32_t plainIndex(const std::vector<int64_t>& sizes, const std::vector<int64_t>& block,
                    const std::vector<int64_t>& qstride, int64_t i) {
  int64_t q = 0;
  for (int d = static_cast<int>(sizes.size()) - 1; d >= 0; --d) {
    q += ((i % sizes[d]) / block[d]) * qstride[d];
    i /= sizes[d];
  }
  return static_cast<uint32_t>(q);
}

void expectSameIndex(const std::vector<int64_t>& sizes, const std::vector<int64_t>& block,
                     const std::vector<int64_t>& qstride) {
  const VecIndex v = VecIndex::of(static_cast<int>(sizes.size()), sizes.data(), block.data(), qstride.data());
  ASSERT_GE(v.ndim, 1);
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(v.at(static_cast<uint32_t>(i)), plainIndex(sizes, block, qstride, i)) << "element " << i;
  }
}

// The qparam tensor's contiguous strides for a layout (ceil(size / block) qparams per dimension).
std::vector<int64_t> qstridesOf(const std::vector<int64_t>& sizes, const std::vector<int64_t>& block) {
  std::vector<int64_t> q(sizes.size());
  int64_t s = 1;
  for (int d = static_cast<int>(sizes.size()) - 1; d >= 0; --d) {
    q[d] = s;
    s *= (sizes[d] + block[d] - 1) / block[d];
  }
  return q;
}

TEST(VecIndex, MergesTheLayoutsOfTheBenchmarks) {
  // Per tensor and per channel along axis 0 become one dimension; along the last axis the
  // one-block outer dimension goes.
  const std::vector<int64_t> sizes = {4096, 16384};
  struct Case {
    std::vector<int64_t> block;
    int ndim;
    uint32_t last_block;
  };
  for (const Case& c : {Case{{4096, 16384}, 1, 4096u * 16384u}, Case{{1, 16384}, 1, 16384}, Case{{4096, 1}, 1, 1},
                        Case{{1, 128}, 2, 128}}) {
    const auto q = qstridesOf(sizes, c.block);
    const VecIndex v = VecIndex::of(2, sizes.data(), c.block.data(), q.data());
    EXPECT_EQ(v.ndim, c.ndim);
    EXPECT_EQ(v.block[v.ndim - 1].d, c.last_block);
  }
}

TEST(VecIndex, AgreesWithThePlainSumOnRandomLayouts) {
  std::mt19937 rng(11);
  for (int t = 0; t < 3000; ++t) {
    const int nd = 1 + static_cast<int>(rng() % 5);
    std::vector<int64_t> sizes(nd), block(nd);
    for (int d = 0; d < nd; ++d) {
      sizes[d] = 1 + rng() % 7;
      block[d] = 1 + rng() % (sizes[d] + 1);  // blocks past the size too
      if (rng() % 3 == 0) block[d] = sizes[d];
    }
    auto q = qstridesOf(sizes, block);
    if (t % 4 == 0) std::shuffle(q.begin(), q.end(), rng);  // qparams in another order
    expectSameIndex(sizes, block, q);
  }
}

TEST(VecIndex, RefusesLayoutsOf2To31ElementsOrMore) {
  const std::vector<int64_t> one = {1, 1};
  const std::vector<int64_t> fits = {int64_t{1} << 16, (int64_t{1} << 15) - 1};
  EXPECT_EQ(VecIndex::of(2, fits.data(), one.data(), qstridesOf(fits, one).data()).ndim, 2);
  const std::vector<int64_t> limit = {int64_t{1} << 16, int64_t{1} << 15};
  EXPECT_EQ(VecIndex::of(2, limit.data(), one.data(), qstridesOf(limit, one).data()).ndim, 0);
  const std::vector<int64_t> empty = {0, 4};
  EXPECT_EQ(VecIndex::of(2, empty.data(), one.data(), one.data()).ndim, 0);
}

}  // namespace
}  // namespace pt2q::cuda
