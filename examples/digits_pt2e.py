"""pt2q's main job, end to end: train a small CNN on scikit-learn's handwritten digits, export it,
quantize it with pt2q's PT2E flow (static int8 per-channel, dynamic int8, the weight-only and
per-token dynamic schemes lowered to pt2q's native linears, and MX formats with packed weights
and pt2q.linear_mx), calibrate, convert, and compare
accuracy, size and latency with the float model.

    python examples/digits_pt2e.py [--epochs N] [--compile]
"""

import argparse
import copy
import sys
import time
import warnings

import torch
from torch import nn

import pt2q
from pt2q.quantizer import (
    Int4WeightOnlyQuantizer,
    Int8DynActInt4WeightQuantizer,
    Int8DynActInt8WeightQuantizer,
    Int8WeightOnlyQuantizer,
    MXQuantizationConfig,
    MXQuantizer,
    X86InductorQuantizer,
    XNNPACKQuantizer,
    get_default_x86_inductor_quantization_config,
    get_symmetric_quantization_config,
)


class DigitsCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2))
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(32 * 4 * 4, 64), nn.ReLU(), nn.Linear(64, 10))

    def forward(self, x):
        return self.head(self.features(x))


def load_digits():
    from sklearn.datasets import load_digits as sk_digits  # ships inside scikit-learn: no download

    d = sk_digits()
    x = torch.tensor(d.images, dtype=torch.float32).unsqueeze(1) / 16.0
    y = torch.tensor(d.target)
    g = torch.Generator().manual_seed(0)
    perm = torch.randperm(len(y), generator=g)
    x, y = x[perm], y[perm]
    return (x[:1400], y[:1400]), (x[1400:], y[1400:])


def train(model, data, epochs):
    x, y = data
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(epochs):
        for i in range(0, len(y), 64):
            opt.zero_grad()
            nn.functional.cross_entropy(model(x[i:i + 64]), y[i:i + 64]).backward()
            opt.step()
    return model.eval()


def accuracy(model, data, batch=64):
    x, y = data
    correct = 0
    with torch.no_grad():
        for i in range(0, len(y) - batch + 1, batch):
            correct += (model(x[i:i + batch]).argmax(1) == y[i:i + batch]).sum().item()
    n = (len(y) // batch) * batch
    return correct / n


def size_kib(module):
    seen, total = set(), 0
    for t in list(module.parameters()) + list(module.buffers()):
        if t.data_ptr() not in seen:
            seen.add(t.data_ptr())
            total += t.numel() * t.element_size()
    return total / 1024


def latency_ms(model, x, reps=50):
    with torch.no_grad():
        for _ in range(5):
            model(x)
        t = time.perf_counter()
        for _ in range(reps):
            model(x)
    return (time.perf_counter() - t) / reps * 1e3


def calibrate(model, x, batches=32, batch=32):
    """Runs calibration batches through the prepared model with a progress bar."""
    width = 30
    with torch.no_grad():
        for b in range(batches):
            i = (b * batch) % (len(x) - batch)
            model(x[i:i + batch])
            done = (b + 1) * width // batches
            sys.stderr.write(f"\r  calibrating [{'#' * done}{'.' * (width - done)}] {b + 1}/{batches}")
            sys.stderr.flush()
    sys.stderr.write("\n")


def main():
    warnings.filterwarnings("ignore", category=FutureWarning)  # torch.export pytree deprecation notes
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--compile", action="store_true", help="also time the models under torch.compile")
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(max(1, torch.get_num_threads()))

    trainset, testset = load_digits()
    print(f"digits: {len(trainset[1])} training and {len(testset[1])} test images (8x8, 10 classes)")
    t0 = time.perf_counter()
    model = train(DigitsCNN(), trainset, args.epochs)
    print(f"trained {args.epochs} epochs in {time.perf_counter() - t0:.1f} s")

    example = (testset[0][:64],)
    batch = torch.export.Dim("batch", min=1, max=4096)
    exported = torch.export.export(model, example, dynamic_shapes=({0: batch},)).module()
    rows = [("fp32 (exported)", exported)]
    schemes = [
        ("int8 static, per-channel", XNNPACKQuantizer().set_global(
            get_symmetric_quantization_config(is_per_channel=True)), True, False),
        ("int8 static, native", XNNPACKQuantizer().set_global(
            get_symmetric_quantization_config(is_per_channel=True)), True, True),
        ("int8 static per-tensor nat", XNNPACKQuantizer().set_global(
            get_symmetric_quantization_config()), True, True),
        ("uint8 static (X86)", X86InductorQuantizer().set_global(
            get_default_x86_inductor_quantization_config()), True, False),
        ("uint8 static (X86), native", X86InductorQuantizer().set_global(
            get_default_x86_inductor_quantization_config()), True, True),
        ("int8 dynamic (linear)", XNNPACKQuantizer().set_global(
            get_symmetric_quantization_config(is_per_channel=True, is_dynamic=True)), True, False),
        ("int8 dynamic, native", XNNPACKQuantizer().set_global(
            get_symmetric_quantization_config(is_per_channel=True, is_dynamic=True)), False, True),
        # weight-only and dynamic: no calibration; the linears run pt2q's native kernels
        ("int8 weight-only, native", Int8WeightOnlyQuantizer(), False, True),
        ("int4 weight-only g32, nat.", Int4WeightOnlyQuantizer(32), False, True),
        ("int8 dyn act+int8 w, nat.", Int8DynActInt8WeightQuantizer(), False, True),
        ("int8 dyn act+int4 w, nat.", Int8DynActInt4WeightQuantizer(32), False, True),
        # MX: per-block E8M0 scales chosen at run time, so no calibration either
        ("MXINT8 w+act, native", MXQuantizer().set_global(
            MXQuantizationConfig(weight="int8", input_activation="int8")), False, True),
        ("MXFP4 w, MXINT8 act, nat.", MXQuantizer().set_global(
            MXQuantizationConfig(weight="fp4_e2m1", input_activation="int8")), False, True),
    ]
    for name, quantizer, needs_data, native in schemes:
        print(f"{name}:")
        t = time.perf_counter()
        prepared = pt2q.prepare_pt2e(copy.deepcopy(exported), quantizer)
        t_prepare = time.perf_counter() - t
        if needs_data:
            calibrate(prepared, trainset[0])
        t = time.perf_counter()
        converted = pt2q.convert_pt2e(prepared, lower_to_native=native)
        print(f"  prepare {t_prepare * 1e3:.0f} ms, convert {(time.perf_counter() - t) * 1e3:.0f} ms")
        rows.append((name, converted))

    x = testset[0][:64]
    print()
    header = f"{'model':<26} {'accuracy':>9} {'size KiB':>9} {'eager ms/batch':>15}"
    if args.compile:
        header += f" {'compiled ms/batch':>18}"
    print(header)
    print("-" * len(header))
    for name, m in rows:
        line = f"{name:<26} {accuracy(m, testset) * 100:8.2f}% {size_kib(m):9.1f} {latency_ms(m, x):15.3f}"
        if args.compile:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    line += f" {latency_ms(torch.compile(m), x):18.3f}"
                except Exception as e:  # Inductor's own lowering of the q/dq patterns
                    line += f" {'Inductor: ' + type(e).__name__:>18}"
        print(line)
    print("\nbatch 64, all threads. The rows without \"native\" run the reference quantize/dequantize ops\n"
          "eagerly. The native rows are converted with lower_to_native=True (no calibration, except\n"
          "the static one): their linears run pt2q.linear_w8a16 / linear_w4a16 / linear_w8a8 /\n"
          "linear_w4a8 / linear_mx, the activations quantized inside the op (int8 per token, per\n"
          "tensor for XNNPACK's dynamic config, MX blocks of 32), the convolutions in float (the MX\n"
          "ones on weights kept as packed codes + E8M0 scales, dequantized per call); \"int8 static,\n"
          "native\" runs its convolutions and linears as pt2q.conv2d_q8 / linear_q8 (int8 codes in\n"
          "and out) and its max-pool as pt2q.max_pool2d_q8 on the codes, and so do the per-tensor\n"
          "and X86 ones (X86's uint8 codes shifted to int8; its last linear, whose output X86\n"
          "leaves float, runs linear_q8_float on its input's codes).\n--compile lets Inductor fuse the q/dq (torch 2.13's Inductor cannot lower dq ->\n"
          "max_pool2d -> q on CPU tensors).")


if __name__ == "__main__":
    main()
