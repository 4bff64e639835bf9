"""MX fake-quantize, quantize and dequantize on CPU: pt2q's kernels against the reference path
(the same arithmetic in unfused ATen ops), with the memory bandwidth measured in the same run.

    python benchmarks/kernels/bench_mx.py [--dtype float32|bfloat16] [--json out.json]

64 MiB tensors: fp32 4096x4096 and bf16 8192x4096; int8, fp8_e4m3 and fp4_e2m1 elements,
block 32, along the last and the first axis. Bytes moved = read + write of the tensor
(2 x 64 MiB; the scales never leave the registers) for fake-quantize, read + codes + scale
bytes for quantize. Each group also times both kernels on an 8 MiB slice that stays in L3:
their compute-bound rate, which bounds what the memory-bound rows can reach on these cores.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pt2q  # noqa: E402
from bench_affine import _reexec_with_caching_malloc, run_header  # noqa: E402
from registry import Case, bandwidth_line, measure_bandwidth, report, run  # noqa: E402

P = torch.ops.pt2q
REF = pt2q._C.reference


def cases(dtypes=("float32", "bfloat16")):
    out = []
    for dt, shape in ((torch.float32, (4096, 4096)), (torch.bfloat16, (8192, 4096))):
        if str(dt).replace("torch.", "") not in dtypes:
            continue
        x = torch.randn(shape).to(dt)
        nbytes = 2 * x.numel() * x.element_size()
        for fmt in ("int8", "fp8_e4m3", "fp4_e2m1"):
            for axis, label in ((-1, "last axis"), (0, "first axis")):
                g = f"mx_fake_quantize {fmt} block 32, {label}, {tuple(shape)} {str(dt).replace('torch.', '')}"
                out.append(Case(g, "reference path (unfused ATen ops)",
                                lambda x=x, fmt=fmt, axis=axis: REF.mx_fake_quantize(x, fmt, 32, axis), nbytes,
                                baseline=True))
                out.append(Case(g, "pt2q.mx_fake_quantize",
                                lambda x=x, fmt=fmt, axis=axis: P.mx_fake_quantize(x, fmt, 32, axis), nbytes))
                # quantize: read x, write codes + scales (bytes as the format stores them)
                code_bytes = {"int8": 1, "fp8_e4m3": 1, "fp4_e2m1": 0.5}[fmt]
                qbytes = int(x.numel() * (x.element_size() + code_bytes + 1 / 32))
                out.append(Case(g, "pt2q.mx_quantize (codes + E8M0 scales)",
                                lambda x=x, fmt=fmt, axis=axis: P.mx_quantize(x, fmt, 32, axis), qbytes))
                # The same kernels on an 8 MiB slice that stays in the 32 MiB L3: their
                # compute-bound rate, the ceiling the memory-bound rows above can reach here.
                xs = x[: (8 << 20) // (x.size(1) * x.element_size())].contiguous()
                scale = xs.numel() / x.numel()
                out.append(Case(g, "  fake_quantize on an 8 MiB slice (in L3)",
                                lambda xs=xs, fmt=fmt, axis=axis: P.mx_fake_quantize(xs, fmt, 32, axis),
                                int(nbytes * scale)))
                out.append(Case(g, "  quantize on an 8 MiB slice (in L3)",
                                lambda xs=xs, fmt=fmt, axis=axis: P.mx_quantize(xs, fmt, 32, axis), int(qbytes * scale)))
                # dequantize: read codes + scales, write the tensor
                c, sc = P.mx_quantize(x, fmt, 32, axis)
                dg = f"mx_dequantize {fmt} block 32, {label}, {tuple(shape)} {str(dt).replace('torch.', '')}"
                dbytes = c.numel() * c.element_size() + sc.numel() + x.numel() * x.element_size()
                out.append(Case(dg, "reference path (unfused ATen ops)",
                                lambda c=c, sc=sc, fmt=fmt, axis=axis, dt=dt: REF.mx_dequantize(c, sc, fmt, 32, axis,
                                                                                               None, dt),
                                dbytes, baseline=True))
                out.append(Case(dg, "pt2q.mx_dequantize",
                                lambda c=c, sc=sc, fmt=fmt, axis=axis, dt=dt: P.mx_dequantize(c, sc, fmt, 32, axis,
                                                                                             None, dt), dbytes))
    return out


def main():
    _reexec_with_caching_malloc()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dtype", choices=["float32", "bfloat16"], action="append",
                    help="only this input dtype (repeatable; default both)")
    ap.add_argument("--json", help="also write the rows as JSON here")
    args = ap.parse_args()
    bw, probes = measure_bandwidth()
    print(run_header(f"CPU kernels: {pt2q._C.info.cpu_isa()}, MX kernels: {pt2q._C.info.mx_cpu_kernels()}"))
    print(bandwidth_line(bw, probes))
    rows = run(cases(tuple(args.dtype or ("float32", "bfloat16"))), bw, adjacent_probe=True)
    report(rows, bw, args.json, adjacent_probe=True)


if __name__ == "__main__":
    main()
