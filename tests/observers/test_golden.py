"""pt2q's observers against golden torch.ao results committed in golden/observers.json
(tools/golden/make_observer_golden.py writes them), so the check holds even on a torch that no
longer ships torch.ao.quantization; and, where torch.ao is present, the file against it."""

import base64
import hashlib
import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import torch

from pt2q._C.observers import Observer

ROOT = pathlib.Path(__file__).resolve().parents[2]
GOLDEN = json.loads((ROOT / "tests" / "observers" / "golden" / "observers.json").read_text())


def dec(d):
    arr = np.frombuffer(base64.b64decode(d["data"]), dtype=getattr(np, d["dtype"])).reshape(d["shape"])
    return torch.from_numpy(arr.copy())


def make(cls, kw):
    kw = dict(kw)
    return Observer(cls, kw.pop("dtype", "quint8"), kw.pop("qscheme", "per_channel_affine" if "PerChannel" in cls
                                                            else "per_tensor_affine"), **kw)


@pytest.mark.parametrize("case", GOLDEN["cases"], ids=lambda c: f"{c['class']}-{'-'.join(map(str, c['kwargs'].values()))}")
def test_matches_golden(case):
    obs = make(case["class"], case["kwargs"])
    for x in case["inputs"]:
        obs.observe(dec(x))
    exp = case["expected"]
    scale, zp = obs.calculate_qparams()
    assert torch.equal(scale.view(torch.int32), dec(exp["scale"]).view(torch.int32)), (scale, dec(exp["scale"]))
    assert zp.dtype == dec(exp["zero_point"]).dtype and torch.equal(zp, dec(exp["zero_point"]))
    state = dict(obs.state())
    for name in ("min_val", "max_val"):
        if name in exp:
            assert torch.equal(state[name], dec(exp[name])), name
    if "histogram_sha256" in exp:
        assert hashlib.sha256(state["histogram"].numpy().tobytes()).hexdigest() == exp["histogram_sha256"]


def test_golden_file_matches_torch_ao():
    pytest.importorskip("torch.ao.quantization.observer")
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "golden" / "make_observer_golden.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
