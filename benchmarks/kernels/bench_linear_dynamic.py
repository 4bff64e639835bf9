"""Dynamic int8-activation linear on CPU: pt2q.linear_w8a8 (per channel) and linear_w4a8 (int4
groups of 128), activation quantization per token included, against F.linear with fp32 and bf16
weights (the baseline: bf16), torch._int_mm on activations already quantized (ATen's int8 GEMM,
oneDNN; its activation quantization not counted), torch._dyn_quant_matmul_4bit (ATen's own
int8-activation int4-weight linear; fp32 activations only, so it meets linear_w4a8 on fp32 x),
and pt2q.linear_w8a16 / linear_w4a16 on the
same packed weights, for Llama-style shapes and decode-to-prefill row counts, bf16 activations,
with the bytes-over-bandwidth floor from probes bracketing each group (weights rotated through
256 MiB, as bench_linear_woq.py)."""

from __future__ import annotations

import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pt2q  # noqa: E402,F401
from bench_linear_woq import GROUP, linear_bench_main, rotating  # noqa: E402
from registry import Case  # noqa: E402

P = torch.ops.pt2q


def cases(bits, shapes, rows):
    dt = torch.bfloat16
    out = []
    for n, k in shapes:
        g = torch.Generator().manual_seed(0)
        lo, hi = (-127, 128) if bits == 8 else (-8, 8)
        w = torch.randint(lo, hi, (n, k), dtype=torch.int8, generator=g)
        scales = torch.rand(n if bits == 8 else (n, k // GROUP), generator=g) * 0.01 + 1e-3
        pack = P.pack_weight_int8 if bits == 8 else P.pack_weight_int4
        packed = rotating(lambda: (pack(w), scales.clone()), n * k * bits // 8)
        dense = rotating(lambda: w.to(dt), n * k * 2)
        dense32 = rotating(lambda: w.float(), n * k * 4)
        plain = rotating(lambda: w.t().contiguous().t(), n * k)  # [N, K] int8, read as [K, N] by _int_mm
        dyn, woq = (P.linear_w8a8, P.linear_w8a16) if bits == 8 else (P.linear_w4a8, P.linear_w4a16)
        if bits == 4:
            u = (w.int() + 8).to(torch.uint8)  # ATen's layout: unsigned nibbles, two per byte, low first
            nib = (u[:, ::2] | (u[:, 1::2] << 4)).contiguous()
            aten_4bit = rotating(lambda: torch.ops.aten._dyn_quant_pack_4bit_weight(nib, scales, None, GROUP, k, n),
                                 n * k // 2)
        name = "W8A8" if bits == 8 else f"W4A8 g{GROUP}"
        for m in rows:
            x = torch.randn(m, k).to(dt)
            xq = torch.randint(-128, 128, (m, k), dtype=torch.int8)
            group = f"{name} N={n} K={k} M={m} bfloat16"
            q_bytes = n * k * bits // 8 + 4 * scales.numel() + m * (k + n) * 2
            out.append(Case(group, "F.linear, bfloat16 weight", lambda x=x, d=dense: F.linear(x, d()),
                            n * k * 2 + m * (k + n) * 2, baseline=True))
            out.append(Case(group, "F.linear, float32 (x, weight)", lambda x=x.float(), d=dense32: F.linear(x, d()),
                            n * k * 4 + m * (k + n) * 4))
            if bits == 8 and m > 16:  # torch._int_mm refuses M <= 16 on CPU
                out.append(Case(group, "torch._int_mm (x pre-quantized)", lambda xq=xq, w=plain: torch._int_mm(xq, w().t()),
                                n * k + m * k + m * n * 4))
            out.append(Case(group, f"pt2q.{woq.__name__.split('.')[-1]}", lambda x=x, f=woq, w=packed: f(x, *w()), q_bytes))
            out.append(Case(group, f"pt2q.{dyn.__name__.split('.')[-1]}", lambda x=x, f=dyn, w=packed: f(x, *w()), q_bytes))
            if bits == 4:  # ATen's own 8da4w (int8 per-token activations, int4 groups); fp32 x only
                xf = x.float()
                out.append(Case(group, "torch._dyn_quant_matmul_4bit (fp32 x)",
                                lambda xf=xf, w=aten_4bit, k=k, n=n: torch.ops.aten._dyn_quant_matmul_4bit(
                                    xf, w(), GROUP, k, n),
                                q_bytes + m * (k + n) * 2))
                out.append(Case(group, "pt2q.linear_w4a8 (fp32 x)", lambda xf=xf, w=packed: P.linear_w4a8(xf, *w()),
                                q_bytes + m * (k + n) * 2))
    return out


def main():
    linear_bench_main(__doc__, lambda shapes, rows: cases(8, shapes, rows) + cases(4, shapes, rows))


if __name__ == "__main__":
    main()
