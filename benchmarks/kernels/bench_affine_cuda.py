"""Affine quantize / dequantize / fake-quantize on CUDA against the device's memory bandwidth,
measured in the same run (the issue's goal: affine fake-quantize at >= 80 % of it).

64 Mi-element inputs (4096 rows), fp32 and bf16, int8 codes, asymmetric: per tensor, per channel
along axis 0 (block [1, K]), per channel along the last axis (block [rows, 1]) and groups of 128
along the last axis (block [1, 128]). Bytes: input read once and output written once (plus the
mask for the cachemask variant); the copy probe and the timing are bench_mx_cuda.py's. "ATen" is
the same fake-quantize written as unfused ATen ops (x / s + z, round, clamp, - z, * s) in the
same run. choose_qparams_affine reads the input once (its time includes the host sync of its
NaN / Inf check); its baseline is pt2q's reference in the same run (ATen amin / amax on the
device), what it ran before it had a kernel.

    python benchmarks/kernels/bench_affine_cuda.py [--elements N] [--only SUBSTRING]
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

import pt2q  # noqa: F401

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_mx_cuda import copy_probe, time_ms  # noqa: E402

P = torch.ops.pt2q
REF = pt2q._C.reference


def layouts(rows, cols):
    return [("per tensor", [rows, cols], (1, 1)), ("per channel axis 0", [1, cols], (rows, 1)),
            ("per channel last axis", [rows, 1], (1, cols)), ("groups of 128 last axis", [1, 128], (rows, cols // 128))]


def cases(n):
    rows = 4096
    cols = n // rows
    out = []
    for dtype in (torch.float32, torch.bfloat16):
        x = (torch.randn(rows, cols, device="cuda") * 3).to(dtype)
        size = x.element_size()
        tag = str(dtype)[6:]
        for name, block, qshape in layouts(rows, cols):
            s = torch.rand(qshape, device="cuda") * 0.05 + 0.01
            z = torch.randint(-10, 10, qshape, device="cuda", dtype=torch.int32)
            out.append((f"fake_quantize {tag} {name}",
                        lambda x=x, b=block, s=s, z=z: P.fake_quantize_affine(x, b, s, z, torch.int8), 2 * n * size))
            q = P.quantize_affine(x, block, s, z, torch.int8)
            out.append((f"quantize {tag} -> int8 {name}",
                        lambda x=x, b=block, s=s, z=z: P.quantize_affine(x, b, s, z, torch.int8), n * size + n))
            out.append((f"dequantize int8 -> {tag} {name}",
                        lambda q=q, b=block, s=s, z=z, d=dtype: P.dequantize_affine(q, b, s, z, torch.int8,
                                                                                   output_dtype=d), n + n * size))
        s = torch.rand(rows, 1, device="cuda") * 0.05 + 0.01
        z = torch.randint(-10, 10, (rows, 1), device="cuda", dtype=torch.int32)
        out.append((f"fake_quantize_cachemask {tag} per channel axis 0",
                    lambda x=x, s=s, z=z: P.fake_quantize_affine_cachemask(x, [1, cols], s, z, torch.int8),
                    2 * n * size + n))
        out.append((f"ATen unfused fake-quantize {tag} per channel axis 0",
                    lambda x=x, s=s, z=z: ((x / s + z).round().clamp(-128, 127) - z) * s, 2 * n * size))
        for name, block, _ in layouts(rows, cols):
            for who, op in (("reference", REF.choose_qparams_affine), ("pt2q", P.choose_qparams_affine)):
                out.append((f"choose_qparams {tag} {name} ({who})",
                            lambda x=x, b=block, op=op: op(x, "asymmetric", b, torch.int8, None, None, None, None,
                                                           None, "int"), n * size))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--elements", type=int, default=64 << 20, help="elements per input (default 64 Mi)")
    ap.add_argument("--only", default="", help="time only the cases whose name contains this")
    args = ap.parse_args()
    n = args.elements
    before = copy_probe(4 * n)
    rows = [(name, time_ms(fn), nbytes) for name, fn, nbytes in cases(n) if args.only in name]
    after = copy_probe(4 * n)
    bw = max(before, after)
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}; {n} elements; "
          f"copy probe {before:.0f} / {after:.0f} GB/s (read + write)")
    print("| case | ms | GB/s | % BW |")
    print("|---|---|---|---|")
    for name, ms, nbytes in rows:
        gbs = nbytes / ms / 1e6
        print(f"| {name} | {ms:.3f} | {gbs:.0f} | {100 * gbs / bw:.1f} |")


if __name__ == "__main__":
    main()
