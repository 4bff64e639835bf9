"""MX-weight linear on CPU: pt2q.linear_mx with MXINT8, MXFP8-E4M3, MXFP6-E2M3 and MXFP4 weights
(block 32, mx_quantize's storage), the input either float or MX-INT8 fake-quantized inside the op,
against F.linear with bf16 weights (the baseline) and fp32 weights, and against the unfused
mx_dequantize -> F.linear the converted (not lowered) graph runs, for the native-linear issue's
Llama-style shapes and row counts, fp32 activations (and bf16 ones for MXINT8 / MXFP4), with the bytes-over-bandwidth floor from
probes bracketing each group (weights rotated through 256 MiB, as bench_linear_woq.py).

Bytes moved: codes + E8M0 scales (MXFP4: 4.25 bits per weight), x and y. The issue's goal at
M = 1: MXFP4 and MXINT8 weights faster than bf16 F.linear by at least 0.6x the ratio of the bytes
(16 / 4.25 * 0.6 = 2.26x for MXFP4, 16 / 8.25 * 0.6 = 1.16x for MXINT8)."""

from __future__ import annotations

import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pt2q  # noqa: E402,F401
from bench_affine import _reexec_with_caching_malloc  # noqa: E402
from bench_linear_woq import linear_bench_main, rotating  # noqa: E402
from registry import Case  # noqa: E402

P = torch.ops.pt2q
FORMATS = ["int8", "fp8_e4m3", "fp6_e2m3", "fp4_e2m1"]


def cases(shapes, rows, formats=FORMATS):
    out = []
    for n, k in shapes:
        g = torch.Generator().manual_seed(0)
        w = torch.randn(n, k, generator=g) * 0.02
        dense = rotating(lambda: w.to(torch.bfloat16), n * k * 2)
        dense32 = rotating(lambda: w.clone(), n * k * 4)
        stores = {}
        for fmt in formats:
            codes, scales = P.mx_quantize(w, fmt)
            nbytes = codes.numel() * codes.element_size() + scales.numel()
            stores[fmt] = (rotating(lambda c=codes, s=scales: (c.clone(), s.clone()), nbytes), nbytes)
        for m in rows:
            x = torch.randn(m, k)
            xb = x.to(torch.bfloat16)
            group = f"N={n} K={k} M={m} float32 x"
            io = m * (k + n) * 4
            out.append(Case(group, "F.linear, bfloat16 (x, weight)", lambda x=xb, d=dense: F.linear(x, d()),
                            n * k * 2 + m * (k + n) * 2, baseline=True))
            out.append(Case(group, "F.linear, float32 weight", lambda x=x, d=dense32: F.linear(x, d()), n * k * 4 + io))
            for fmt in formats:
                store, nbytes = stores[fmt]
                out.append(Case(group, f"mx_dequantize -> F.linear, {fmt}",
                                lambda x=x, s=store, f=fmt: F.linear(x, P.mx_dequantize(*s(), f)), nbytes + io))
                out.append(Case(group, f"pt2q.linear_mx, {fmt} weight",
                                lambda x=x, s=store, f=fmt: P.linear_mx(x, *s(), f), nbytes + io))
                out.append(Case(group, f"pt2q.linear_mx, {fmt} weight, MXINT8 x",
                                lambda x=x, s=store, f=fmt: P.linear_mx(x, *s(), f, 32, None, "int8"), nbytes + io))
                if fmt in ("int8", "fp4_e2m1"):  # bf16 x: from 17 rows the bf16 GEMM on decoded tiles
                    out.append(Case(group, f"pt2q.linear_mx, {fmt} weight, bf16 x",
                                    lambda x=xb, s=store, f=fmt: P.linear_mx(x, *s(), f), nbytes + io // 2))
                if fmt == "int8":  # a bf16 model with MXINT8 x: the integer kernel too
                    out.append(Case(group, f"pt2q.linear_mx, {fmt} weight, bf16 x, MXINT8 x",
                                    lambda x=xb, s=store, f=fmt: P.linear_mx(x, *s(), f, 32, None, "int8"),
                                    nbytes + io // 2))
    return out


def main():
    _reexec_with_caching_malloc()  # before argv loses --formats
    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--formats", nargs="+", choices=FORMATS, default=FORMATS)
    known, rest = ap.parse_known_args()
    sys.argv = sys.argv[:1] + rest
    linear_bench_main(__doc__, lambda shapes, rows: cases(shapes, rows, known.formats))


if __name__ == "__main__":
    main()
