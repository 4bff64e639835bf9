"""Weight-only linear on CPU: pt2q.linear_w8a16 (per channel) and linear_w4a16 (groups of 128)
against F.linear (fp32 and bf16 weights), torch._weight_int8pack_mm and
torch._weight_int4pack_mm_for_cpu, for Llama-style shapes and decode-to-prefill row counts, with
the bytes-over-bandwidth floor from probes bracketing each group.

Bytes moved: weights (int8 N*K or int4 N*K/2), scales (N*4 or N*K/128*4), activations and output
(M*(K+N)*dtype), with the
weights of every case rotated through a working set larger than the L3 (each call streams them
from memory, as a model's layers do). The
"% of BW" column is that floor over the measured time; "vs base" is against F.linear with the
activation dtype's float weight (the uncompressed model), measured in the same group."""

from __future__ import annotations

import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pt2q  # noqa: E402,F401
from bench_affine import _reexec_with_caching_malloc, run_header  # noqa: E402
from registry import Case, bandwidth_line, measure_bandwidth, report, run  # noqa: E402

P = torch.ops.pt2q
SHAPES = [(4096, 4096), (11008, 4096), (4096, 11008)]  # (N, K)
ROWS = [1, 4, 16, 64, 256]


# Every case cycles through enough copies of its weights to exceed the 32 MiB L3 several
# times over, so each call streams its weights from memory as a model's layers do.
WORKING_SET = 256 << 20


def rotating(make, nbytes):
    copies = [make() for _ in range(max(2, -(-WORKING_SET // nbytes)))]
    state = {"i": 0}

    def next_copy():
        state["i"] = (state["i"] + 1) % len(copies)
        return copies[state["i"]]

    return next_copy


def slow_aten_path(dt, m):
    """ATen's int8/int4 weight-only kernels with fp32 activations run 4-100x slower than fp32
    F.linear from M = 4 on (seconds per call at M = 256); they are timed at M <= 4 only."""
    return dt == torch.float32 and m > 4


GROUP = 128  # W4A16's group size


class Scheme:
    """One weight-only scheme: its codes, scales, pt2q op and the ATen kernel it is compared with."""

    def __init__(self, bits):
        self.bits = bits
        self.name = "W8A16" if bits == 8 else f"W4A16 g{GROUP}"

    def weights(self, n, k, g):
        if self.bits == 8:
            return (torch.randint(-127, 128, (n, k), dtype=torch.int8, generator=g),
                    torch.rand(n, generator=g) * 0.01 + 1e-3)
        return (torch.randint(-8, 8, (n, k), dtype=torch.int8, generator=g),
                torch.rand(n, k // GROUP, generator=g) * 0.01 + 1e-3)

    def dense(self, w, scales):
        n, k = w.shape
        return (w.float().reshape(n, scales.reshape(n, -1).shape[1], -1) * scales.reshape(n, -1, 1)).reshape(n, k)

    def pt2q(self, w, scales):
        pack, linear = ((P.pack_weight_int8, P.linear_w8a16) if self.bits == 8 else
                        (P.pack_weight_int4, P.linear_w4a16))
        packed = rotating(lambda: (pack(w), scales.clone()), w.numel() * self.bits // 8)
        return f"pt2q.{linear.__name__.split('.')[-1]}", lambda x: linear(x, *packed())

    def aten(self, w, scales, dt):
        if self.bits == 8:
            plain, s = rotating(lambda: w.clone(), w.numel()), scales.to(dt)
            return "torch._weight_int8pack_mm", lambda x: torch._weight_int8pack_mm(x, plain(), s)
        # tinygemm's CPU layout: unsigned codes, w = (q - 8) * s + z with z = 0
        tiny = rotating(lambda: torch._convert_weight_to_int4pack_for_cpu(w.int() + 8, 1), w.numel() // 2)
        sz = torch.stack([scales.t(), torch.zeros_like(scales.t())], -1).contiguous().to(dt)
        return "torch._weight_int4pack_mm_for_cpu", lambda x: torch._weight_int4pack_mm_for_cpu(x, tiny(), GROUP, sz)


def cases(scheme, shapes, rows, dtypes):
    out = []
    for n, k in shapes:
        w, scales = scheme.weights(n, k, torch.Generator().manual_seed(0))
        ours, ours_fn = scheme.pt2q(w, scales)
        w_f32 = scheme.dense(w, scales)
        for dt in dtypes:
            size = torch.empty((), dtype=dt).element_size()
            dense = rotating(lambda dt=dt: w_f32.to(dt), n * k * size)
            aten, aten_fn = scheme.aten(w, scales, dt)
            for m in rows:
                x = torch.randn(m, k).to(dt)
                group = f"{scheme.name} N={n} K={k} M={m} {str(dt).replace('torch.', '')}"
                q_bytes = n * k * scheme.bits // 8 + 4 * scales.numel() + m * (k + n) * size
                out.append(Case(group, f"F.linear, {str(dt).replace('torch.', '')} weight",
                                lambda x=x, d=dense: F.linear(x, d()), n * k * size + m * (k + n) * size, baseline=True))
                if not slow_aten_path(dt, m):
                    out.append(Case(group, aten, lambda x=x, f=aten_fn: f(x), q_bytes))
                out.append(Case(group, ours, lambda x=x, f=ours_fn: f(x), q_bytes))
                if scheme.bits == 4 and dt == torch.float32 and m < 64:
                    for prec in FP32_PRECISIONS:
                        out.append(Case(group, f"{ours}, precision {prec}",
                                        lambda x=x, f=ours_fn, p=prec: at_precision(p, f, x), q_bytes))
    return out


# W4A16 with fp32 x also runs under torch's reduced fp32 matmul precisions, which let the
# AVX512_BF16 kernel split x into bf16 parts (kernels/README.md); each call sets and restores the
# setting (two Python calls, ~1 us, counted in its time).
FP32_PRECISIONS = ("high", "medium")


def at_precision(prec, f, x):
    torch.set_float32_matmul_precision(prec)
    try:
        return f(x)
    finally:
        torch.set_float32_matmul_precision("highest")


def linear_bench_main(doc, build_cases):
    """The command line of the linear benchmarks: `build_cases(shapes, rows)` gives the cases."""
    _reexec_with_caching_malloc()
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="4096x4096 only, M in {1, 16, 256}")
    ap.add_argument("--rows", type=int, nargs="+", help=f"only these M (default {ROWS})")
    ap.add_argument("--json", help="also write the rows as JSON here")
    args = ap.parse_args()
    bw, probes = measure_bandwidth()
    print(run_header(f"linear kernels: {pt2q._C.info.linear_cpu_kernels()}"))
    print(bandwidth_line(bw, probes))
    shapes, rows = (SHAPES[:1], [1, 16, 256]) if args.quick else (SHAPES, ROWS)
    rows = args.rows or rows
    table = run(build_cases(shapes, rows), bw, adjacent_probe=True)
    report(table, bw, args.json, adjacent_probe=True)


def main():
    dtypes = (torch.float32, torch.bfloat16)
    linear_bench_main(__doc__, lambda shapes, rows: cases(Scheme(8), shapes, rows, dtypes) +
                      cases(Scheme(4), shapes, rows, dtypes))


if __name__ == "__main__":
    main()
