"""Writes tests/observers/golden/observers.json: inputs and torch.ao's resulting statistics and
qparams for every observer class pt2q reimplements, so that pt2q's observers stay checked
against torch.ao's numbers even on a torch without torch.ao.quantization.

    python tools/golden/make_observer_golden.py [--check]

--check runs torch.ao on the committed inputs and fails if its results differ from the committed
ones (torch.ao drifted). The inputs are stored, not regenerated: torch.randn's stream is not the
same in every torch release."""

import argparse
import base64
import hashlib
import json
import pathlib
import sys
import warnings

import torch

OUT = pathlib.Path(__file__).resolve().parents[2] / "tests" / "observers" / "golden" / "observers.json"

# (class, torch.ao kwargs with dtype/qscheme by name, input shape)
CASES = [
    ("MinMaxObserver", {"dtype": "quint8"}, (8, 16)),
    ("MinMaxObserver", {"dtype": "qint8", "qscheme": "per_tensor_symmetric"}, (8, 16)),
    ("MinMaxObserver", {"dtype": "qint8", "quant_min": -127, "quant_max": 127, "eps": 2 ** -12}, (8, 16)),
    ("MinMaxObserver", {"dtype": "quint8", "reduce_range": True}, (8, 16)),
    ("MinMaxObserver", {"dtype": "int16"}, (8, 16)),
    ("MovingAverageMinMaxObserver", {"dtype": "qint8"}, (8, 16)),
    ("MovingAverageMinMaxObserver", {"dtype": "quint8", "averaging_constant": 0.3}, (8, 16)),
    ("PerChannelMinMaxObserver", {"dtype": "qint8", "qscheme": "per_channel_symmetric"}, (6, 3, 4)),
    ("PerChannelMinMaxObserver", {"dtype": "quint8", "qscheme": "per_channel_affine", "ch_axis": 1}, (6, 3, 4)),
    ("PerChannelMinMaxObserver", {"dtype": "quint8", "qscheme": "per_channel_affine_float_qparams",
                                  "eps": 2 ** -12}, (6, 3, 4)),
    ("MovingAveragePerChannelMinMaxObserver", {"dtype": "qint8", "qscheme": "per_channel_symmetric",
                                               "quant_min": -127, "quant_max": 127}, (6, 3, 4)),
    ("HistogramObserver", {"dtype": "quint8"}, (16, 64)),
    ("HistogramObserver", {"dtype": "qint8", "quant_min": -128, "quant_max": 127, "eps": 2 ** -12}, (16, 64)),
    ("HistogramObserver", {"dtype": "qint8", "qscheme": "per_tensor_symmetric"}, (16, 64)),
    ("HistogramObserver", {"dtype": "quint8", "reduce_range": True, "bins": 256}, (16, 64)),
    ("FixedQParamsObserver", {"scale": 1.0 / 256.0, "zero_point": 0, "dtype": "quint8", "quant_min": 0,
                              "quant_max": 255}, (4, 4)),
]

DTYPES = {"quint8": torch.quint8, "qint8": torch.qint8, "int16": torch.int16}


def torch_kwargs(kw):
    out = dict(kw)
    if "dtype" in out:
        out["dtype"] = DTYPES[out["dtype"]]
    if "qscheme" in out:
        out["qscheme"] = getattr(torch, out["qscheme"])
    return out


def inputs(i, shape):
    g = torch.Generator().manual_seed(100 + i)
    xs = [torch.randn(shape, generator=g) * (1 + j) + 0.3 * j for j in range(3)]
    xs.append(torch.randn(shape, generator=g).exp())  # a batch that widens the range on one side
    return xs


def enc(t):
    t = t.detach().contiguous()
    return {"dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape),
            "data": base64.b64encode(t.numpy().tobytes()).decode()}


def dec(d):
    import base64 as b64

    import numpy as np

    arr = np.frombuffer(b64.b64decode(d["data"]), dtype=getattr(np, d["dtype"])).reshape(d["shape"])
    return torch.from_numpy(arr.copy())


def generate(stored=None):
    """The golden cases; with `stored` (the committed cases), on their inputs."""
    import torch.ao.quantization.observer as tao
    cases = []
    for i, (cls, kw, shape) in enumerate(CASES):
        obs = getattr(tao, cls)(**torch_kwargs(kw))
        xs = [dec(x) for x in stored[i]["inputs"]] if stored else inputs(i, shape)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for x in xs:
                obs(x)
            scale, zp = obs.calculate_qparams()
        expected = {"scale": enc(scale), "zero_point": enc(zp)}
        for name in ("min_val", "max_val"):
            if hasattr(obs, name) and cls != "FixedQParamsObserver":
                expected[name] = enc(getattr(obs, name))
        if cls == "HistogramObserver":
            expected["histogram_sha256"] = hashlib.sha256(obs.histogram.numpy().tobytes()).hexdigest()
        cases.append({"class": cls, "kwargs": kw, "inputs": [enc(x) for x in xs], "expected": expected})
    return {"torch": torch.__version__, "cases": cases}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    if args.check:
        old = json.loads(OUT.read_text())
        data = generate(old["cases"])
        if old["cases"] != data["cases"]:
            sys.exit(f"{OUT} differs from what torch {torch.__version__}'s torch.ao gives now")
        print("golden file matches torch.ao")
        return
    data = generate()
    OUT.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes, {len(data['cases'])} cases)")


if __name__ == "__main__":
    main()
