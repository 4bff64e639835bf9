"""MX-weight linear on CUDA: pt2q.linear_mx with MXINT8, MXFP8-E4M3, MXFP6-E2M3 and MXFP4 weights
(block 32, mx_quantize's storage) and bf16 x (--dtype fp16 / fp32: past the GEMVs x goes as two /
three bf16 pieces to cuBLAS's bf16 GEMM with fp32 results; "vs" is then against F.linear in x's
dtype). Decode (up to 16 rows): the GEMVs (tensor cores for
byte and 4-bit codes, CUDA cores for the others; the CUDA-core one also for byte / 4-bit codes with
PT2Q_CUDA_LINEAR_MX_MMA=0). More rows: the wgmma GEMM (byte and 4-bit codes, up to 256 rows or
PT2Q_CUDA_LINEAR_MX_GEMM_MAX_ROWS; byte codes also with their table decode,
PT2Q_CUDA_LINEAR_MX_TABLE=1) and the weight dequantized to bf16 for cuBLAS
(PT2Q_CUDA_LINEAR_MX_GEMM=0). All against the path they replaced (mx_dequantize to fp32, then the
fp32 matmul; PT2Q_CUDA_LINEAR_MX_GEMV=0) and against bf16 F.linear, in the same run, on the
issue's shapes.

Timing as bench_linear_woq_cuda.py: each case a CUDA graph of 64 calls cycling through enough
weight copies to exceed the L2, median replay / 64; "% BW": codes + scales + x + y over the time,
against a device-to-device copy probe in the same run."""

from __future__ import annotations

import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pt2q  # noqa: E402,F401
from bench_linear_woq_cuda import SHAPES, copies, copy_probe, print_rows, time_cases, with_env  # noqa: E402

P = torch.ops.pt2q
FORMATS = ["int8", "fp8_e4m3", "fp6_e2m3", "fp4_e2m1"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--m", default="1,8,16", help="rows of x, comma-separated")
    ap.add_argument("--no-old", action="store_true", help="leave out the dequantize + fp32 matmul path")
    ap.add_argument("--dtype", choices=["bf16", "fp16", "fp32"], default="bf16",
                    help="x's dtype; fp16 / fp32 past the GEMVs: x as bf16 pieces for cuBLAS with fp32 results")
    ap.add_argument("--gemm-max-rows", type=int, default=256,
                    help="PT2Q_CUDA_LINEAR_MX_GEMM_MAX_ROWS for the GEMM's cases past 16 rows")
    args = ap.parse_args()
    m_list = [int(v) for v in args.m.split(",")]
    xt = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[args.dtype]
    es = torch.empty(0, dtype=xt).element_size()
    bw0 = copy_probe()
    rows = []
    for n, k in SHAPES:
        g = torch.Generator(device="cuda").manual_seed(0)
        w = torch.randn(n, k, device="cuda", generator=g) * 0.02
        dense = copies(lambda: w.to(xt), es * n * k)
        stores = {}
        for fmt in FORMATS:
            codes, scales = P.mx_quantize(w, fmt)
            nbytes = codes.numel() * codes.element_size() + scales.numel()
            stores[fmt] = (copies(lambda c=codes, s=scales: (c.clone(), s.clone()), nbytes), nbytes)
        for m in m_list:
            x = torch.randn(m, k, device="cuda", dtype=xt)
            io = es * m * (k + n)
            cases = [(f"{args.dtype} F.linear", lambda i: F.linear(x, dense[i % len(dense)]), es * n * k + io)]
            for fmt in FORMATS:
                st, nbytes = stores[fmt]
                run = lambda i, st=st, fmt=fmt: P.linear_mx(x, *st[i % len(st)], fmt)  # noqa: E731
                if not args.no_old and m <= 256:  # the fp32 matmul takes ms past that
                    cases.append((f"linear_mx {fmt} (dequantize + fp32 matmul)",
                                  with_env(run, PT2Q_CUDA_LINEAR_MX_GEMV=0), nbytes + io))
                if m > (8 if xt == torch.float32 else 16) and xt != torch.bfloat16:
                    cases.append((f"linear_mx {fmt} (dequantize bf16, x as bf16 pieces, cuBLAS fp32 out)", run,
                                  nbytes + io))
                    continue
                if m > 16:
                    if fmt != "fp6_e2m3":
                        cases.append((f"linear_mx {fmt} (wgmma GEMM)",
                                      with_env(run, PT2Q_CUDA_LINEAR_MX_GEMM_MAX_ROWS=args.gemm_max_rows),
                                      nbytes + io))
                    if fmt in ("int8", "fp8_e4m3"):
                        cases.append((f"linear_mx {fmt} (wgmma GEMM, table decode)",
                                      with_env(run, PT2Q_CUDA_LINEAR_MX_GEMM_MAX_ROWS=args.gemm_max_rows,
                                               PT2Q_CUDA_LINEAR_MX_TABLE=1), nbytes + io))
                    cases.append((f"linear_mx {fmt} (dequantize bf16 + cuBLAS)",
                                  with_env(run, PT2Q_CUDA_LINEAR_MX_GEMM=0), nbytes + io))
                    continue
                cases.append((f"linear_mx {fmt} (GEMV)", run, nbytes + io))
                if fmt != "fp6_e2m3" and m <= 8:
                    cases.append((f"linear_mx {fmt} (CUDA-core GEMV)", with_env(run, PT2Q_CUDA_LINEAR_MX_MMA=0),
                                  nbytes + io))
            time_cases(f"N={n} K={k} M={m}", cases, rows)
    print_rows(rows, bw0, copy_probe())


if __name__ == "__main__":
    main()
