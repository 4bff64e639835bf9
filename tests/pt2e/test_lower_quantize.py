"""lower-to-native's last step: per-tensor int8 quantizes of fp32 values with a static shape and a
scale exact in fp32 become pt2q.quantize_affine over one block. The identity it rests on, on
torch's own op (the same codes on random, half-way, clamped and infinite values for scales of
many magnitudes); the rewrite in a lowered model (its codes equal the unlowered quantize's);
the quantizes it leaves: dynamic shapes, and uint8 ones no lowering moved to int8."""

import pytest
import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401
from torch import nn

import pt2q
from tests.pt2e.models import calibration_batches, make
from tests.pt2e.test_lower_static import _targets, _x86, _xnnpack, x86_flow

P = torch.ops.pt2q
QD = torch.ops.quantized_decomposed


def fp32_scales(n, seed=0):
    """Scales as observers make them: fp32 values, over many magnitudes."""
    g = torch.Generator().manual_seed(seed)
    return [float(torch.tensor(10.0 ** float(torch.empty(()).uniform_(-6, 2, generator=g)), dtype=torch.float32))
            for _ in range(n)]


@pytest.mark.parametrize("seed", range(4))
def test_quantize_affine_gives_quantize_per_tensor_codes(seed):
    g = torch.Generator().manual_seed(seed)
    for scale in fp32_scales(12, seed):
        z = int(torch.randint(-128, 128, (), generator=g))
        k = torch.randint(-300, 300, (2048,), generator=g).float()
        x = torch.cat([
            torch.randn(4096, generator=g) * 60 * scale,  # most codes, some clamped
            (k + 0.5) * scale, (k - 0.5) * scale,  # half-way between codes (ties to even)
            torch.tensor([float("inf"), float("-inf"), 0.0, -0.0, 1e30, -1e30]),
        ])
        for qmin, qmax in ((-128, 127), (z, 127), (-100, 90)):
            want = QD.quantize_per_tensor(x, scale, z, qmin, qmax, torch.int8)
            got = P.quantize_affine(x, [x.numel()], torch.tensor(scale), torch.tensor(z), torch.int8, qmin, qmax)
            assert got.dtype == torch.int8 and torch.equal(got, want), (scale, z, qmin, qmax)


@pytest.mark.parametrize("which", ["xnnpack", "x86"])
def test_lowered_quantizes_give_the_unlowered_codes(which):
    """Every int8 per-tensor quantize of a lowered CNN becomes quantize_affine over its input's
    shape, with the scale and zero point of the quantize it replaced; on the model's input the
    codes are torch's."""
    from tests.pt2e.test_lower_static import Net

    torch.manual_seed(0)
    model, x = Net().eval(), torch.randn(4, 3, 8, 8)
    p = pt2q.prepare_pt2e(torch.export.export(model, (x,)).module(), _xnnpack() if which == "xnnpack" else _x86())
    for _ in range(4):
        p(torch.randn(4, 3, 8, 8) * 1.5)
    low = pt2q.convert_pt2e(p, lower_to_native=True)
    targets = _targets(low)
    assert QD.quantize_per_tensor.default not in targets
    quantizes = [n for n in low.graph.nodes if n.target == P.quantize_affine.default]
    assert quantizes
    for n in quantizes:
        assert list(n.args[1]) == list(n.args[0].meta["val"].shape) and n.args[4:] == (torch.int8, -128, 127)
    first = next(n for n in quantizes if n.args[0].op == "placeholder")
    scale, zp = float(getattr(low, first.args[2].target)), int(getattr(low, first.args[3].target))
    for x2 in [x, torch.randn(4, 3, 8, 8) * 3]:
        got = P.quantize_affine(x2, list(x2.shape), getattr(low, first.args[2].target),
                                getattr(low, first.args[3].target), torch.int8, -128, 127)
        assert torch.equal(got, QD.quantize_per_tensor(x2, scale, zp, -128, 127, torch.int8))
    ep = torch.export.export(low, (x,))
    assert torch.equal(ep.module()(x), low(x))


def test_dynamic_shapes_keep_torchs_quantize():
    """quantize_affine's block is the input's shape, so a symbolic batch keeps torch's quantize;
    the lowered model runs at other batch sizes."""
    model, args, kwargs = make("dynamic_batch")
    p = pt2q.prepare_pt2e(torch.export.export(model, args, **kwargs).module(), _xnnpack())
    for b in calibration_batches(args):
        p(*b)
    qdq, low = pt2q.convert_pt2e(p), pt2q.convert_pt2e(p, lower_to_native=True)
    targets = _targets(low)
    assert P.quantize_affine.default not in targets and QD.quantize_per_tensor.default in targets
    assert P.linear_q8.default in targets
    for rows in (2, 9):
        x = torch.randn(rows, args[0].shape[1])
        torch.testing.assert_close(low(x), qdq(x), rtol=0, atol=0.05 * float(qdq(x).abs().max()))


class UnloweredUint8(nn.Module):
    """A grouped conv of 3 channels per group, which no lowering takes (conv2d_q8 would run it a
    group at a time), between X86's uint8 quantizes: they stay uint8, and stay torch's."""

    def __init__(self):
        super().__init__()
        self.g = nn.Conv2d(6, 9, 3, padding=1, groups=3)
        self.c = nn.Conv2d(9, 4, 1)

    def forward(self, x):
        return self.c(torch.relu(self.g(x)))


def test_uint8_quantizes_stay():
    qdq, low, x = x86_flow(UnloweredUint8(), (2, 6, 8, 8))
    targets = _targets(low)
    assert torch.ops.aten.conv2d.default in targets  # the grouped conv
    uint8 = [n for n in low.graph.nodes if n.target == QD.quantize_per_tensor.default]
    assert uint8 and all(n.args[5] == torch.uint8 for n in uint8)
    assert all(n.args[4] == torch.int8 for n in low.graph.nodes if n.target == P.quantize_affine.default)
    torch.testing.assert_close(low(x), qdq(x), rtol=1e-5, atol=1e-5 * float(qdq(x).abs().max()))
