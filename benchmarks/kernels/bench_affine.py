"""Affine quantize / dequantize / fake-quantize on CPU: pt2q's kernels against PyTorch's own
ops and pt2q's reference path, with the memory bandwidth measured in the same run.

    python benchmarks/kernels/bench_affine.py [--quick] [--json out.json]

Shapes: 4096x4096 (64 MiB fp32, 32 MiB bf16) and 16384x4096 (256 MiB fp32, 128 MiB bf16), at or
past the 32 MiB last-level cache of the development VM, so every op streams from memory.
Bytes moved per element: quantize fp32->int8 5, bf16->int8 3; dequantize int8->fp32 5,
int8->bf16 3; fake-quantize fp32 8, bf16 4 (qparams are negligible).
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys

import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pt2q  # noqa: E402
from registry import Case, bandwidth_line, measure_bandwidth, report, run  # noqa: E402

P = torch.ops.pt2q
QD = torch.ops.quantized_decomposed
REF = pt2q._C.reference


def cases_for(shape, label, quick):
    x32 = torch.randn(shape)
    n, k = shape
    numel = x32.numel()
    out = []
    for dt, nbytes in ((torch.float32, 4), (torch.bfloat16, 2)):
        x = x32.to(dt)
        tag = f"{label} {str(dt).replace('torch.', '')}"
        # per-tensor
        s = torch.tensor([0.02])
        z = torch.tensor([3], dtype=torch.int32)
        g = f"quantize per-tensor {tag} -> int8"
        if dt == torch.float32:
            out.append(Case(g, "torch.quantize_per_tensor (ATen, qint8)",
                            lambda x=x: torch.quantize_per_tensor(x, 0.02, 3, torch.qint8), numel * 5, baseline=True))
        out.append(Case(g, "quantized_decomposed.quantize_per_tensor (PT2E graph op)",
                        lambda x=x: QD.quantize_per_tensor(x, 0.02, 3, -128, 127, torch.int8), numel * (nbytes + 1),
                        baseline=dt != torch.float32))
        if not quick:
            out.append(Case(g, "pt2q reference (ATen composite)",
                            lambda x=x: REF.quantize_affine(x, list(shape), s, z, torch.int8), numel * (nbytes + 1)))
        out.append(Case(g, "pt2q.quantize_affine", lambda x=x: P.quantize_affine(x, list(shape), s, z, torch.int8),
                        numel * (nbytes + 1)))
        # per-channel (axis 0)
        sc = torch.rand(n) * 0.02 + 0.001
        zc = torch.randint(-10, 10, (n,), dtype=torch.int32)
        zc64 = zc.long()
        g = f"quantize per-channel {tag} -> int8"
        if dt == torch.float32:
            out.append(Case(g, "torch.quantize_per_channel (ATen, qint8)",
                            lambda x=x: torch.quantize_per_channel(x, sc, zc64, 0, torch.qint8), numel * 5,
                            baseline=True))
        out.append(Case(g, "quantized_decomposed.quantize_per_channel",
                        lambda x=x: QD.quantize_per_channel(x, sc, zc64, 0, -128, 127, torch.int8),
                        numel * (nbytes + 1), baseline=dt != torch.float32))
        out.append(Case(g, "pt2q.quantize_affine", lambda x=x: P.quantize_affine(x, [1, k], sc, zc, torch.int8),
                        numel * (nbytes + 1)))
        # dequantize
        q = P.quantize_affine(x, list(shape), s, z, torch.int8)
        g = f"dequantize per-tensor int8 -> {tag}"
        if dt == torch.float32:
            qq = torch.quantize_per_tensor(x32, 0.02, 3, torch.qint8)
            out.append(Case(g, "Tensor.dequantize (ATen, qint8)", lambda qq=qq: qq.dequantize(), numel * 5,
                            baseline=True))
        out.append(Case(g, "quantized_decomposed.dequantize_per_tensor",
                        lambda q=q, dt=dt: QD.dequantize_per_tensor(q, 0.02, 3, -128, 127, torch.int8, out_dtype=dt),
                        numel * (nbytes + 1), baseline=dt != torch.float32))
        out.append(Case(g, "pt2q.dequantize_affine",
                        lambda q=q, dt=dt: P.dequantize_affine(q, list(shape), s, z, torch.int8, output_dtype=dt),
                        numel * (nbytes + 1)))
        # fake-quantize per-tensor and per-channel
        g = f"fake-quantize per-tensor {tag}"
        out.append(Case(g, "torch.fake_quantize_per_tensor_affine",
                        lambda x=x: torch.fake_quantize_per_tensor_affine(x, 0.02, 3, -128, 127), numel * 2 * nbytes,
                        baseline=True))
        if not quick:
            out.append(Case(g, "pt2q reference (ATen composite)",
                            lambda x=x: REF.fake_quantize_affine_cachemask(x, list(shape), s, z, torch.int8)[0],
                            numel * 2 * nbytes))
        out.append(Case(g, "pt2q.fake_quantize_affine",
                        lambda x=x: P.fake_quantize_affine(x, list(shape), s, z, torch.int8), numel * 2 * nbytes))
        g = f"fake-quantize per-channel {tag}"
        out.append(Case(g, "torch.fake_quantize_per_channel_affine",
                        lambda x=x: torch.fake_quantize_per_channel_affine(x, sc, zc, 0, -128, 127),
                        numel * 2 * nbytes, baseline=True))
        out.append(Case(g, "pt2q.fake_quantize_affine",
                        lambda x=x: P.fake_quantize_affine(x, [1, k], sc, zc, torch.int8), numel * 2 * nbytes))
    return out


def commit():
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
    except OSError:
        return "unknown"


def run_header(kernels: str) -> str:
    """The first line of a benchmark's output: version, commit, torch, threads, `kernels`."""
    return (f"# pt2q {pt2q.__version__} ({commit()}), torch {torch.__version__}, {torch.get_num_threads()} threads, "
            f"{kernels}")


# glibc returns freed blocks above 128 KiB to the OS, so every op that allocates a 64 MiB
# output page-faults it in again (about 16 ms per 64 MiB on the 2-core VM, larger than any
# kernel here). A long-running process with a caching allocator does not pay that; raising
# the thresholds gives every op, PyTorch's and pt2q's alike, that steady state.
_MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": str(1 << 32), "MALLOC_TRIM_THRESHOLD_": str(1 << 36)}


def _reexec_with_caching_malloc():
    if os.environ.get("PT2Q_BENCH_DEFAULT_MALLOC") or all(k in os.environ for k in _MALLOC_ENV):
        return
    os.execve(sys.executable, [sys.executable] + sys.argv, dict(os.environ, **_MALLOC_ENV))


def main():
    _reexec_with_caching_malloc()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="one shape, fewer baselines")
    ap.add_argument("--json", help="also write the rows as JSON here")
    args = ap.parse_args()
    bw, probes = measure_bandwidth()
    shapes = [((4096, 4096), "4096x4096")]
    if not args.quick:
        shapes.append(((16384, 4096), "16384x4096"))
    print(f"# pt2q {pt2q.__version__} ({commit()}), torch {torch.__version__}, {platform.processor() or platform.machine()}, "
          f"{torch.get_num_threads()} threads, CPU kernels: {pt2q._C.info.cpu_isa()}")
    print(bandwidth_line(bw, probes))
    malloc = "default glibc" if os.environ.get("PT2Q_BENCH_DEFAULT_MALLOC") else "glibc with freed memory kept"
    print(f"# allocator: {malloc} (PT2Q_BENCH_DEFAULT_MALLOC=1 for the default); % BW = bytes moved / time / bandwidth")
    rows = []
    for shape, label in shapes:
        rows += run(cases_for(shape, label, args.quick), bw)
    report(rows, bw, args.json)


if __name__ == "__main__":
    main()
