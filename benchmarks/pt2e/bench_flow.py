"""PT2E wall time, pt2q against torchao, and HistogramObserver against torch.ao's.

    python benchmarks/pt2e/bench_flow.py [--quick]

1. The whole flow: prepare_pt2e + calibration (32 batches) + convert_pt2e, for the digits CNN
   and a 12-layer transformer encoder, with the XNNPACK static per-tensor config (HistogramObserver
   on every activation). torchao runs its own XNNPACKQuantizer, pt2q its own; both produce the
   same graph (tests/pt2e). The float model's forward time over the same batches (eager, and the
   exported graph, which calibration runs) is printed: calibration cannot go under the latter, and
   calibration minus it is the observers' overhead.
2. HistogramObserver alone: 32 forward calls + calculate_qparams on activations of several
   sizes, pt2q's (C++) against torch.ao's, with the qparams checked equal.
Best of 3 runs each, all threads of this machine.
"""

import argparse
import copy
import os
import sys
import time
import warnings

import torch
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))
warnings.simplefilter("ignore")

import pt2q  # noqa: E402
from pt2q.quantizer import XNNPACKQuantizer, get_symmetric_quantization_config  # noqa: E402

with warnings.catch_warnings():
    import torchao.quantization.pt2e.quantize_pt2e as ao  # noqa: E402
    from torchao.testing.pt2e import _xnnpack_quantizer as ao_xnn  # noqa: E402
import torch.ao.quantization.observer as tao  # noqa: E402


def encoder(layers=12, d=256, heads=4, ff=1024):
    layer = nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, batch_first=True)
    return nn.TransformerEncoder(layer, layers, enable_nested_tensor=False).eval()


def models(quick):
    from digits_pt2e import DigitsCNN

    torch.manual_seed(0)
    seq = 32 if quick else 128
    return {
        "digits CNN (batch 32)": (DigitsCNN().eval(), lambda g: (torch.randn(32, 1, 8, 8, generator=g),)),
        f"12-layer encoder (8x{seq}x256)": (encoder(layers=2 if quick else 12),
                                            lambda g: (torch.randn(8, seq, 256, generator=g),)),
    }


def run_flow(flow, model, batches, quantizer):
    prepare, convert = (ao.prepare_pt2e, ao.convert_pt2e) if flow == "torchao" else (pt2q.prepare_pt2e,
                                                                                     pt2q.convert_pt2e)
    exported = torch.export.export(copy.deepcopy(model), batches[0]).module()
    t0 = time.perf_counter()
    p = prepare(exported, quantizer)
    t1 = time.perf_counter()
    with torch.no_grad():
        for b in batches:
            p(*b)
    t2 = time.perf_counter()
    convert(p)
    t3 = time.perf_counter()
    return t1 - t0, t2 - t1, t3 - t2


def best(fn, reps=3):
    runs = [fn() for _ in range(reps)]
    return min(runs, key=sum)


def bench_flow(quick):
    print("## prepare + calibrate (32 batches) + convert, seconds (best of 3)\n")
    print("| model | float eager / exported, x32 | torchao prepare / calib / convert | pt2q prepare / calib / "
          "convert | torchao total | pt2q total | speed-up | observer overhead, torchao / pt2q |")
    print("|---|---|---|---|---|---|---|---|")
    for name, (model, make) in models(quick).items():
        g = torch.Generator().manual_seed(1)
        batches = [make(g) for _ in range(32)]

        def float_time():
            t = time.perf_counter()
            with torch.no_grad():
                for b in batches:
                    model(*b)
            return (time.perf_counter() - t,)

        f = best(float_time)[0]
        exported = torch.export.export(copy.deepcopy(model), batches[0]).module()

        def exported_time():
            t = time.perf_counter()
            with torch.no_grad():
                for b in batches:
                    exported(*b)
            return (time.perf_counter() - t,)

        fe = best(exported_time)[0]
        a = best(lambda: run_flow("torchao", model, batches,
                                  ao_xnn.XNNPACKQuantizer().set_global(ao_xnn.get_symmetric_quantization_config())))
        b = best(lambda: run_flow("pt2q", model, batches,
                                  XNNPACKQuantizer().set_global(get_symmetric_quantization_config())))
        fmt = lambda t: " / ".join(f"{x:.3f}" for x in t)  # noqa: E731
        print(f"| {name} | {f:.3f} / {fe:.3f} | {fmt(a)} | {fmt(b)} | {sum(a):.3f} | {sum(b):.3f} "
              f"| {sum(a) / sum(b):.1f}x | {a[1] - fe:.3f} / {b[1] - fe:.3f} |")


def bench_histogram(quick):
    print("\n## HistogramObserver: 32 forward calls + calculate_qparams, milliseconds (best of 3)\n")
    print("| activation | torch.ao forward x32 | torch.ao qparams | pt2q forward x32 | pt2q qparams "
          "| total speed-up | qparams equal |")
    print("|---|---|---|---|---|---|---|")
    shapes = [(1, 128, 768), (8, 128, 768), (32, 64, 56, 56)] if not quick else [(1, 128, 768)]
    for shape in shapes:
        g = torch.Generator().manual_seed(2)
        xs = [torch.randn(shape, generator=g) * (1 + 0.05 * (i % 7)) for i in range(32)]

        def run(cls):
            o = cls(dtype=torch.qint8, quant_min=-128, quant_max=127, eps=2 ** -12)
            t0 = time.perf_counter()
            for x in xs:
                o(x)
            t1 = time.perf_counter()
            q = o.calculate_qparams()
            t2 = time.perf_counter()
            return (t1 - t0, t2 - t1), q

        ref = min((run(tao.HistogramObserver) for _ in range(3)), key=lambda r: sum(r[0]))
        mine = min((run(pt2q.observer.HistogramObserver) for _ in range(3)), key=lambda r: sum(r[0]))
        same = all(torch.equal(a, b) for a, b in zip(ref[1], mine[1]))
        (rf, rq), (mf, mq) = ref[0], mine[0]
        print(f"| {'x'.join(map(str, shape))} | {rf * 1e3:.1f} | {rq * 1e3:.2f} | {mf * 1e3:.1f} | {mq * 1e3:.2f} "
              f"| {(rf + rq) / (mf + mq):.1f}x | {same} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    args = ap.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads\n")
    bench_flow(args.quick)
    bench_histogram(args.quick)


if __name__ == "__main__":
    main()
