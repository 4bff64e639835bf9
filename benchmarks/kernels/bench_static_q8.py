"""Static int8 conv2d and linear on CPU: pt2q.conv2d_q8 / linear_q8 (int8 codes in and out)
against the float ops they replace (F.conv2d / F.linear in fp32, the baseline, and bf16) and
against the eager quantize/dequantize chain of an unlowered XNNPACK graph (torch's
dequantize_per_tensor -> fp32 op -> quantize_per_tensor), on ResNet-style convolutions, the
demo CNN's small ones, MobileNet depthwise and ResNeXt grouped ones, and Llama-style linears at
prefill row counts; and pt2q.add_q8 (a residual add on int8 codes) against its chain and the float
adds; and conv2d_q8 with a residual (X86InductorQuantizer's conv -> add -> relu, one op) against
conv2d_q8 then add_q8 (XNNPACK's lowering, two ops), the chain and the float conv + add + relu;
and pt2q.lookup_q8 (a ReLU6 / Hardswish between convolutions, as lower-to-native runs XNNPACK's
unfused activations) against its chain and the fp32 activation. The convolutions are
compute-bound: "GB/s" and
"% BW" count the int8 operands only and are for reference.

    python benchmarks/kernels/bench_static_q8.py
"""

from __future__ import annotations

import os
import sys

import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pt2q  # noqa: E402
from bench_affine import _reexec_with_caching_malloc, run_header  # noqa: E402
from registry import Case, bandwidth_line, measure_bandwidth, report, run  # noqa: E402

P = torch.ops.pt2q
QD = torch.ops.quantized_decomposed
CONVS = [  # batch, in channels, size, out channels, kernel, stride[, groups]
    (64, 1, 8, 16, 3, 1), (64, 16, 8, 32, 3, 1),  # the demo's digits CNN
    (1, 64, 56, 64, 3, 1), (1, 128, 28, 128, 3, 1), (1, 256, 14, 256, 3, 1), (1, 256, 56, 64, 1, 1),
    (8, 128, 28, 128, 3, 1), (1, 64, 56, 128, 3, 2),
]
GROUPED = [  # MobileNet depthwise convolutions; ResNeXt-50 32x4d's grouped 3x3 (4, 16, 32 channels a group)
    (1, 32, 112, 32, 3, 1, 32), (1, 144, 56, 144, 3, 2, 144), (1, 512, 14, 512, 3, 1, 512),
    (8, 256, 28, 256, 3, 1, 256), (1, 128, 28, 128, 3, 1, 32), (1, 128, 56, 128, 3, 1, 32),
    (8, 128, 28, 128, 3, 1, 32), (1, 512, 14, 512, 3, 1, 32), (1, 1024, 7, 1024, 3, 1, 32),
]
LINEARS = [(4096, 4096, 64), (4096, 4096, 256), (11008, 4096, 256)]  # N, K, M
ADDS = [(1, 64, 56, 56), (8, 256, 28, 28), (64, 1 << 16)]  # residual-add shapes: ResNet blocks, a flat 4M
LOOKUPS = [(1, 96, 112, 112), (1, 144, 56, 56), (8, 192, 28, 28)]  # MobileNet-v2's expanded activations
RESIDUAL_CONVS = [  # batch, in channels, size, out channels, kernel: ResNet-18's and -50's block-closing convs
    (1, 64, 56, 64, 3), (1, 256, 14, 256, 3), (8, 128, 28, 128, 3), (1, 64, 56, 256, 1),
]


def conv_cases(convs=CONVS + GROUPED):
    out = []
    g = torch.Generator().manual_seed(0)
    for n, c, h, oc, k, s, *grp in convs:
        gr = grp[0] if grp else 1
        x = torch.randint(-128, 128, (n, c, h, h), dtype=torch.int8, generator=g)
        w = torch.randint(-127, 128, (oc, c // gr, k, k), dtype=torch.int8, generator=g)
        sw, b = torch.rand(oc, generator=g) * 0.01 + 1e-3, torch.randn(oc, generator=g)
        packed = P.pack_weight_int8(w.permute(0, 2, 3, 1).reshape(oc, -1).contiguous())
        xf, wf = (x.float() - 3) * 0.02, w.float() * sw[:, None, None, None]
        pad = k // 2
        group = f"conv2d N={n} C={c} H=W={h} OC={oc} k={k} s={s}" + (f" groups={gr}" if gr > 1 else "")
        nbytes = x.numel() + w.numel() + n * oc * (h // s) ** 2
        out.append(Case(group, "F.conv2d fp32", lambda xf=xf, wf=wf, b=b, s=s, p=pad, gr=gr: F.conv2d(
            xf, wf, b, s, p, 1, gr), 4 * nbytes, baseline=True))
        xb, wb, bb = xf.bfloat16(), wf.bfloat16(), b.bfloat16()
        out.append(Case(group, "F.conv2d bf16", lambda xb=xb, wb=wb, bb=bb, s=s, p=pad, gr=gr: F.conv2d(
            xb, wb, bb, s, p, 1, gr), 2 * nbytes))
        zeros = torch.zeros(oc, dtype=torch.int64)

        def chain(x=x, w=w, sw=sw, b=b, s=s, p=pad, zeros=zeros, gr=gr):
            xd = QD.dequantize_per_tensor(x, 0.02, 3, -128, 127, torch.int8)
            wd = QD.dequantize_per_channel(w, sw, zeros, 0, -127, 127, torch.int8)
            return QD.quantize_per_tensor(F.conv2d(xd, wd, b, s, p, 1, gr), 0.05, 0, -128, 127, torch.int8)

        out.append(Case(group, "q/dq chain (eager)", chain, nbytes))
        out.append(Case(group, "pt2q.conv2d_q8",
                        lambda x=x, pk=packed, sw=sw, b=b, k=k, s=s, p=pad, gr=gr: P.conv2d_q8(
                            x, 0.02, 3, pk, sw, b, [k, k], [s, s], [p, p], [1, 1], 0.05, 0, -128, 127, gr), nbytes))
    return out


def linear_cases():
    out = []
    g = torch.Generator().manual_seed(1)
    for n, k, m in LINEARS:
        x = torch.randint(-128, 128, (m, k), dtype=torch.int8, generator=g)
        w = torch.randint(-127, 128, (n, k), dtype=torch.int8, generator=g)
        sw, b = torch.rand(n, generator=g) * 0.01 + 1e-3, torch.randn(n, generator=g)
        packed = P.pack_weight_int8(w)
        xf, wf = (x.float() - 3) * 0.02, w.float() * sw[:, None]
        group = f"linear N={n} K={k} M={m}"
        nbytes = x.numel() + w.numel() + m * n
        out.append(Case(group, "F.linear fp32", lambda xf=xf, wf=wf, b=b: F.linear(xf, wf, b), 4 * nbytes,
                        baseline=True))
        xb, wb, bb = xf.bfloat16(), wf.bfloat16(), b.bfloat16()
        out.append(Case(group, "F.linear bf16", lambda xb=xb, wb=wb, bb=bb: F.linear(xb, wb, bb), 2 * nbytes))
        out.append(Case(group, "pt2q.linear_q8", lambda x=x, pk=packed, sw=sw, b=b: P.linear_q8(
            x, 0.02, 3, pk, sw, b, 0.05, 0), nbytes))
    return out


def add_cases():
    """add_q8 (memory-bound: 2 bytes read and 1 written per element) against the q/dq chain of an
    unlowered XNNPACK add and the fp32 / bf16 adds it replaces."""
    out = []
    g = torch.Generator().manual_seed(2)
    for shape in ADDS:
        a = torch.randint(-128, 128, shape, dtype=torch.int8, generator=g)
        b = torch.randint(-128, 128, shape, dtype=torch.int8, generator=g)
        af, bf = (a.float() + 3) * 0.02, (b.float() - 5) * 0.03
        group = f"add {'x'.join(map(str, shape))}"
        n = a.numel()
        out.append(Case(group, "fp32 add", lambda af=af, bf=bf: af + bf, 12 * n, baseline=True))
        ab, bb = af.bfloat16(), bf.bfloat16()
        out.append(Case(group, "bf16 add", lambda ab=ab, bb=bb: ab + bb, 6 * n))

        def chain(a=a, b=b):
            y = QD.dequantize_per_tensor(a, 0.02, -3, -128, 127, torch.int8) + \
                QD.dequantize_per_tensor(b, 0.03, 5, -128, 127, torch.int8)
            return QD.quantize_per_tensor(y, 0.04, 1, -128, 127, torch.int8)

        out.append(Case(group, "q/dq chain (eager)", chain, 3 * n))
        out.append(Case(group, "pt2q.add_q8", lambda a=a, b=b: P.add_q8(a, 0.02, -3, b, 0.03, 5, 0.04, 1), 3 * n))
    return out


def lookup_cases():
    """lookup_q8 (memory-bound: 1 byte read and 1 written per element) against the q/dq chain of an
    unlowered ReLU6 / Hardswish and the fp32 activation."""
    out = []
    g = torch.Generator().manual_seed(4)
    for shape in LOOKUPS:
        x = torch.randint(-128, 128, shape, dtype=torch.int8, generator=g)
        xf = (x.float() + 3) * 0.05
        n = x.numel()
        for name, act in (("relu6", lambda y: F.hardtanh(y, 0.0, 6.0)), ("hardswish", F.hardswish)):
            group = f"{name} {'x'.join(map(str, shape))}"
            out.append(Case(group, f"fp32 {name}", lambda xf=xf, act=act: act(xf), 8 * n, baseline=True))

            def chain(x=x, act=act):
                y = act(QD.dequantize_per_tensor(x, 0.05, -3, -128, 127, torch.int8))
                return QD.quantize_per_tensor(y, 0.03, -100, -128, 127, torch.int8)

            table = chain(torch.arange(-128, 128, dtype=torch.int16).to(torch.int8)).roll(-128)
            assert torch.equal(P.lookup_q8(x, table), chain())
            out.append(Case(group, "q/dq chain (eager)", chain, 2 * n))
            out.append(Case(group, "pt2q.lookup_q8", lambda x=x, t=table: P.lookup_q8(x, t), 2 * n))
    return out


def residual_cases():
    """The conv closing a residual block with its add and relu, each way it can run."""
    out = []
    g = torch.Generator().manual_seed(3)
    for n, c, h, oc, k in RESIDUAL_CONVS:
        x = torch.randint(-128, 128, (n, c, h, h), dtype=torch.int8, generator=g)
        r = torch.randint(-128, 128, (n, oc, h, h), dtype=torch.int8, generator=g)
        w = torch.randint(-127, 128, (oc, c, k, k), dtype=torch.int8, generator=g)
        sw, b = torch.rand(oc, generator=g) * 0.01 + 1e-3, torch.randn(oc, generator=g)
        packed = P.pack_weight_int8(w.permute(0, 2, 3, 1).reshape(oc, -1).contiguous())
        xf, wf, rf = (x.float() - 3) * 0.02, w.float() * sw[:, None, None, None], (r.float() + 2) * 0.04
        p = k // 2
        group = f"conv2d + add + relu N={n} C={c} H=W={h} OC={oc} k={k}"
        nbytes = x.numel() + w.numel() + 2 * r.numel()
        out.append(Case(group, "fp32 conv + add + relu", lambda xf=xf, wf=wf, b=b, rf=rf, p=p: torch.relu(
            F.conv2d(xf, wf, b, 1, p) + rf), 4 * nbytes, baseline=True))
        zeros = torch.zeros(oc, dtype=torch.int64)

        def chain(x=x, w=w, sw=sw, b=b, r=r, p=p, zeros=zeros):
            xd = QD.dequantize_per_tensor(x, 0.02, 3, -128, 127, torch.int8)
            wd = QD.dequantize_per_channel(w, sw, zeros, 0, -127, 127, torch.int8)
            rd = QD.dequantize_per_tensor(r, 0.04, -2, -128, 127, torch.int8)
            return QD.quantize_per_tensor(torch.relu(F.conv2d(xd, wd, b, 1, p) + rd), 0.05, 0, -128, 127, torch.int8)

        out.append(Case(group, "q/dq chain (eager)", chain, nbytes))
        out.append(Case(group, "conv2d_q8 then add_q8", lambda x=x, pk=packed, sw=sw, b=b, r=r, k=k, p=p: P.add_q8(
            P.conv2d_q8(x, 0.02, 3, pk, sw, b, [k, k], [1, 1], [p, p], [1, 1], 0.06, 1), 0.06, 1, r, 0.04, -2, 0.05, 0,
            0, 127), nbytes))
        out.append(Case(group, "conv2d_q8 + residual", lambda x=x, pk=packed, sw=sw, b=b, r=r, k=k, p=p: P.conv2d_q8(
            x, 0.02, 3, pk, sw, b, [k, k], [1, 1], [p, p], [1, 1], 0.05, 0, 0, 127, 1, r, 0.04, -2), nbytes))
    return out


def main():
    _reexec_with_caching_malloc()
    bw, probes = measure_bandwidth()
    print(run_header(f"linear kernels: {pt2q._C.info.linear_cpu_kernels()}"))
    print(bandwidth_line(bw, probes))
    report(run(conv_cases() + linear_cases() + add_cases() + residual_cases() + lookup_cases(), bw), bw)


if __name__ == "__main__":
    main()
