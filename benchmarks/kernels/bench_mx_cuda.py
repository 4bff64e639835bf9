"""MX / BFP ops on CUDA against the device's memory bandwidth, measured in the same run.

Bandwidth probe: a device-to-device copy (`y.copy_(x)`, bytes read + written) of the same size
as the cases, before and after them; each case reports the bytes it must move (input read once,
output written once: fake-quantize 2 x 4 B per fp32 element; quantize x + codes + scale bytes;
dequantize codes + scale bytes + output) over its median time per call (CUDA events around 8 calls
queued back to back, so no launch gaps; 100 such medians after 20 warm-up calls; inputs larger than
the 50 MiB L2 so every call streams from HBM), as GB/s and as a share of the better probe. The issue's goal: MX fake-quantize at >= 80 % of that bandwidth.

    python benchmarks/kernels/bench_mx_cuda.py [--elements N] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch

import pt2q  # noqa: F401

P = torch.ops.pt2q


def time_ms(fn, warmup=20, reps=100, calls=8):
    """Median over `reps` of the time per call of `calls` calls queued back to back: while the GPU
    runs one, Python queues the next, so the host's launch time (tens of us per op, a fifth of a
    0.1 ms kernel) stays out, as the issue asks ("launch gaps out")."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        fn()  # the queue is ahead of the first event
        a.record()
        for _ in range(calls):
            fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / calls)
    return statistics.median(times)


def copy_probe(nbytes):
    x = torch.empty(nbytes // 4, device="cuda").uniform_()
    y = torch.empty_like(x)
    return 2 * nbytes / time_ms(lambda: y.copy_(x)) / 1e6  # GB/s


def code_bytes(fmt, n):
    bits = {"fp4_e2m1": 4, "int4": 4, "fp6_e2m3": 6, "fp6_e3m2": 6, "int2": 2}.get(fmt, 8)
    return n * bits // 8


def cases(n):
    rows = 4096
    out = []
    for dtype in (torch.float32, torch.bfloat16):
        x = (torch.randn(rows, n // rows, device="cuda") * 3).to(dtype)
        size = x.element_size()
        for fmt in ("int8", "fp8_e4m3", "fp6_e2m3", "fp4_e2m1"):
            for rounding in ("nearest", "stochastic"):
                out.append((f"mx_fake_quantize {fmt} {rounding} {str(dtype)[6:]} last axis",
                            lambda x=x, f=fmt, r=rounding: P.mx_fake_quantize(x, f, 32, -1, r, "floor", False, 1),
                            2 * n * size))
            out.append((f"mx_fake_quantize {fmt} nearest {str(dtype)[6:]} axis 0",
                        lambda x=x, f=fmt: P.mx_fake_quantize(x, f, 32, 0), 2 * n * size))
            out.append((f"mx_quantize {fmt} {str(dtype)[6:]} last axis",
                        lambda x=x, f=fmt: P.mx_quantize(x, f), n * size + code_bytes(fmt, n) + n // 32))
            out.append((f"mx_quantize {fmt} {str(dtype)[6:]} axis 0",
                        lambda x=x, f=fmt: P.mx_quantize(x, f, 32, 0), n * size + code_bytes(fmt, n) + n // 32))
            c, s = P.mx_quantize(x, fmt)
            out.append((f"mx_dequantize {fmt} -> {str(dtype)[6:]} last axis",
                        lambda c=c, s=s, f=fmt, d=dtype: P.mx_dequantize(c, s, f, 32, -1, None, d),
                        code_bytes(fmt, n) + n // 32 + n * size))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--elements", type=int, default=64 << 20, help="elements per input (default 64 Mi)")
    ap.add_argument("--json", help="also write the rows as JSON here")
    args = ap.parse_args()
    n = args.elements
    before = copy_probe(4 * n)
    rows = [(name, time_ms(fn), nbytes) for name, fn, nbytes in cases(n)]
    after = copy_probe(4 * n)
    bw = max(before, after)
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}; {n} elements; "
          f"copy probe {before:.0f} / {after:.0f} GB/s (read + write)")
    print(f"| {'case':<52} | {'ms':>8} | {'GB/s':>7} | {'% BW':>5} |")
    print(f"|{'-' * 54}|{'-' * 10}|{'-' * 9}|{'-' * 7}|")
    table = []
    for name, ms, nbytes in rows:
        gbs = nbytes / ms / 1e6
        table.append({"case": name, "ms": ms, "gbs": gbs, "pct_bw": 100 * gbs / bw})
        print(f"| {name:<52} | {ms:8.3f} | {gbs:7.0f} | {100 * gbs / bw:5.1f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"copy_probe_gbs": [before, after], "rows": table}, f, indent=1)


if __name__ == "__main__":
    main()
