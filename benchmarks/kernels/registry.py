"""Tiny benchmark registry: a case names its bytes moved and a callable; the runner times it
and reports GB/s, the fraction of the memory bandwidth measured in the same run, and the
speedup over the baseline of its group."""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

import torch


@dataclass
class Case:
    group: str             # cases in one group compute the same thing
    name: str
    fn: Callable[[], object]
    bytes_moved: int       # minimum bytes a perfect kernel must read + write
    baseline: bool = False
    result_s: Optional[float] = field(default=None)


def time_call(fn, min_time_s=0.25, repeats=5):
    """Median over `repeats` of the mean time per call over >= min_time_s of calls."""
    fn()
    fn()
    t0 = time.perf_counter()
    fn()
    once = max(time.perf_counter() - t0, 1e-6)
    iters = max(1, int(min_time_s / once))
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        samples.append((time.perf_counter() - t0) / iters)
    return statistics.median(samples)


def measure_bandwidth(nbytes=256 << 20):
    """Memory bandwidth of this machine now, in bytes per second, as the larger of two probes
    over `nbytes` buffers (8x the last-level cache here): a multi-threaded copy counting bytes
    read + written (its stores also read each destination line first, so it understates) and a
    read-only sum. Returns (bandwidth, {probe: bytes per second})."""
    src = torch.ones(nbytes // 4, dtype=torch.float32)
    dst = torch.empty_like(src)
    probes = {
        "copy (read + write)": 2 * nbytes / time_call(lambda: dst.copy_(src), min_time_s=0.5, repeats=7),
        "sum (read)": nbytes / time_call(lambda: src.sum(), min_time_s=0.5, repeats=7),
    }
    return max(probes.values()), probes


def run(cases, bandwidth):
    rows = []
    baselines = {}
    for c in cases:
        c.result_s = time_call(c.fn)
        if c.baseline:
            baselines[c.group] = c.result_s
    for c in cases:
        gbps = c.bytes_moved / c.result_s / 1e9
        base = baselines.get(c.group)
        rows.append({
            "group": c.group,
            "name": c.name,
            "ms": c.result_s * 1e3,
            "GB/s": gbps,
            "% of BW": 100 * c.bytes_moved / c.result_s / bandwidth,
            "speedup": (base / c.result_s) if base else float("nan"),
        })
    return rows


def rebase(rows, bandwidth):
    """Recomputes "% of BW" against `bandwidth` (bytes per second)."""
    for r in rows:
        r["% of BW"] = 100 * r["GB/s"] * 1e9 / bandwidth
    return rows


def format_table(rows):
    head = f"| {'case':<58} | {'ms':>8} | {'GB/s':>6} | {'% BW':>5} | {'vs base':>7} |"
    lines = [head, "|" + "-" * 60 + "|" + "-" * 10 + "|" + "-" * 8 + "|" + "-" * 7 + "|" + "-" * 9 + "|"]
    group = None
    for r in rows:
        if r["group"] != group:
            group = r["group"]
            lines.append(f"| **{group}** {'':<{max(0, 55 - len(group))}} |          |        |       |         |")
        lines.append(f"| {r['name']:<58} | {r['ms']:8.3f} | {r['GB/s']:6.1f} | {r['% of BW']:5.1f} | "
                     f"{r['speedup']:6.2f}x |")
    return "\n".join(lines)


def report(rows, bw, json_path=None):
    """Measures the bandwidth again, rebases "% of BW" on the best probe of the run (the VM is
    shared), prints the table and optionally writes the rows as JSON."""
    bw_after, after = measure_bandwidth()
    print("# bandwidth again after the cases: " + ", ".join(f"{k} {v / 1e9:.1f} GB/s" for k, v in after.items()))
    bw = max(bw, bw_after)
    print(f"# % BW is against the best probe of the run: {bw / 1e9:.1f} GB/s")
    print(format_table(rebase(rows, bw)))
    if json_path:
        with open(json_path, "w") as f:
            json.dump({"bandwidth_GBps": bw / 1e9, "rows": rows}, f, indent=1)
