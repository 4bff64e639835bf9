// The panel loop of the int8-activation linears (linear_w8a8/w4a8, linear_q8, conv2d_q8): x rows
// already as unsigned bytes xu = q + 128 with one zero point per row, the weight streamed in
// panels sized to stay in L2; each panel's per-group weight sums first, then every x row meets it
// in tiles (cpu/linear_int8_impl.h), then the caller's epilogue on the panel's fp32 results
// (sum_g s_w * (q - zp) w per row and column) while they are in cache. Panels run in parallel.
#pragma once

#include <ATen/Parallel.h>

#include <algorithm>
#include <vector>

#include "kernels/cpu/linear_microkernels.h"
#include "kernels/linear_weight_only_args.h"

namespace pt2q {

/// A packed weight ("n4k16" or "n4k32") and its scales as [blocks, groups, 4 rows].
struct PanelWeight {
  const int8_t* packed = nullptr;
  int bits = 8;
  int64_t n = 0, kp = 0, groups = 1, group_chunks = 1;
  const float* scales4 = nullptr;
};

/// Scales [n] or [n, groups] as the [blocks, groups, 4] fp32 layout of PanelWeight (padding rows 0).
inline at::Tensor panelScales(const at::Tensor& scales, int64_t n, int64_t groups) {
  const int64_t np = roundUp(n, kPackRows);
  at::Tensor s4 = at::zeros({np, groups}, scales.options().dtype(at::kFloat));
  s4.slice(0, 0, n).copy_(scales.reshape({n, groups}));
  return s4.reshape({np / kPackRows, kPackRows, groups}).permute({0, 2, 1}).contiguous();
}

/// Runs every panel; `epilogue(r0, rows, c0, cols, tmp)` gets rows [r0, r0 + rows) of columns
/// [c0, c0 + cols) as tmp[(i - r0) * cols + c - c0] (cols may run past n in the last panel:
/// padding rows). Few panels and many rows (a conv with few output channels) also split the rows.
template <class Epilogue>
void runPanels(const PanelWeight& w, const uint8_t* xu, int64_t xs, int64_t m, const int32_t* zx,
               const Epilogue& epilogue) {
  constexpr int64_t kPanelBytes = 256 * 1024;  // weight bytes per panel (a quarter of a core's L2)
  constexpr int64_t kMinPanelBlocks = 4;       // one 4 x 4 tile
  constexpr int64_t kExpandRows = 4;           // int4 panels are decoded to int8 above this many rows
  constexpr int64_t kMinTaskRows = 64;         // rows per task when rows are split
  const int64_t nb = roundUp(w.n, kPackRows) / kPackRows, chunks = w.kp / packChunk(w.bits);
  const int64_t block_bytes = kPackRows * w.kp * w.bits / 8;
  // Many rows of int4: each panel is decoded to int8 once and runs the int8 kernels (the nibble
  // decode would otherwise repeat for every 4 rows of x).
  const bool expand = w.bits == 4 && m > kExpandRows;
  const int64_t panel_block_bytes = expand ? 2 * block_bytes : block_bytes;
  int64_t panel = std::max<int64_t>(kMinPanelBlocks, kPanelBytes / panel_block_bytes / kMinPanelBlocks * kMinPanelBlocks);
  const int64_t want_tasks = 4 * at::get_num_threads();
  // Few rows are bandwidth-bound: small panels keep every thread streaming.
  if (m <= 4) panel = kMinPanelBlocks;
  while (panel > kMinPanelBlocks && (nb + panel - 1) / panel < want_tasks) panel -= kMinPanelBlocks;
  const int64_t panels = (nb + panel - 1) / panel;
  const int64_t splits = std::max<int64_t>(1, std::min((want_tasks + panels - 1) / panels, m / kMinTaskRows));
  const int64_t task_rows = roundUp((m + splits - 1) / splits, 4);
  const int64_t row_tasks = (m + task_rows - 1) / task_rows;
  const auto& table = cpu::linearKernels();
  at::parallel_for(0, panels * row_tasks, 1, [&](int64_t t0, int64_t t1) {
    std::vector<int32_t> sums(panel * w.groups * 16);
    std::vector<float> tmp(std::min(m, task_rows) * panel * kPackRows);
    std::vector<int8_t> wide(expand ? panel * block_bytes * 2 : 0);
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t p = t / row_tasks, r0 = (t % row_tasks) * task_rows, rows = std::min(task_rows, m - r0);
      const int64_t b0 = p * panel, blocks = std::min(panel, nb - b0), cols = blocks * kPackRows;
      const int8_t* wb = w.packed + b0 * block_bytes;
      const float* s4 = w.scales4 + b0 * w.groups * kPackRows;
      const uint8_t* x = xu + r0 * xs;
      if (expand) {
        table.expand_int4(wb, blocks, chunks, wide.data());
        table.w8_sums(wide.data(), blocks, 2 * chunks, 2 * w.group_chunks, sums.data());
        table.w8_dot(wide.data(), blocks, 2 * chunks, 2 * w.group_chunks, x, xs, rows, zx + r0, s4, sums.data(),
                     tmp.data(), cols);
      } else {
        const auto sums_fn = w.bits == 4 ? table.w4_sums : table.w8_sums;
        const auto dot_fn = w.bits == 4 ? table.w4_dot : table.w8_dot;
        sums_fn(wb, blocks, chunks, w.group_chunks, sums.data());
        dot_fn(wb, blocks, chunks, w.group_chunks, x, xs, rows, zx + r0, s4, sums.data(), tmp.data(), cols);
      }
      epilogue(r0, rows, b0 * kPackRows, cols, tmp.data());
    }
  });
}

}  // namespace pt2q
