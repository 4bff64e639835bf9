"""The CPU MX ops under each kernel ISA this CPU can run, in one run: what a user on an AVX2-only
machine (or without x86 vector kernels) gets, against the best ISA here and against the memory
bandwidth measured in the same run.

    python benchmarks/kernels/bench_mx_isas.py [--isas generic,avx2,avx512_bf16] [--json out.json]

Default ISAs: generic, avx2 and the best this CPU runs.

Each ISA runs in a fresh process with PT2Q_CPU_ISA set (the kernels are chosen once per process)
and the glibc thresholds of bench_affine.py (no page faults of fresh outputs). Cases: 32 MiB fp32
(2048 x 4096) and 16 MiB bf16 tensors, block 32, along the last and the first axis:
mx_fake_quantize, mx_quantize and mx_dequantize (to x's dtype) for int8, fp8_e4m3 and fp4_e2m1;
then linear_mx with an MXFP4 / MXFP8 4096 x 4096 weight at 1, 16 and 128 fp32 rows, with fp32
F.linear on the dequantized weight as the baseline. Times: the best of 7 samples (a shared VM
drifts); "% BW": bytes moved (input + output of the op; the weight for linear_mx) over the
time, against the better of a copy and a sum probe of 256 MiB taken in each ISA's process."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def best_ms(fn, samples=7):
    fn()
    fn()
    out = []
    for _ in range(samples):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return min(out) * 1e3


def child():
    import torch

    import pt2q

    P = torch.ops.pt2q
    sys.path.insert(0, HERE)
    from registry import measure_bandwidth

    bw, _ = measure_bandwidth(stat=min)
    rows = []
    torch.manual_seed(0)
    for dtype, shape in ((torch.float32, (2048, 4096)), (torch.bfloat16, (4096, 4096))):
        x = torch.randn(shape).to(dtype)
        nb = x.numel() * x.element_size()
        for fmt in ("int8", "fp8_e4m3", "fp4_e2m1"):
            code_bytes = x.numel() // 2 if fmt == "fp4_e2m1" else x.numel()
            for axis in (-1, 0):
                c, s = P.mx_quantize(x, fmt, 32, axis)
                name = f"{fmt} {str(dtype)[6:]} axis {axis}"
                for op, fn, moved in (
                        ("mx_fake_quantize", lambda: P.mx_fake_quantize(x, fmt, 32, axis), 2 * nb),
                        ("mx_quantize", lambda: P.mx_quantize(x, fmt, 32, axis), nb + code_bytes + s.numel()),
                        ("mx_dequantize", lambda: P.mx_dequantize(c, s, fmt, 32, axis, None, dtype),
                         nb + code_bytes + s.numel())):
                    ms = best_ms(fn)
                    rows.append({"case": f"{op} {name}", "ms": ms, "pct_bw": 100 * moved / (ms * 1e-3) / bw})
    w = torch.randn(4096, 4096)
    for fmt in ("fp4_e2m1", "fp8_e4m3"):
        c, s = P.mx_quantize(w, fmt, 32)
        wd = P.mx_dequantize(c, s, fmt, 32)
        for m in (1, 16, 128):
            x = torch.randn(m, 4096)
            ms = best_ms(lambda: P.linear_mx(x, c, s, fmt, 32))
            base = best_ms(lambda: torch.nn.functional.linear(x, wd))
            moved = c.numel() + s.numel() + x.numel() * 4 + m * 4096 * 4
            rows.append({"case": f"linear_mx {fmt} 4096x4096 M={m}", "ms": ms, "pct_bw": 100 * moved / (ms * 1e-3) / bw,
                         "base_ms": base})
    print(json.dumps({"isa": pt2q._C.info.mx_cpu_kernels(), "bw": bw, "rows": rows}))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--isas", default=None, help="comma-separated PT2Q_CPU_ISA values (default: all this CPU runs)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child()
    import torch

    import pt2q

    avail = pt2q._C.info.available_mx_cpu_kernels()
    isas = args.isas.split(",") if args.isas else [i for i in ("generic", "avx2") if i in avail] + [avail[-1]]
    env = dict(os.environ, PYTHONPATH=ROOT, MALLOC_MMAP_THRESHOLD_=str(1 << 32), MALLOC_TRIM_THRESHOLD_=str(1 << 36))
    runs = {}
    for isa in dict.fromkeys(isas):
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child"], env=dict(env, PT2Q_CPU_ISA=isa),
                             capture_output=True, text=True, check=True)
        runs[isa] = json.loads(out.stdout.strip().splitlines()[-1])
    names = list(runs)
    print(f"# pt2q {pt2q.__version__}, torch {torch.__version__}, {torch.get_num_threads()} threads; "
          + "; ".join(f"{n}: probe {r['bw'] / 1e9:.1f} GB/s" for n, r in runs.items()))
    # speedups: AVX2 over the scalar loops (what the AVX2 table ran before it had kernels), and
    # the best ISA's time over AVX2's
    ratios = [(a, b) for a, b in (("avx2", "generic"), (names[-1], "avx2")) if a in runs and b in runs and a != b]
    head = "| case | " + " | ".join([f"{n} ms (% BW)" for n in names] + [f"{a} vs {b}" for a, b in ratios]) + " | F.linear fp32 ms |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    last = runs[names[-1]]["rows"]
    for i, row in enumerate(last):
        cells = [f"{runs[n]['rows'][i]['ms']:.3f} ({runs[n]['rows'][i]['pct_bw']:.0f} %)" for n in names]
        cells += [f"{runs[b]['rows'][i]['ms'] / runs[a]['rows'][i]['ms']:.2f}x" for a, b in ratios]
        base = f"{row['base_ms']:.3f}" if "base_ms" in row else ""
        print(f"| {row['case']} | " + " | ".join(cells) + f" | {base} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(list(runs.values()), f, indent=1)


if __name__ == "__main__":
    main()
