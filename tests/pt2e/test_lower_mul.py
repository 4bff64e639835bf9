"""lower-to-native on XNNPACK's mul pattern (convert/lower_static_add.cpp): a squeeze-excitation
block's gate times its input, dq(x) * dq(gate) -> q, becomes pt2q.mul_q8 on the codes (the gate
broadcast over H and W), with outputs within one output step of the q/dq model's (the
convolutions' rounding; the multiply itself is exact); `x *= gate` in place lowers the
same way, and an in-place multiply whose overwritten operand feeds another node keeps its chain."""

import pytest
import torch
from torch import nn
from torch.fx import Graph, GraphModule

import pt2q
import torch.ao.quantization.fx._decomposed  # noqa: F401  (registers quantized_decomposed)
from pt2q.quantizer import XNNPACKQuantizer, get_symmetric_quantization_config

P = torch.ops.pt2q
A = torch.ops.aten
QD = torch.ops.quantized_decomposed


class SE(nn.Module):
    """torchvision's SqueezeExcitation between two convolutions (mobilenet_v3, efficientnet)."""

    def __init__(self, inplace):
        super().__init__()
        self.inplace = inplace
        self.stem, self.head = nn.Conv2d(3, 16, 3, padding=1), nn.Conv2d(16, 4, 1)
        self.pool, self.fc1, self.fc2 = nn.AdaptiveAvgPool2d(1), nn.Conv2d(16, 8, 1), nn.Conv2d(8, 16, 1)
        self.relu, self.gate = nn.ReLU(), nn.Hardsigmoid()

    def forward(self, x):
        x = self.stem(x)
        s = self.gate(self.fc2(self.relu(self.fc1(self.pool(x)))))
        if self.inplace:
            x *= s
        else:
            x = x * s
        return self.head(x)


def targets(gm):
    return [n.target for n in gm.graph.nodes if n.op == "call_function"]


@pytest.mark.parametrize("inplace", [False, True])
@pytest.mark.parametrize("per_channel", [False, True])
def test_squeeze_excitation_gate_becomes_mul_q8(per_channel, inplace):
    torch.manual_seed(0)
    model = SE(inplace).eval()
    x = torch.randn(2, 3, 11, 13)
    quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=per_channel))
    p = pt2q.prepare_pt2e(torch.export.export(model, (x,)).module(), quantizer)
    g = torch.Generator().manual_seed(1)
    for _ in range(4):
        p(torch.randn(2, 3, 11, 13, generator=g) * 2)
    qdq, low = pt2q.convert_pt2e(p), pt2q.convert_pt2e(p, lower_to_native=True)
    assert (A.mul_.Tensor if inplace else A.mul.Tensor) in targets(qdq)
    assert targets(low).count(P.mul_q8.default) == 1, targets(low)
    assert A.mul.Tensor not in targets(low) and A.mul_.Tensor not in targets(low)
    # mul_q8 gives the chain's codes bit for bit (tests/kernels/test_mul_q8.py, every code pair); the
    # convolutions' exact int32 sums and the q/dq model's fp32 ones may round a code apart
    step = [n for n in low.graph.nodes if n.target == QD.dequantize_per_tensor.default][-1].args[1]
    for _ in range(4):
        x = torch.randn(2, 3, 11, 13, generator=g) * 3
        d = (low(x) - qdq(x)).abs()
        assert d.max() <= step * 1.0001 and (d > 0).float().mean() < 0.01, (d.max(), (d > 0).sum())


def lowered_targets(second_user):
    """dq(a) *= dq(b) -> q, built by hand; with second_user, dq(a) (which the multiply overwrites)
    also feeds the output."""
    g = Graph()
    a, b = g.placeholder("a"), g.placeholder("b")
    da = g.call_function(QD.dequantize_per_tensor.default, (a, 0.02, 3, -128, 127, torch.int8))
    db = g.call_function(QD.dequantize_per_tensor.default, (b, 0.05, -1, -128, 127, torch.int8))
    m = g.call_function(A.mul_.Tensor, (da, db))
    q = g.call_function(QD.quantize_per_tensor.default, (m, 0.06, -10, -128, 127, torch.int8))
    g.output((q, da) if second_user else (q,))
    ir = pt2q.graph.from_fx(GraphModule(nn.Module(), g))
    ir.run_passes(["lower-to-native"])
    return [n.target for n in ir.nodes()]


def test_inplace_mul_lowers_only_where_its_overwritten_operand_feeds_nothing_else():
    assert "pt2q.mul_q8" in lowered_targets(False)
    kept = lowered_targets(True)
    assert "pt2q.mul_q8" not in kept and "aten.mul_.Tensor" in kept
