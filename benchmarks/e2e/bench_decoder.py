"""End to end: a 12-layer decoder-only transformer (Llama-style: RMSNorm, attention with rotary-free
multi-head attention over a 256-token KV cache, SwiGLU MLP; hidden 1024, MLP 2816, 16 heads),
one decode step at batch 1, tokens per second for the float model (fp32 and bf16) and for each
scheme quantized with pt2q's PT2E flow and lowered to the native linears
(convert_pt2e(..., lower_to_native=True)). The KV cache is a fixed buffer (each step attends to
256 cached tokens and does not append), so a step costs what a real decode step costs without
the cache update. Also prints each model's weight bytes and its max |difference| from the fp32
model's output on the same input, and the bytes-over-bandwidth floor of the weights.

    python benchmarks/e2e/bench_decoder.py [--layers 12] [--hidden 1024] [--steps 50]
"""

from __future__ import annotations

import argparse
import copy
import gc
import os
import statistics
import sys
import time
import warnings

import torch
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "kernels"))
import pt2q  # noqa: E402
from bench_affine import run_header  # noqa: E402
from pt2q.quantizer import (  # noqa: E402
    Int4WeightOnlyQuantizer,
    Int8DynActInt4WeightQuantizer,
    Int8DynActInt8WeightQuantizer,
    Int8WeightOnlyQuantizer,
)
from registry import measure_bandwidth  # noqa: E402


class RMSNorm(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight


class Block(nn.Module):
    def __init__(self, d, ffn, heads, context):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = RMSNorm(d), RMSNorm(d)
        self.q, self.k, self.v, self.o = (nn.Linear(d, d, bias=False) for _ in range(4))
        self.gate, self.up = nn.Linear(d, ffn, bias=False), nn.Linear(d, ffn, bias=False)
        self.down = nn.Linear(ffn, d, bias=False)
        self.register_buffer("k_cache", torch.randn(1, heads, context, d // heads) * 0.5)
        self.register_buffer("v_cache", torch.randn(1, heads, context, d // heads) * 0.5)

    def forward(self, x):
        b, t, d = x.shape
        h = self.norm1(x)
        q = self.q(h).view(b, t, self.heads, -1).transpose(1, 2)
        k = torch.cat([self.k_cache, self.k(h).view(b, t, self.heads, -1).transpose(1, 2)], 2)
        v = torch.cat([self.v_cache, self.v(h).view(b, t, self.heads, -1).transpose(1, 2)], 2)
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        x = x + self.o(a.transpose(1, 2).reshape(b, t, d))
        h = self.norm2(x)
        return x + self.down(torch.nn.functional.silu(self.gate(h)) * self.up(h))


class Decoder(nn.Module):
    def __init__(self, layers, d, ffn, heads, context):
        super().__init__()
        self.blocks = nn.Sequential(*(Block(d, ffn, heads, context) for _ in range(layers)))
        self.norm = RMSNorm(d)

    def forward(self, x):
        return self.norm(self.blocks(x))


def weight_bytes(m):
    seen, total = set(), 0
    for name, t in list(m.named_parameters()) + list(m.named_buffers()):
        if "cache" in name or t.data_ptr() in seen:
            continue
        seen.add(t.data_ptr())
        total += t.numel() * t.element_size()
    return total


def step_ms(m, x, steps):
    with torch.no_grad():
        for _ in range(3):
            m(x)
        times = []
        for _ in range(steps):
            t = time.perf_counter()
            m(x)
            times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def main():
    warnings.filterwarnings("ignore")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--ffn", type=int, default=2816)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--context", type=int, default=256)
    ap.add_argument("--steps", type=int, default=50)
    args = ap.parse_args()
    torch.manual_seed(0)
    bw, _ = measure_bandwidth()
    print(run_header(f"linear kernels: {pt2q._C.info.linear_cpu_kernels()}; bandwidth (read) {bw / 1e9:.1f} GB/s"))
    print(f"# decoder: {args.layers} layers, hidden {args.hidden}, MLP {args.ffn}, {args.heads} heads, "
          f"KV cache {args.context} tokens; batch 1, one token per step")
    model = Decoder(args.layers, args.hidden, args.ffn, args.heads, args.context).eval()
    for p in model.parameters():
        if p.dim() == 2:
            nn.init.normal_(p, std=args.hidden ** -0.5)
    x = torch.randn(1, 1, args.hidden)
    with torch.no_grad():
        ref = model(x)
    print("| model | weights MB | ms / token | tokens / s | vs float fp32 | weights / BW floor ms | "
          "% of floor | max abs diff vs fp32 | prepare+convert s |")
    print("|---|---|---|---|---|---|---|---|---|")
    base = [None]

    def row(name, m, xi, t_flow):
        # One model at a time: a dozen copies of the float weights would not fit in memory.
        ms = step_ms(m, xi, args.steps)
        base[0] = base[0] or ms
        wb = weight_bytes(m)
        floor = wb / bw * 1e3
        with torch.no_grad():
            diff = (m(xi).float() - ref).abs().max().item()
        print(f"| {name} | {wb / 1e6:.1f} | {ms:.2f} | {1e3 / ms:.1f} | {base[0] / ms:.2f}x | {floor:.2f} | "
              f"{100 * floor / ms:.0f} % | {diff:.3g} | {'' if t_flow is None else f'{t_flow:.1f}'} |", flush=True)

    for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        m = model if dtype == torch.float32 else copy.deepcopy(model).to(dtype)
        row(f"float {name}", torch.export.export(m, (x.to(dtype),)).module(), x.to(dtype), None)
        del m
        gc.collect()
    schemes = [("int8 weight-only (linear_w8a16)", Int8WeightOnlyQuantizer),
               ("int4 g128 weight-only (linear_w4a16)", lambda: Int4WeightOnlyQuantizer(128)),
               ("int8 dyn act, int8 w (linear_w8a8)", Int8DynActInt8WeightQuantizer),
               ("int8 dyn act, int4 g128 w (linear_w4a8)", lambda: Int8DynActInt4WeightQuantizer(128))]
    for name, make_quantizer in schemes:
        for dtype in (torch.float32, torch.bfloat16):
            m = model if dtype == torch.float32 else copy.deepcopy(model).to(dtype)
            t = time.perf_counter()
            p = pt2q.prepare_pt2e(torch.export.export(m, (x.to(dtype),)).module(), make_quantizer())
            low = pt2q.convert_pt2e(p, lower_to_native=True)
            t_flow = time.perf_counter() - t
            del p, m
            gc.collect()
            row(f"{name}, {str(dtype)[6:]} x", low, x.to(dtype), t_flow)
            del low
            gc.collect()


if __name__ == "__main__":
    main()
