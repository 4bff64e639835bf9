"""Static int8 conv2d and linear on CUDA: pt2q.conv2d_q8 / linear_q8 (int8 codes in and out; the
int8 tensor-core GEMV in its linear_q8 mode, conv2d through an im2col kernel) against, in the same
run: the float ops they replace (cuDNN / cuBLAS in bf16 and fp32), the quantize/dequantize chain of
an unlowered XNNPACK graph in eager mode (torch's dequantize_per_tensor -> fp32 op ->
quantize_per_tensor), pt2q's reference (what these ops ran on CUDA before: fp64 ATen) and, for
linears with more than 16 rows, torch._int_mm (int8 x int8 -> int32 only, no requantization). From
256 rows pt2q runs Hopper's wgmma GEMM; a second row times the mma.sync GEMM it replaced there.
Shapes are bench_static_q8.py's (the demo's small convolutions, ResNet-style ones, MobileNet
depthwise and a ResNeXt grouped convolution, Llama-style linears, residual blocks' closing convs
with their add and relu) plus decode rows. Times are
medians of CUDA-event timings of 8 calls queued back to back (bench_mx_cuda.time_ms: no launch
gaps); "x bf16" is the bf16 float op's time over the row's. Small ops are bound by the host's time
per call there, so a second column times bf16 F.conv2d / F.linear and pt2q's op (graph-safe: no
host sync) as a CUDA graph of 16 calls, which leaves the device's time alone.

    python benchmarks/kernels/bench_static_q8_cuda.py [--only SUBSTRING]   (e.g. conv, linear, M=512)
"""

from __future__ import annotations

import os
import sys

import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pt2q  # noqa: E402
from bench_mx_cuda import time_ms  # noqa: E402
from bench_static_q8 import ADDS, CONVS, GROUPED, RESIDUAL_CONVS  # noqa: E402

P = torch.ops.pt2q
QD = torch.ops.quantized_decomposed
REF = pt2q._C.reference
LINEARS = [(4096, 4096, 1), (4096, 4096, 16), (4096, 4096, 64), (4096, 4096, 256), (11008, 4096, 256),
           (4096, 4096, 512), (11008, 4096, 512), (4096, 4096, 2048), (11008, 4096, 2048)]


def mma_sync(fn):
    """fn with PT2Q_CUDA_Q8_WGMMA=0: the mma.sync GEMM where Hopper's wgmma GEMM would run."""
    def run():
        os.environ["PT2Q_CUDA_Q8_WGMMA"] = "0"
        try:
            return fn()
        finally:
            del os.environ["PT2Q_CUDA_Q8_WGMMA"]
    return run


def conv_rows(n, c, h, oc, k, s, groups=1):
    g = torch.Generator().manual_seed(0)
    x = torch.randint(-128, 128, (n, c, h, h), dtype=torch.int8, generator=g).cuda()
    w = torch.randint(-127, 128, (oc, c // groups, k, k), dtype=torch.int8, generator=g).cuda()
    sw, b = torch.rand(oc, device="cuda") * 0.01 + 1e-3, torch.randn(oc, device="cuda")
    packed = P.pack_weight_int8(w.permute(0, 2, 3, 1).reshape(oc, -1).contiguous())
    xf, wf = (x.float() - 3) * 0.02, w.float() * sw[:, None, None, None]
    xb, wb, bb = xf.bfloat16(), wf.bfloat16(), b.bfloat16()
    p = k // 2
    zeros = torch.zeros(oc, dtype=torch.int64, device="cuda")

    def chain():
        xd = QD.dequantize_per_tensor(x, 0.02, 3, -128, 127, torch.int8)
        wd = QD.dequantize_per_channel(w, sw, zeros, 0, -127, 127, torch.int8)
        return QD.quantize_per_tensor(F.conv2d(xd, wd, b, s, p, 1, groups), 0.05, 0, -128, 127, torch.int8)

    args = (0.02, 3, packed, sw, b, [k, k], [s, s], [p, p], [1, 1], 0.05, 0, -128, 127, groups)
    return [("F.conv2d bf16", lambda: F.conv2d(xb, wb, bb, s, p, 1, groups)),
            ("F.conv2d fp32", lambda: F.conv2d(xf, wf, b, s, p, 1, groups)),
            ("q/dq chain (eager)", chain),
            ("pt2q reference (fp64)", lambda: REF.conv2d_q8(x, *args)),
            ("pt2q.conv2d_q8", lambda: P.conv2d_q8(x, *args))] + (
        [("pt2q.conv2d_q8 (mma.sync GEMM)", mma_sync(lambda: P.conv2d_q8(x, *args)))]
        if groups == 1 and n * ((h + 2 * p - k) // s + 1) ** 2 >= 256 else [])


def linear_rows(n, k, m):
    g = torch.Generator().manual_seed(1)
    x = torch.randint(-128, 128, (m, k), dtype=torch.int8, generator=g).cuda()
    w = torch.randint(-127, 128, (n, k), dtype=torch.int8, generator=g).cuda()
    sw, b = torch.rand(n, device="cuda") * 0.01 + 1e-3, torch.randn(n, device="cuda")
    packed = P.pack_weight_int8(w)
    xf, wf = (x.float() - 3) * 0.02, w.float() * sw[:, None]
    xb, wb, bb = xf.bfloat16(), wf.bfloat16(), b.bfloat16()
    wt = w.t()
    rows = [("F.linear bf16", lambda: F.linear(xb, wb, bb)), ("F.linear fp32", lambda: F.linear(xf, wf, b))]
    if m > 16:
        rows.append(("torch._int_mm (no requant)", lambda: torch._int_mm(x, wt)))
    rows += [("pt2q reference (fp64)", lambda: REF.linear_q8(x, 0.02, 3, packed, sw, b, 0.05, 0, -128, 127)),
             ("pt2q.linear_q8", lambda: P.linear_q8(x, 0.02, 3, packed, sw, b, 0.05, 0))]
    if m >= 256:  # where Hopper's wgmma GEMM may run (linearDynamicWgmmaTakes)
        rows.append(("pt2q.linear_q8 (mma.sync GEMM)",
                     mma_sync(lambda: P.linear_q8(x, 0.02, 3, packed, sw, b, 0.05, 0))))
    return rows


def graph_ms(fn, calls=16):
    """Time per call of `calls` calls of fn captured in one CUDA graph (replays timed by events)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    return time_ms(graph.replay, warmup=3, reps=30, calls=1) / calls


GRAPHED = ("F.conv2d bf16", "F.linear bf16", "pt2q.conv2d_q8", "pt2q.linear_q8", "bf16 add", "pt2q.add_q8",
           "bf16 conv + add + relu")


def residual_rows(n, c, h, oc, k):
    """The conv closing a residual block with its add and relu: bf16 (the baseline), the eager chain,
    conv2d_q8 then add_q8 (XNNPACK's lowering) and conv2d_q8 with the residual (X86's)."""
    g = torch.Generator().manual_seed(3)
    x = torch.randint(-128, 128, (n, c, h, h), dtype=torch.int8, generator=g).cuda()
    r = torch.randint(-128, 128, (n, oc, h, h), dtype=torch.int8, generator=g).cuda()
    w = torch.randint(-127, 128, (oc, c, k, k), dtype=torch.int8, generator=g).cuda()
    sw, b = torch.rand(oc, device="cuda") * 0.01 + 1e-3, torch.randn(oc, device="cuda")
    packed = P.pack_weight_int8(w.permute(0, 2, 3, 1).reshape(oc, -1).contiguous())
    xb, wb, bb = ((x.float() - 3) * 0.02).bfloat16(), (w.float() * sw[:, None, None, None]).bfloat16(), b.bfloat16()
    rb = ((r.float() + 2) * 0.04).bfloat16()
    p = k // 2
    zeros = torch.zeros(oc, dtype=torch.int64, device="cuda")

    def chain():
        xd = QD.dequantize_per_tensor(x, 0.02, 3, -128, 127, torch.int8)
        wd = QD.dequantize_per_channel(w, sw, zeros, 0, -127, 127, torch.int8)
        rd = QD.dequantize_per_tensor(r, 0.04, -2, -128, 127, torch.int8)
        return QD.quantize_per_tensor(torch.relu(F.conv2d(xd, wd, b, 1, p) + rd), 0.05, 0, -128, 127, torch.int8)

    geo = ([k, k], [1, 1], [p, p], [1, 1])
    return [("bf16 conv + add + relu", lambda: torch.relu(F.conv2d(xb, wb, bb, 1, p) + rb)),
            ("q/dq chain (eager)", chain),
            ("pt2q.conv2d_q8 then pt2q.add_q8", lambda: P.add_q8(
                P.conv2d_q8(x, 0.02, 3, packed, sw, b, *geo, 0.06, 1), 0.06, 1, r, 0.04, -2, 0.05, 0, 0, 127)),
            ("pt2q.conv2d_q8 + residual", lambda: P.conv2d_q8(x, 0.02, 3, packed, sw, b, *geo, 0.05, 0, 0, 127, 1,
                                                              r, 0.04, -2))]


def add_rows(shape):
    """add_q8 against the bf16 / fp32 adds it replaces and the eager q/dq chain; (rows, bytes of
    each row's own reads and writes)."""
    g = torch.Generator().manual_seed(2)
    a = torch.randint(-128, 128, shape, dtype=torch.int8, generator=g).cuda()
    b = torch.randint(-128, 128, shape, dtype=torch.int8, generator=g).cuda()
    af, bf = (a.float() + 3) * 0.02, (b.float() - 5) * 0.03
    ab, bb = af.bfloat16(), bf.bfloat16()

    def chain():
        y = QD.dequantize_per_tensor(a, 0.02, -3, -128, 127, torch.int8) + \
            QD.dequantize_per_tensor(b, 0.03, 5, -128, 127, torch.int8)
        return QD.quantize_per_tensor(y, 0.04, 1, -128, 127, torch.int8)

    n = a.numel()
    a2 = torch.empty_like(a)
    return [("bf16 add", lambda: ab + bb, 6 * n), ("fp32 add", lambda: af + bf, 12 * n),
            ("copy of a (bandwidth probe)", lambda: a2.copy_(a), 2 * n),
            ("q/dq chain (eager)", chain, 3 * n),
            ("pt2q.add_q8", lambda: P.add_q8(a, 0.02, -3, b, 0.03, 5, 0.04, 1), 3 * n)]


def main():
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else ""
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print("| shape | op | us | x bf16 | us (graph) | x bf16 (graph) |")
    print("|---|---|---|---|---|---|")
    groups = [(f"conv2d N={n} C={c} H=W={h} OC={oc} k={k} s={s}" + (f" groups={gr[0]}" if gr else ""),
               conv_rows(n, c, h, oc, k, s, *gr))
              for n, c, h, oc, k, s, *gr in CONVS + GROUPED]
    groups += [(f"linear N={n} K={k} M={m}", linear_rows(n, k, m)) for n, k, m in LINEARS]
    groups += [(f"conv2d + add + relu N={n} C={c} H=W={h} OC={oc} k={k}", residual_rows(n, c, h, oc, k))
               for n, c, h, oc, k in RESIDUAL_CONVS]
    for group, rows in groups:
        if only not in group:
            continue
        times = [(name, time_ms(fn, warmup=5, reps=30), graph_ms(fn) if name.startswith(GRAPHED) else None)
                 for name, fn in rows]
        bf16, bf16_graph = times[0][1], times[0][2]
        for name, ms, gms in times:
            graphed = f"{1000 * gms:.1f} | {bf16_graph / gms:.2f}" if gms is not None else " | "
            print(f"| {group} | {name} | {1000 * ms:.1f} | {bf16 / ms:.2f} | {graphed} |")
    # adds: memory-bound, so GB/s of each op's own bytes, graphed (no launch gaps)
    print("\n| add of int8 codes | op | us (graph) | GB/s | x bf16 |")
    print("|---|---|---|---|---|")
    for shape in ADDS:
        group = f"add {'x'.join(map(str, shape))}"
        if only not in group:
            continue
        rows = add_rows(shape)
        times = [(name, graph_ms(fn), nbytes) for name, fn, nbytes in rows]
        for name, ms, nbytes in times:
            print(f"| {group} | {name} | {1000 * ms:.1f} | {nbytes / ms / 1e6:.0f} | {times[0][1] / ms:.2f} |")


if __name__ == "__main__":
    main()
