"""Static int8 models end to end on CPU: the float model, the converted q/dq model (eager) and the
same model with convert_pt2e(..., lower_to_native=True), for each quantizer whose static graphs
lower: XNNPACK per-tensor (its default config), XNNPACK per-channel, X86Inductor (uint8
activations), on a ResNet-style CNN, an MLP and a 12-layer transformer encoder (bench_flow.py's).
Milliseconds per batch, every variant of a model timed in one process in
alternating rounds (best round); the float model is the baseline. "max |err|" is against the
float model's output, relative to its largest magnitude.

    python benchmarks/pt2e/bench_static_models.py [--rounds N]
"""

from __future__ import annotations

import argparse
import copy
import time
import warnings

import torch
from torch import nn

import pt2q
from pt2q.quantizer import (X86InductorQuantizer, XNNPACKQuantizer, get_default_x86_inductor_quantization_config,
                            get_symmetric_quantization_config)


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.down = None if stride == 1 and cin == cout else nn.Sequential(
            nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.b2(self.c2(torch.relu(self.b1(self.c1(x)))))
        return torch.relu(y + (x if self.down is None else self.down(x)))


class ResNetish(nn.Module):
    """ResNet-18's layout at a quarter of its width, 112x112 input."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 7, 2, 3, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        self.layers = nn.Sequential(Block(16, 16, 1), Block(16, 16, 1), Block(16, 32, 2), Block(32, 32, 1),
                                    Block(32, 64, 2), Block(64, 64, 1), Block(64, 128, 2), Block(128, 128, 1))
        self.fc = nn.Linear(128, 100)

    def forward(self, x):
        return self.fc(self.layers(self.stem(x)).mean((2, 3)))


class MLP(nn.Module):
    def __init__(self, d=1024):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d, 4 * d), nn.ReLU(), nn.Linear(4 * d, d), nn.ReLU(), nn.Linear(d, d),
                                 nn.ReLU(), nn.Linear(d, 10))

    def forward(self, x):
        return self.net(x)


def models():
    torch.manual_seed(0)
    cnn = ResNetish().eval()
    for m in cnn.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.2, 0.2)
            m.running_var.uniform_(0.5, 1.5)
    encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.0, batch_first=True), 12,
                                    enable_nested_tensor=False).eval()
    return [("ResNet-18 layout / 4, 4x3x112x112", cnn, lambda: torch.randn(4, 3, 112, 112)),
            ("MLP 1024-4096-1024-1024-10, 64 rows", MLP().eval(), lambda: torch.randn(64, 1024)),
            ("Transformer encoder, 12 layers, d 256, 4 heads, FF 1024, 4 x 64 tokens", encoder,
             lambda: torch.randn(4, 64, 256))]


QUANTIZERS = [
    ("XNNPACK per-tensor", lambda: XNNPACKQuantizer().set_global(get_symmetric_quantization_config())),
    ("XNNPACK per-channel",
     lambda: XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))),
    ("X86Inductor (uint8)", lambda: X86InductorQuantizer().set_global(get_default_x86_inductor_quantization_config())),
]


def natives(gm):
    ops = [str(n.target).split(".")[1] for n in gm.graph.nodes if n.op == "call_function"
           and str(n.target).startswith("pt2q.")]
    return ", ".join(f"{ops.count(o)} {o}" for o in sorted(set(ops))) or "none"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    for title, model, make in models():
        x = make()
        exported = torch.export.export(copy.deepcopy(model), (x,)).module()
        variants = [("fp32 (exported)", exported, "")]
        for qname, mkq in QUANTIZERS:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                p = pt2q.prepare_pt2e(copy.deepcopy(exported), mkq())
                for _ in range(8):
                    p(make())
                variants.append((f"{qname}, q/dq", pt2q.convert_pt2e(p), ""))
                low = pt2q.convert_pt2e(p, lower_to_native=True)
                variants.append((f"{qname}, native", low, natives(low)))
        ref = model(x).detach()
        best = {name: float("inf") for name, _, _ in variants}
        with torch.no_grad():
            for name, m, _ in variants:
                for _ in range(3):
                    m(x)
            for _ in range(args.rounds):
                for name, m, _ in variants:
                    reps = 10
                    t = time.perf_counter()
                    for _ in range(reps):
                        m(x)
                    best[name] = min(best[name], (time.perf_counter() - t) / reps)
        base = best["fp32 (exported)"]
        print(f"\n## {title}\n")
        print("| variant | ms / batch | vs fp32 | vs its q/dq | max abs err / max abs | native ops |")
        print("|---|---|---|---|---|---|")
        for name, m, ops in variants:
            with torch.no_grad():
                err = float((m(x) - ref).abs().max() / ref.abs().max())
            qdq = best.get(name.replace(", native", ", q/dq"), best[name])
            print(f"| {name} | {best[name] * 1e3:.3f} | {base / best[name]:.2f}x | {qdq / best[name]:.2f}x | "
                  f"{err:.3g} | {ops} |")


if __name__ == "__main__":
    main()
