// CPU kernels of the affine ops: validate with the shared checks, then walk the tensor in
// segments of constant (or per-element) qparams and hand each to the ISA's microkernel,
// in parallel with at::parallel_for.
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <limits>
#include <vector>

#include "kernels/affine_ops.h"
#include "kernels/cpu/affine_microkernels.h"

namespace pt2q {
namespace {

using cpu::AffineKernels;
using cpu::QDomain;
using cpu::QuantParams;

int floatKind(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return static_cast<int>(cpu::FloatKind::kF32);
    case at::kBFloat16: return static_cast<int>(cpu::FloatKind::kBF16);
    case at::kHalf: return static_cast<int>(cpu::FloatKind::kF16);
    default: TORCH_INTERNAL_ASSERT(false, "not a float kind: ", t);
  }
}

int codeKind(at::ScalarType t) {
  switch (t) {
    case at::kChar: return static_cast<int>(cpu::CodeKind::kI8);
    case at::kByte: return static_cast<int>(cpu::CodeKind::kU8);
    case at::kShort: return static_cast<int>(cpu::CodeKind::kI16);
    case at::kUInt16: return static_cast<int>(cpu::CodeKind::kU16);
    case at::kInt: return static_cast<int>(cpu::CodeKind::kI32);
    default: TORCH_INTERNAL_ASSERT(false, "not a code kind: ", t);
  }
}

QDomain qdomain(ZeroPointDomain d) {
  switch (d) {
    case ZeroPointDomain::kInt: return QDomain::kInt;
    case ZeroPointDomain::kFloat: return QDomain::kFloat;
    case ZeroPointDomain::kNone: return QDomain::kNone;
  }
  return QDomain::kInt;
}

// How the contiguous tensor is cut into work: rows of the innermost dimension, split into
// tiles when there are too few rows to keep every thread busy.
struct Segments {
  int64_t row_len = 1;   // L, size of the innermost dimension
  int64_t rows = 1;
  int64_t blk = 1;       // block size along the innermost dimension
  bool per_element = false;  // qparams change at every innermost index (per-channel on dim -1)
  int64_t tile = 1;
  int64_t tiles_per_row = 1;
};

Segments makeSegments(const BlockLayout& l, int64_t numel, bool align_tiles_to_blocks) {
  Segments s;
  if (l.sizes.empty() || numel == 0) return s;
  s.row_len = l.sizes.back();
  s.rows = numel / s.row_len;
  s.blk = l.block.back();
  s.per_element = s.blk == 1 && s.row_len > 1;
  s.tile = s.row_len;
  const int64_t want = 4 * static_cast<int64_t>(at::get_num_threads());
  constexpr int64_t kMinTile = 4096;
  if (s.rows < want && s.row_len >= 2 * kMinTile) {
    const int64_t splits = std::min<int64_t>((want + s.rows - 1) / s.rows, s.row_len / kMinTile);
    int64_t tile = (s.row_len + splits - 1) / splits;
    const int64_t align = (align_tiles_to_blocks && !s.per_element) ? s.blk : 64;
    tile = (tile + align - 1) / align * align;
    s.tile = std::min(tile, s.row_len);
  }
  s.tiles_per_row = (s.row_len + s.tile - 1) / s.tile;
  return s;
}

// Offset of the first qparam of `row` in the contiguous qparam array.
int64_t rowQParamBase(const BlockLayout& l, int64_t row) {
  int64_t base = 0;
  for (int64_t d = static_cast<int64_t>(l.sizes.size()) - 2; d >= 0; --d) {
    const int64_t i = row % l.sizes[d];
    row /= l.sizes[d];
    base += (i / l.block[d]) * l.qstride[d];
  }
  return base;
}

// Calls fn(elem_offset, n, qparam_offset, qp_stride) for every segment of work items
// [b, e) (an item is one tile of one row).
template <typename Fn>
void walkItems(const BlockLayout& l, const Segments& s, int64_t b, int64_t e, Fn&& fn) {
  int64_t cached_row = -1, base = 0;
  for (int64_t it = b; it < e; ++it) {
    const int64_t row = it / s.tiles_per_row;
    const int64_t c0 = (it % s.tiles_per_row) * s.tile;
    const int64_t c1 = std::min(s.row_len, c0 + s.tile);
    if (row != cached_row) {
      base = rowQParamBase(l, row);
      cached_row = row;
    }
    const int64_t off = row * s.row_len;
    if (s.per_element) {
      fn(off + c0, c1 - c0, base + c0, 1);
      continue;
    }
    for (int64_t c = c0; c < c1;) {
      const int64_t j = c / s.blk;
      const int64_t end = std::min(c1, (j + 1) * s.blk);
      fn(off + c, end - c, base + j, 0);
      c = end;
    }
  }
}

// Calls fn(elem_offset, n, qparam_offset, qp_stride) for every segment, in parallel.
// align_tiles keeps every block inside one tile (needed when tiles write per-block results
// directly); element-wise ops leave it off, so even a single per-tensor row splits.
template <typename Fn>
void forEachSegment(const BlockLayout& l, int64_t numel, bool align_tiles, Fn&& fn) {
  if (numel == 0) return;
  if (l.sizes.empty()) {  // 0-d tensor
    fn(0, 1, 0, 0);
    return;
  }
  const Segments s = makeSegments(l, numel, align_tiles);
  const int64_t grain = std::max<int64_t>(1, 32768 / s.tile);
  at::parallel_for(0, s.rows * s.tiles_per_row, grain, [&](int64_t b, int64_t e) { walkItems(l, s, b, e, fn); });
}

// Like forEachSegment, but the items are cut into `chunks` contiguous ranges and fn also gets
// the chunk index (fn(chunk, elem_offset, n, qparam_offset, qp_stride)): a chunk owns private
// state without asking which thread runs it.
template <typename Fn>
void forEachSegmentChunked(const BlockLayout& l, int64_t numel, int64_t chunks, Fn&& fn) {
  if (numel == 0) return;
  if (l.sizes.empty()) {
    fn(0, 0, 1, 0, 0);
    return;
  }
  const Segments s = makeSegments(l, numel, /*align_tiles=*/false);
  const int64_t items = s.rows * s.tiles_per_row;
  at::parallel_for(0, chunks, 1, [&](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) {
      walkItems(l, s, items * c / chunks, items * (c + 1) / chunks,
                [&](int64_t off, int64_t n, int64_t qo, int64_t qs) { fn(c, off, n, qo, qs); });
    }
  });
}

// Outputs at least this large are written with streaming stores: they cannot stay in the
// last-level cache anyway (32 MiB on the 2-core EPYC VM pt2q is tuned on), so skipping the
// read-for-ownership of every destination line saves a third of the write traffic.
// PT2Q_STREAMING_STORES=0 / 1 forces them off / on (benchmarks, experiments).
int64_t streamingThresholdBytes() {
  static const int64_t threshold = [] {
    const char* env = std::getenv("PT2Q_STREAMING_STORES");
    if (env != nullptr && std::string(env) == "0") return std::numeric_limits<int64_t>::max();
    if (env != nullptr && std::string(env) == "1") return int64_t(0);
    return int64_t(16) << 20;
  }();
  return threshold;
}

QuantParams quantParams(const AffineArgs& a, const at::Tensor& out) {
  const bool stream = out.numel() * out.element_size() >= streamingThresholdBytes();
  return QuantParams{a.range.qmin, a.range.qmax, qdomain(a.domain), stream};
}

const float* zpPtr(const AffineArgs& a) {
  return a.zp.defined() ? a.zp.const_data_ptr<float>() : nullptr;
}

// Runs `fn(in, out, n, scale, zp, qp_stride)` of one microkernel over every segment of a call.
template <typename Kernel>
void runSegments(const AffineCall& c, Kernel&& fn) {
  const auto* ib = static_cast<const char*>(c.in.const_data_ptr());
  auto* ob = static_cast<char*>(c.out.data_ptr());
  const int64_t is = c.in.element_size(), os = c.out.element_size();
  const float* s = c.args.scale.const_data_ptr<float>();
  const float* z = zpPtr(c.args);
  forEachSegment(c.args.layout, c.in.numel(), /*align_tiles=*/false,
                 [&](int64_t off, int64_t n, int64_t qo, int64_t qs) {
                   fn(ib + off * is, ob + off * os, off, n, s + qo, z ? z + qo : nullptr, qs);
                 });
}

at::Tensor quantizeAffineCpu(const at::Tensor& input, at::IntArrayRef block_size, const at::Tensor& scale,
                             const std::optional<at::Tensor>& zero_point, at::ScalarType output_dtype,
                             std::optional<int64_t> quant_min, std::optional<int64_t> quant_max,
                             c10::string_view zero_point_domain) {
  const AffineCall c = prepareQuantize(input, block_size, scale, zero_point, output_dtype, quant_min, quant_max,
                                       zero_point_domain);
  const auto fn = cpu::affineKernels().quantize[floatKind(c.in.scalar_type())][codeKind(c.out.scalar_type())];
  const QuantParams p = quantParams(c.args, c.out);
  runSegments(c, [&](const void* x, void* q, int64_t, int64_t n, const float* s, const float* z, int64_t qs) {
    fn(x, q, n, s, z, qs, p);
  });
  return c.out;
}

at::Tensor dequantizeAffineCpu(const at::Tensor& input, at::IntArrayRef block_size, const at::Tensor& scale,
                               const std::optional<at::Tensor>& zero_point, at::ScalarType input_dtype,
                               std::optional<int64_t> quant_min, std::optional<int64_t> quant_max,
                               c10::string_view zero_point_domain, at::ScalarType output_dtype) {
  const AffineCall c = prepareDequantize(input, block_size, scale, zero_point, input_dtype, quant_min, quant_max,
                                         zero_point_domain, output_dtype);
  const auto fn = cpu::affineKernels().dequantize[codeKind(c.in.scalar_type())][floatKind(output_dtype)];
  const QuantParams p = quantParams(c.args, c.out);
  runSegments(c, [&](const void* q, void* y, int64_t, int64_t n, const float* s, const float* z, int64_t qs) {
    fn(q, y, n, s, z, qs, p);
  });
  return c.out;
}

std::tuple<at::Tensor, at::Tensor> fakeQuantizeImpl(const at::Tensor& input, at::IntArrayRef block_size,
                                                    const at::Tensor& scale,
                                                    const std::optional<at::Tensor>& zero_point,
                                                    at::ScalarType quant_dtype, std::optional<int64_t> quant_min,
                                                    std::optional<int64_t> quant_max,
                                                    c10::string_view zero_point_domain, bool want_mask) {
  const AffineCall c = prepareFakeQuantize(input, block_size, scale, zero_point, quant_dtype, quant_min, quant_max,
                                           zero_point_domain, want_mask);
  const auto fn = cpu::affineKernels().fake_quantize[floatKind(c.in.scalar_type())];
  const QuantParams p = quantParams(c.args, c.out);
  auto* mb = want_mask ? reinterpret_cast<uint8_t*>(c.mask.data_ptr<bool>()) : nullptr;
  runSegments(c, [&](const void* x, void* y, int64_t off, int64_t n, const float* s, const float* z, int64_t qs) {
    fn(x, y, mb ? mb + off : nullptr, n, s, z, qs, p);
  });
  return {c.out, c.mask};
}

at::Tensor fakeQuantizeAffineCpu(const at::Tensor& input, at::IntArrayRef block_size, const at::Tensor& scale,
                                 const std::optional<at::Tensor>& zero_point, at::ScalarType quant_dtype,
                                 std::optional<int64_t> quant_min, std::optional<int64_t> quant_max,
                                 c10::string_view zero_point_domain) {
  return std::get<0>(fakeQuantizeImpl(input, block_size, scale, zero_point, quant_dtype, quant_min, quant_max,
                                      zero_point_domain, false));
}

std::tuple<at::Tensor, at::Tensor> fakeQuantizeAffineCachemaskCpu(
    const at::Tensor& input, at::IntArrayRef block_size, const at::Tensor& scale,
    const std::optional<at::Tensor>& zero_point, at::ScalarType quant_dtype, std::optional<int64_t> quant_min,
    std::optional<int64_t> quant_max, c10::string_view zero_point_domain) {
  return fakeQuantizeImpl(input, block_size, scale, zero_point, quant_dtype, quant_min, quant_max,
                          zero_point_domain, true);
}

// Per-block min/max. Few blocks: the work is cut into one chunk per thread, each folding
// into its own copy of the extrema, merged at the end, so even a per-tensor reduction uses
// every thread. Many blocks: tiles are aligned to blocks, so threads write disjoint blocks
// directly; only when blocks also span rows (a block > 1 on an outer dimension) does it run
// as one chunk.
void blockMinMax(const at::Tensor& x, const BlockLayout& l, float* mn, float* mx) {
  const auto fn = cpu::affineKernels().minmax[floatKind(x.scalar_type())];
  const auto* xb = static_cast<const char*>(x.const_data_ptr());
  const int64_t es = x.element_size();
  const int64_t nb = l.num_blocks;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  std::fill(mn, mn + nb, kInf);
  std::fill(mx, mx + nb, -kInf);
  bool rows_share_blocks = false;
  for (size_t d = 0; d + 1 < l.sizes.size(); ++d) rows_share_blocks |= l.block[d] > 1;
  const int64_t threads = std::max<int64_t>(1, at::get_num_threads());
  // Direct writes are safe when no block spans two work items: blocks never span rows, and
  // a row is either cut at block boundaries (several blocks per row) or not cut at all.
  const int64_t row_len = l.sizes.empty() ? 1 : l.sizes.back();
  const int64_t rows = l.sizes.empty() ? 1 : x.numel() / row_len;
  const bool several_blocks_per_row = !l.sizes.empty() && l.block.back() < row_len;
  if (!rows_share_blocks && (several_blocks_per_row || rows >= 4 * threads)) {
    forEachSegment(l, x.numel(), /*align_tiles=*/true, [&](int64_t off, int64_t n, int64_t qo, int64_t qs) {
      fn(xb + off * es, n, mn + qo, mx + qo, qs);
    });
    return;
  }
  // Otherwise each chunk of the work folds into its own copy, merged below; a single chunk
  // when copies for every thread would be large.
  const int64_t chunks = nb * threads <= (int64_t(1) << 20) ? threads : 1;
  std::vector<float> lmn(nb * chunks, kInf), lmx(nb * chunks, -kInf);
  forEachSegmentChunked(l, x.numel(), chunks, [&](int64_t c, int64_t off, int64_t n, int64_t qo, int64_t qs) {
    fn(xb + off * es, n, lmn.data() + c * nb + qo, lmx.data() + c * nb + qo, qs);
  });
  for (int64_t c = 0; c < chunks; ++c) {
    for (int64_t i = 0; i < nb; ++i) {
      const float a = lmn[c * nb + i], b = lmx[c * nb + i];
      mn[i] = (std::isnan(a) || a < mn[i]) ? a : mn[i];
      mx[i] = (std::isnan(b) || b > mx[i]) ? b : mx[i];
    }
  }
}

std::tuple<at::Tensor, at::Tensor> chooseQParamsAffineCpu(
    const at::Tensor& input, c10::string_view mapping_type, at::IntArrayRef block_size,
    at::ScalarType target_dtype, std::optional<int64_t> quant_min, std::optional<int64_t> quant_max,
    std::optional<double> eps, std::optional<at::ScalarType> scale_dtype,
    std::optional<at::ScalarType> zero_point_dtype, c10::string_view zero_point_domain) {
  const ChooseQParamsSpec spec = prepareChooseQParams(input, mapping_type, target_dtype, quant_min, quant_max,
                                                      scale_dtype, zero_point_dtype, zero_point_domain);
  const BlockLayout layout = chooseQParamsLayout(input, block_size);
  const at::Tensor x = input.contiguous();
  at::Tensor min_val = at::empty({layout.num_blocks}, x.options().dtype(at::kFloat));
  at::Tensor max_val = at::empty({layout.num_blocks}, x.options().dtype(at::kFloat));
  blockMinMax(x, layout, min_val.data_ptr<float>(), max_val.data_ptr<float>());
  return finishChooseQParams(min_val, max_val, layout, spec, eps);
}

}  // namespace
}  // namespace pt2q

TORCH_LIBRARY_IMPL(pt2q, CPU, m) {
  m.impl("choose_qparams_affine", &pt2q::chooseQParamsAffineCpu);
  m.impl("quantize_affine", &pt2q::quantizeAffineCpu);
  m.impl("dequantize_affine", &pt2q::dequantizeAffineCpu);
  m.impl("fake_quantize_affine", &pt2q::fakeQuantizeAffineCpu);
  m.impl("fake_quantize_affine_cachemask", &pt2q::fakeQuantizeAffineCachemaskCpu);
}
