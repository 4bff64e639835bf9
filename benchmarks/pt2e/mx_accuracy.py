"""Direct-cast accuracy of the MX / BFP formats through pt2q's PT2E flow (MXQuantizer, weights and
input activations of every linear, conv and matmul in the same format, block 32, floor scales,
nearest rounding): the output SQNR of the converted model against the fp32 model on the test
models of tests/pt2e/models.py, and the digits CNN of `make demo` (trained here, as the demo does)
with its test accuracy. Writes a Markdown table (docs/mx_pt2e.md quotes it).

    python benchmarks/pt2e/mx_accuracy.py [--epochs 8]
"""

from __future__ import annotations

import argparse
import copy
import math
import os
import sys
import warnings

import torch

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "examples"))
warnings.simplefilter("ignore")

import pt2q  # noqa: E402
from pt2q.quantizer import MXQuantizationConfig, MXQuantizer  # noqa: E402

FORMATS = [("MXINT8", "int8"), ("MXFP8-E4M3", "fp8_e4m3"), ("MXFP6-E2M3", "fp6_e2m3"), ("MXFP4", "fp4_e2m1"),
           ("BFP16", "bfp16"), ("BFP12", "bfp12")]
ZOO = ["mlp", "cnn_bn_pool", "residual_block", "transformer_encoder", "mobilenetish", "gpt_block"]


def sqnr_db(ref: torch.Tensor, got: torch.Tensor) -> float:
    noise = (ref.double() - got.double()).square().sum().item()
    signal = ref.double().square().sum().item()
    return math.inf if noise == 0 else 10 * math.log10(signal / noise)


def quantize(model, args, fmt, calib, dynamic_shapes=None):
    exported = torch.export.export(copy.deepcopy(model), args, dynamic_shapes=dynamic_shapes).module()
    config = MXQuantizationConfig(weight=fmt, input_activation=fmt)
    prepared = pt2q.prepare_pt2e(exported, MXQuantizer().set_global(config))
    for batch in calib:
        prepared(*batch)  # MX needs no calibration; this only exercises the prepared model
    return pt2q.convert_pt2e(prepared, lower_to_native=True)


def zoo_rows():
    from tests.pt2e.models import make

    rows = []
    for name in ZOO:
        model, args, _ = make(name)
        g = torch.Generator().manual_seed(1)
        test = [tuple(torch.randn(a.shape, generator=g) for a in args) for _ in range(4)]
        with torch.no_grad():
            ref = [model(*t) for t in test]
            row = [name]
            for _, fmt in FORMATS:
                q = quantize(model, args, fmt, test[:1])
                got = [q(*t) for t in test]
                row.append(sqnr_db(torch.cat([r.flatten() for r in ref]), torch.cat([x.flatten() for x in got])))
        rows.append(row)
    return rows


def digits_rows(epochs):
    from digits_pt2e import DigitsCNN, accuracy, load_digits, size_kib, train

    torch.manual_seed(0)
    trainset, testset = load_digits()
    model = train(DigitsCNN(), trainset, epochs)
    x = testset[0][:64]
    with torch.no_grad():
        ref = model(testset[0])
    rows = [("fp32", accuracy(model, testset), math.inf, size_kib(model))]
    for label, fmt in FORMATS:
        q = quantize(model, (x,), fmt, [(trainset[0][:64],)], ({0: torch.export.Dim("batch", min=1, max=4096)},))
        with torch.no_grad():
            rows.append((label, accuracy(q, testset), sqnr_db(ref, q(testset[0])), size_kib(q)))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=8)
    args = ap.parse_args()
    print("Output SQNR (dB) of the converted model against fp32, weights and activations in one format:\n")
    print("| model | " + " | ".join(label for label, _ in FORMATS) + " |")
    print("|---|" + "---|" * len(FORMATS))
    for row in zoo_rows():
        print(f"| {row[0]} | " + " | ".join(f"{v:.1f}" for v in row[1:]) + " |")
    print("\nDigits CNN (make demo's model), test set of 360 images:\n")
    print("| format | accuracy | output SQNR dB | size KiB |")
    print("|---|---|---|---|")
    for label, acc, sq, size in digits_rows(args.epochs):
        print(f"| {label} | {acc * 100:.2f} % | {'-' if math.isinf(sq) else f'{sq:.1f}'} | {size:.1f} |")


if __name__ == "__main__":
    main()
