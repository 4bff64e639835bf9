"""Quantized linear on CUDA (decode): pt2q.linear_w8a16 / linear_w8a8 (per channel) and
linear_w4a16 / linear_w4a8 (groups of 128) against bf16 F.linear, ATen's int8 weight-only kernel
(`_weight_int8pack_mm`), tinygemm (`_weight_int4pack_mm`), `torch._int_mm` (int8 x given; it
refuses M <= 16) and fp8 `torch._scaled_mm` (fp8 x given), bf16 x, the issue's shapes, M in
{1, 4, 16, 128, 2048} (ATen's int8 kernel only to 16 rows, tinygemm to 128).

Each case is captured in a CUDA graph of 64 calls cycling through enough copies of its weights to
exceed the 50 MiB L2 (so every call streams its weight from HBM, and launch gaps are out of the
time); the time per call is the median graph replay over 20 replays / 64. Bytes: the weight
(codes + scales) + x + y; "% BW" against a device-to-device copy probe (read + write) of 256 MiB
in the same run. Goals (issue 8): W4A16 at M = 1 >= 75 % of bandwidth and >= 2x tinygemm, at
M = 16 <= 1.3x its own M = 1 time, at M = 128 faster than bf16 F.linear; W8A16 at M = 1 >= 75 %
and >= 1.8x bf16 F.linear.

From 64 rows (to kWoqGemmMaxRows) the weight-only ops run the GEMM that dequantizes in registers
(wgmma on the H100). In the same run: "(mma.sync GEMM)" is its other kernel
(PT2Q_CUDA_WOQ_WGMMA=0), "(dequantize + cuBLAS)" the path it replaced
(PT2Q_CUDA_WOQ_GEMM_MAX_ROWS=0), "(GEMM past its default rows)" the GEMM where cuBLAS is the
default, and --splits the GEMM at forced splits of K (PT2Q_CUDA_WOQ_SPLITS).
"""

from __future__ import annotations

import argparse
import os
import statistics

import torch
import torch.nn.functional as F

import pt2q  # noqa: F401

P = torch.ops.pt2q
SHAPES = [(4096, 4096), (11008, 4096), (4096, 11008), (14336, 4096)]
L2 = 50 << 20


def graph_ms(fn, calls=64, replays=20):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for i in range(3):
            fn(i)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(calls):
            fn(i)
    g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(replays):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / calls)
    return statistics.median(times)


def with_env(fn, **env):
    """fn with the environment set while it runs (graph capture runs the host code once)."""
    def run(i):
        old = {k: os.environ.get(k) for k in env}
        os.environ.update({k: str(v) for k, v in env.items()})
        try:
            return fn(i)
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    return run


def copy_probe():
    x = torch.empty(64 << 20, device="cuda")
    y = torch.empty_like(x)
    ms = graph_ms(lambda i: y.copy_(x), calls=8)
    return 2 * x.numel() * 4 / ms / 1e6


def copies(make, nbytes):
    return [make() for _ in range(max(2, 3 * L2 // max(nbytes, 1) + 1))]


def time_cases(group, cases, rows):
    """Times each (name, fn(i), bytes) of a group into rows; "bf16 F.linear" (first) is the baseline."""
    base = None
    for name, fn, nbytes in cases:
        try:
            ms = graph_ms(fn)
        except Exception as e:  # noqa: BLE001
            rows.append((group, name, None, None, None, repr(e)[:60]))
            continue
        base = ms if name.endswith(" F.linear") else base  # the float op in x's dtype
        rows.append((group, name, ms, nbytes / ms / 1e6, base / ms if base else None, ""))


def print_rows(rows, bw0, bw1):
    """The markdown table, "% BW" against the better of the two copy probes."""
    bw = max(bw0, bw1)
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}; copy probe {bw0:.0f} / {bw1:.0f} GB/s")
    print("| case | op | us | GB/s | % BW | vs bf16 |")
    print("|---|---|---|---|---|---|")
    for grp, name, ms, gbs, vs, err in rows:
        if ms is None:
            print(f"| {grp} | {name} | - | - | - | {err} |")
        else:
            print(f"| {grp} | {name} | {ms * 1e3:.1f} | {gbs:.0f} | {100 * gbs / bw:.1f} | {vs:.2f}x |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--m", default="1,4,16,128,2048", help="rows of x, comma-separated")
    ap.add_argument("--only", default="",
                    help="time only the ops whose name holds one of these comma-separated texts (and bf16 F.linear)")
    ap.add_argument("--splits", default="", help="also time the W4A16 / W8A16 GEMM at these splits of K (from 64 rows)")
    args = ap.parse_args()
    splits = [int(v) for v in args.splits.split(",") if v]
    m_list = [int(v) for v in args.m.split(",")]
    bw0 = copy_probe()
    rows = []
    for n, k in SHAPES:
        g = torch.Generator(device="cuda").manual_seed(0)
        w8 = torch.randint(-127, 128, (n, k), device="cuda", dtype=torch.int8, generator=g)
        w4 = torch.randint(-8, 8, (n, k), device="cuda", dtype=torch.int8, generator=g)
        s8 = torch.rand(n, device="cuda") * 0.01
        s4 = torch.rand(n, k // 128, device="cuda") * 0.01
        dense = copies(lambda: torch.randn(n, k, device="cuda", dtype=torch.bfloat16), 2 * n * k)
        p8 = copies(lambda: P.pack_weight_int8(w8), n * k)
        p4 = copies(lambda: P.pack_weight_int4(w4), n * k // 2)
        a8 = copies(lambda: w8.clone(), n * k)
        f8 = copies(lambda: (w8.float() / 32).to(torch.float8_e4m3fn), n * k)
        s8b = s8.to(torch.bfloat16)
        try:
            u = (w4 + 8).to(torch.uint8)
            tiny = copies(lambda: torch.ops.aten._convert_weight_to_int4pack((u[:, ::2] << 4 | u[:, 1::2]), 8),
                          n * k // 2)
            sz = torch.stack([s4.t(), torch.zeros_like(s4.t())], -1).to(torch.bfloat16).contiguous()
        except Exception as e:  # noqa: BLE001
            tiny, sz = None, repr(e)
        for m in m_list:
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            io = 2 * m * (k + n)
            cases = [("bf16 F.linear", lambda i: F.linear(x, dense[i % len(dense)]), 2 * n * k + io)]
            if m <= 16:  # ATen's int8 kernel takes milliseconds above that
                cases.append(("aten _weight_int8pack_mm",
                              lambda i: torch._weight_int8pack_mm(x, a8[i % len(a8)], s8b), n * k + 2 * n + io))
            cases.append(("pt2q linear_w8a16", lambda i: P.linear_w8a16(x, p8[i % len(p8)], s8), n * k + 4 * n + io))
            if tiny is not None and m <= 128:
                cases.append(("tinygemm _weight_int4pack_mm g128",
                              lambda i: torch._weight_int4pack_mm(x, tiny[i % len(tiny)], 128, sz),
                              n * k // 2 + 4 * n * k // 128 + io))
            cases.append(("pt2q linear_w4a16 g128", lambda i: P.linear_w4a16(x, p4[i % len(p4)], s4),
                          n * k // 2 + 4 * n * k // 128 + io))
            w8a16 = lambda i: P.linear_w8a16(x, p8[i % len(p8)], s8)  # noqa: E731
            w4a16 = lambda i: P.linear_w4a16(x, p4[i % len(p4)], s4)  # noqa: E731
            b8, b4 = n * k + 4 * n + io, n * k // 2 + 4 * n * k // 128 + io
            lift = {"PT2Q_CUDA_WOQ_GEMM_MAX_ROWS": 1 << 30}
            if m > 128:
                cases.append(("pt2q linear_w8a16 (GEMM past its default rows)", with_env(w8a16, **lift), b8))
                cases.append(("pt2q linear_w4a16 g128 (GEMM past its default rows)", with_env(w4a16, **lift), b4))
            if m >= 64:
                mma = {"PT2Q_CUDA_WOQ_WGMMA": 0, **lift}
                cases.append(("pt2q linear_w8a16 (mma.sync GEMM)", with_env(w8a16, **mma), b8))
                cases.append(("pt2q linear_w4a16 g128 (mma.sync GEMM)", with_env(w4a16, **mma), b4))
            if 64 <= m <= 128:
                off = {"PT2Q_CUDA_WOQ_GEMM_MAX_ROWS": 0}
                cases.append(("pt2q linear_w8a16 (dequantize + cuBLAS)", with_env(w8a16, **off), b8))
                cases.append(("pt2q linear_w4a16 g128 (dequantize + cuBLAS)", with_env(w4a16, **off), b4))
            for sp in splits if m >= 64 else []:
                on = {"PT2Q_CUDA_WOQ_SPLITS": sp, **lift}
                cases.append((f"pt2q linear_w8a16 splits={sp}", with_env(w8a16, **on), b8))
                cases.append((f"pt2q linear_w4a16 g128 splits={sp}", with_env(w4a16, **on), b4))
            cases.append(("pt2q linear_w8a8 (x quantized in the op)",
                          lambda i: P.linear_w8a8(x, p8[i % len(p8)], s8), n * k + 4 * n + io))
            cases.append(("pt2q linear_w4a8 g128 (x quantized in the op)",
                          lambda i: P.linear_w4a8(x, p4[i % len(p4)], s4), n * k // 2 + 4 * n * k // 128 + io))
            xq = torch.randint(-128, 128, (m, k), device="cuda", dtype=torch.int8)
            cases.append(("torch._int_mm (int8 x given)", lambda i: torch._int_mm(xq, a8[i % len(a8)].t()),
                          n * k + m * k + 4 * m * n))
            x8 = x.to(torch.float8_e4m3fn)
            one = torch.ones((), device="cuda")
            cases.append(("fp8 torch._scaled_mm (fp8 x given)",
                          lambda i: torch._scaled_mm(x8, f8[i % len(f8)].t(), one, one, out_dtype=torch.bfloat16),
                          n * k + m * k + 2 * m * n))
            if args.only:
                cases = [c for c in cases if c[0] == "bf16 F.linear" or any(o in c[0] for o in args.only.split(","))]
            time_cases(f"N={n} K={k} M={m}", cases, rows)
    print_rows(rows, bw0, copy_probe())


if __name__ == "__main__":
    main()
