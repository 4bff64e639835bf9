"""lower-to-native on the in-place forms torchvision's models are written with: nn.ReLU(inplace=True)
(aten.relu_), `out += identity` (aten.add_.Tensor). They lower as their out-of-place forms do, to the
same codes, and an in-place add whose overwritten operand feeds another node keeps its chain."""

import pytest
import torch
from torch import nn
from torch.fx import Graph, GraphModule

import pt2q
from pt2q.quantizer import X86InductorQuantizer, XNNPACKQuantizer, get_default_x86_inductor_quantization_config
from pt2q.quantizer import get_symmetric_quantization_config

P = torch.ops.pt2q
A = torch.ops.aten
QD = torch.ops.quantized_decomposed


class Block(nn.Module):
    """torchvision's BasicBlock after a stem: one relu module called twice, the shortcut added in
    place (or both out of place)."""

    def __init__(self, inplace):
        super().__init__()
        self.inplace = inplace
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.c1 = nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.b1 = nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.b2 = nn.BatchNorm2d(8)
        self.relu = nn.ReLU(inplace=inplace)
        self.head = nn.Conv2d(8, 4, 1)

    def forward(self, x):
        x = self.relu(self.stem(x))
        out = self.relu(self.b1(self.c1(x)))
        out = self.b2(self.c2(out))
        if self.inplace:
            out += x
        else:
            out = out + x
        return self.head(self.relu(out))


QUANTIZERS = {
    "xnnpack_per_channel": lambda: XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True)),
    "xnnpack_per_tensor": lambda: XNNPACKQuantizer().set_global(get_symmetric_quantization_config()),
    "x86": lambda: X86InductorQuantizer().set_global(get_default_x86_inductor_quantization_config()),
}


def flows(inplace, quantizer):
    """(q/dq model, lowered model) of Block(inplace), weights and calibration fixed by the seed."""
    torch.manual_seed(0)
    model = Block(inplace).eval()
    for bn in (model.b1, model.b2):
        bn.running_mean.uniform_(-0.5, 0.5)
        bn.running_var.uniform_(0.5, 1.5)
    x = torch.randn(2, 3, 8, 8)
    p = pt2q.prepare_pt2e(torch.export.export(model, (x,)).module(), QUANTIZERS[quantizer]())
    g = torch.Generator().manual_seed(1)
    for _ in range(4):
        p(torch.randn(2, 3, 8, 8, generator=g))
    return pt2q.convert_pt2e(p), pt2q.convert_pt2e(p, lower_to_native=True)


def targets(gm):
    return [n.target for n in gm.graph.nodes if n.op == "call_function"]


@pytest.mark.parametrize("quantizer", sorted(QUANTIZERS))
def test_inplace_relu_and_add_lower_as_their_out_of_place_forms(quantizer):
    qdq_in, low_in = flows(True, quantizer)
    qdq_out, low_out = flows(False, quantizer)
    assert A.relu_.default in targets(qdq_in) and A.add_.Tensor in targets(qdq_in)
    natives = {t for t in targets(low_out) if t.namespace == "pt2q"}
    assert natives, targets(low_out)
    # the same native ops, and nothing of the float chain left beside them
    assert sorted(map(str, (t for t in targets(low_in) if t.namespace == "pt2q"))) == \
        sorted(map(str, (t for t in targets(low_out) if t.namespace == "pt2q")))
    for t in (A.relu_.default, A.add_.Tensor, A.relu.default, A.add.Tensor, A.conv2d.default):
        assert targets(low_in).count(t) == targets(low_out).count({A.relu_.default: A.relu.default,
                                                                  A.add_.Tensor: A.add.Tensor}.get(t, t)), t
    assert P.conv2d_q8.default in targets(low_in)
    if quantizer.startswith("xnnpack"):  # the block's add-relu is XNNPACK's add pattern
        assert P.add_q8.default in targets(low_in) and A.add_.Tensor not in targets(low_in)
    else:  # X86's conv -> add -> relu fusion: the shortcut becomes conv2d_q8's residual
        assert A.add_.Tensor not in targets(low_in)
        assert any(n.target == P.conv2d_q8.default and len(n.args) == 18 for n in low_in.graph.nodes)  # + residual
    g = torch.Generator().manual_seed(5)
    for _ in range(4):
        x = torch.randn(2, 3, 8, 8, generator=g) * 1.3
        assert torch.equal(qdq_in(x), qdq_out(x))
        assert torch.equal(low_in(x), low_out(x))


def lowered_targets(second_user):
    """dq(a) +=  dq(b) -> relu_ -> q, built by hand; with second_user, dq(a) (which the add
    overwrites) also feeds the output."""
    g = Graph()
    a, b = g.placeholder("a"), g.placeholder("b")
    da = g.call_function(QD.dequantize_per_tensor.default, (a, 0.02, 3, -128, 127, torch.int8))
    db = g.call_function(QD.dequantize_per_tensor.default, (b, 0.05, -1, -128, 127, torch.int8))
    s = g.call_function(A.add_.Tensor, (da, db))
    r = g.call_function(A.relu_.default, (s,))
    q = g.call_function(QD.quantize_per_tensor.default, (r, 0.06, -10, -128, 127, torch.int8))
    g.output((q, da) if second_user else (q,))
    ir = pt2q.graph.from_fx(GraphModule(nn.Module(), g))
    ir.run_passes(["lower-to-native"])
    return [n.target for n in ir.nodes()]


def test_inplace_add_lowers_only_where_its_overwritten_operand_feeds_nothing_else():
    lowered = lowered_targets(False)
    assert "pt2q.add_q8" in lowered and "aten.add_.Tensor" not in lowered and "aten.relu_" not in lowered
    # dq(a) is the sum once the add has run: a native add would hand its user the old value
    kept = lowered_targets(True)
    assert "pt2q.add_q8" not in kept and "aten.add_.Tensor" in kept


def test_lowered_model_runs_with_grad_mode_on():
    """mobilenet_v3's classifier under X86: linear_q8_float (nothing quantizes the linear's output)
    then an in-place hardswish. Called outside no_grad, its Parameter bias requires grad; the
    native op's output must still be writable in place, and the model must compile
    (kernels/autograd/not_differentiable.cpp)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.Flatten(), nn.Linear(8 * 6 * 6, 16), nn.Hardswish(inplace=True),
                          nn.Linear(16, 4)).eval()
    x = torch.randn(2, 3, 8, 8)
    p = pt2q.prepare_pt2e(torch.export.export(model, (x,)).module(), QUANTIZERS["x86"]())
    p(x)
    low = pt2q.convert_pt2e(p, lower_to_native=True)
    after = {n.args[0].target for n in low.graph.nodes if n.target == A.hardswish_.default}
    assert after == {P.linear_q8_float.default}, targets(low)
    assert any(t.requires_grad for t in low.parameters())
    with torch.no_grad():
        expected = low(x)
    y = low(x)
    assert not y.requires_grad and torch.equal(y, expected)
    assert torch.equal(torch.compile(low)(x), expected)
