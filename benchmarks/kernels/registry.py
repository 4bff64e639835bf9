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


def time_call(fn, min_time_s=0.25, repeats=5, stat=statistics.median):
    """`stat` (median unless told) over `repeats` of the mean time per call over >= min_time_s
    of calls."""
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
    return stat(samples)


def measure_bandwidth(nbytes=256 << 20, min_time_s=0.5, repeats=7, stat=statistics.median):
    """Memory bandwidth of this machine now, in bytes per second, as the larger of two probes
    over `nbytes` buffers (8x the last-level cache here): a multi-threaded copy counting bytes
    read + written (its stores also read each destination line first, so it understates) and a
    read-only sum. Returns (bandwidth, {probe: bytes per second})."""
    src = torch.ones(nbytes // 4, dtype=torch.float32)
    dst = torch.empty_like(src)
    probes = {
        "copy (read + write)": 2 * nbytes / time_call(lambda: dst.copy_(src), min_time_s, repeats, stat),
        "sum (read)": nbytes / time_call(lambda: src.sum(), min_time_s, repeats, stat),
    }
    return max(probes.values()), probes


def bandwidth_line(bandwidth, probes) -> str:
    """The header line every benchmark prints for measure_bandwidth's result."""
    return ("# measured memory bandwidth: " + ", ".join(f"{k} {v / 1e9:.1f} GB/s" for k, v in probes.items())
            + f"; using {bandwidth / 1e9:.1f} GB/s")


def run(cases, bandwidth, adjacent_probe=False):
    """Times every case. With adjacent_probe, each group is bracketed by bandwidth probes (a
    shared VM's bandwidth and speed drift by tens of percent within minutes, so the probes next
    to the timings are the physical limit at that moment): "% of BW" is against the better of
    the probes just before and just after the group, and both the probes and the cases take
    the best of their samples (the least disturbed); the row keeps the probe as "probe GB/s"."""
    rows = []
    baselines = {}
    group_bw = {}

    def probe():
        return measure_bandwidth(min_time_s=0.1, repeats=5, stat=min)[0]

    for i, c in enumerate(cases):
        if adjacent_probe and c.group not in group_bw:
            group_bw[c.group] = probe()
        c.result_s = time_call(c.fn, min_time_s=0.1, repeats=7, stat=min) if adjacent_probe else time_call(c.fn)
        if c.baseline:
            baselines[c.group] = c.result_s
        if adjacent_probe and (i + 1 == len(cases) or cases[i + 1].group != c.group):
            group_bw[c.group] = max(group_bw[c.group], probe())
    for c in cases:
        gbps = c.bytes_moved / c.result_s / 1e9
        base = baselines.get(c.group)
        bw = group_bw.get(c.group, bandwidth)
        rows.append({
            "group": c.group,
            "name": c.name,
            "ms": c.result_s * 1e3,
            "GB/s": gbps,
            "% of BW": 100 * c.bytes_moved / c.result_s / bw,
            "probe GB/s": bw / 1e9,
            "speedup": (base / c.result_s) if base else float("nan"),
        })
    return rows


def rebase(rows, bandwidth):
    """Recomputes "% of BW" against `bandwidth` (bytes per second)."""
    for r in rows:
        r["% of BW"] = 100 * r["GB/s"] * 1e9 / bandwidth
    return rows


def format_table(rows, best_bw=None):
    """Markdown table; with best_bw (bytes per second) a last column gives each row's fraction
    of that bandwidth too."""
    extra = best_bw is not None
    head = f"| {'case':<58} | {'ms':>8} | {'GB/s':>6} | {'% BW':>5} | {'vs base':>7} |" + (" % best |" if extra else "")
    lines = [head, "|" + "-" * 60 + "|" + "-" * 10 + "|" + "-" * 8 + "|" + "-" * 7 + "|" + "-" * 9 + "|"
             + ("-" * 8 + "|" if extra else "")]
    group = None
    for r in rows:
        if r["group"] != group:
            group = r["group"]
            title = f"**{group}**" + (f" (probe {r['probe GB/s']:.1f} GB/s)" if extra else "")
            lines.append(f"| {title:<58} |          |        |       |         |" + ("        |" if extra else ""))
        line = (f"| {r['name']:<58} | {r['ms']:8.3f} | {r['GB/s']:6.1f} | {r['% of BW']:5.1f} | "
                f"{r['speedup']:6.2f}x |")
        if extra:
            line += f" {100 * r['GB/s'] * 1e9 / best_bw:6.1f} |"
        lines.append(line)
    return "\n".join(lines)


def report(rows, bw, json_path=None, adjacent_probe=False):
    """Measures the bandwidth again and prints the table (optionally writing the rows as JSON).
    Without adjacent probes "% of BW" is rebased on the best probe of the run (the VM is shared);
    with them it stays against each group's own probe, and a last column gives the fraction of
    the best probe of the run as well."""
    bw_after, after = measure_bandwidth()
    print("# bandwidth again after the cases: " + ", ".join(f"{k} {v / 1e9:.1f} GB/s" for k, v in after.items()))
    best = max([bw, bw_after] + [r.get("probe GB/s", 0) * 1e9 for r in rows])
    if adjacent_probe:
        probes = sorted({round(r["probe GB/s"], 1) for r in rows})
        print(f"# % BW is against the better probe just before and after each group ({probes[0]}-{probes[-1]} GB/s); "
              f"% best against the best probe of the run, {best / 1e9:.1f} GB/s")
        print(format_table(rows, best))
    else:
        print(f"# % BW is against the best probe of the run: {best / 1e9:.1f} GB/s")
        print(format_table(rebase(rows, best)))
    if json_path:
        with open(json_path, "w") as f:
            json.dump({"bandwidth_GBps": best / 1e9, "rows": rows}, f, indent=1)
