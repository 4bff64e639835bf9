"""convert_pt2e(..., lower_to_native=True) on static XNNPACK graphs: dq -> linear / conv2d
[-> relu] -> q chains with per-channel weights become pt2q.linear_q8 / conv2d_q8 on the input
codes (the relu folded into the output clamp, the weight packed at convert time); the model's
output equals the q/dq model's within one step of each output quantizer (the native ops' codes
are within one of the chain's) and is mostly identical; chains that do not fit stay q/dq; export
and compile."""

import pytest
import torch
from torch import nn

import pt2q
from pt2q.quantizer import X86InductorQuantizer, XNNPACKQuantizer, get_default_x86_inductor_quantization_config
from pt2q.quantizer import get_symmetric_quantization_config

P = torch.ops.pt2q
QD = torch.ops.quantized_decomposed


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 16, 3, padding=1)
        self.c2 = nn.Conv2d(16, 8, 3, stride=2, dilation=1)
        self.c3 = nn.Conv2d(8, 8, (1, 3), padding=(0, 1), bias=False)
        self.l1 = nn.Linear(8 * 3 * 3, 32)
        self.l2 = nn.Linear(32, 10)

    def forward(self, x):
        x = torch.relu(self.c1(x))
        x = self.c3(self.c2(x))
        x = torch.relu(self.l1(x.flatten(1)))
        return self.l2(x)


def _targets(gm):
    return [n.target for n in gm.graph.nodes if n.op == "call_function"]


def _flow(quantizer, seed=0):
    torch.manual_seed(seed)
    model, x = Net().eval(), torch.randn(4, 3, 8, 8)
    p = pt2q.prepare_pt2e(torch.export.export(model, (x,)).module(), quantizer)
    for _ in range(4):
        p(torch.randn(4, 3, 8, 8) * 1.5)
    return pt2q.convert_pt2e(p), pt2q.convert_pt2e(p, lower_to_native=True), x


def _xnnpack():
    return XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_static_chains_lower_and_match_the_qdq_model(seed):
    qdq, low, x = _flow(_xnnpack(), seed)
    targets = _targets(low)
    assert targets.count(P.conv2d_q8.default) == 3 and targets.count(P.linear_q8.default) == 2
    assert QD.dequantize_per_channel.default not in targets
    assert not any(t in targets for t in (torch.ops.aten.conv2d.default, torch.ops.aten.linear.default))
    assert not any(n.startswith("_frozen_param") for n, _ in low.named_buffers())
    # the relu after c1 and l1 is the clamp's lower end: output_quant_min = output zero point
    for n in low.graph.nodes:
        if n.target in (P.conv2d_q8.default, P.linear_q8.default):
            relu = n.args[-2] == n.args[-3]
            assert relu == (n.name in {"conv2d_q8", "linear_q8"}), n.format_node()
    final = next(n for n in qdq.graph.nodes if n.op == "output").args[0][0]
    step = final.args[1]  # the last dequantize's scale
    a, b = qdq(x), low(x)
    assert float((a - b).abs().max()) <= 1.5 * step
    xs = [torch.randn(4, 3, 8, 8) * 1.5 for _ in range(16)]
    assert sum(float((qdq(x2) != low(x2)).float().mean()) for x2 in xs) / len(xs) < 0.05


def _x86():
    return X86InductorQuantizer().set_global(get_default_x86_inductor_quantization_config())


@pytest.mark.parametrize("seed", [0, 1])
def test_uint8_chains_lower_through_int8_codes(seed):
    """X86InductorQuantizer's activations are uint8: each chain it closes with a quantize runs on
    int8 codes 128 below (zero point, clamp and every dequantize of those codes shifted with them,
    which changes no value), the last linear (its output not quantized) linear_q8_float on its
    input's codes; the output is within one input step of that linear of the q/dq model's, and
    mostly identical."""
    qdq, low, x = _flow(_x86(), seed)
    targets = _targets(low)
    assert targets.count(P.conv2d_q8.default) == 3 and targets.count(P.linear_q8.default) == 1
    assert targets.count(P.linear_q8_float.default) == 1 and P.linear_w8a16.default not in targets
    last = next(n for n in low.graph.nodes if n.target == P.linear_q8_float.default)
    assert last.args[0].target == P.linear_q8.default  # l1's codes, no dequantize between
    assert not any(t in targets for t in (torch.ops.aten.conv2d.default, torch.ops.aten.linear.default))
    # no uint8 code is left: every quantize / dequantize that remains was shifted to int8
    for n in low.graph.nodes:
        if n.target in (QD.quantize_per_tensor.default, QD.dequantize_per_tensor.default):
            assert n.args[3:] == (-128, 127, torch.int8), n.format_node()
    # each native op reads codes of a quantize of the q/dq model (known by its scale), whose uint8
    # zero point z is now z - 128; its own output's likewise
    uint8_q = {n.args[1]: n.args[2] for n in qdq.graph.nodes if n.target == QD.quantize_per_tensor.default}
    assert uint8_q and all(n.args[3:] == (0, 255, torch.uint8) for n in qdq.graph.nodes
                           if n.target == QD.quantize_per_tensor.default)
    for n in low.graph.nodes:
        if n.target in (P.conv2d_q8.default, P.linear_q8.default):
            assert n.args[2] == uint8_q[n.args[1]] - 128 and n.args[-3] == uint8_q[n.args[-4]] - 128, n.format_node()
            assert n.args[-1] == 127 and n.args[-2] in (-128, n.args[-3]), n.format_node()
    last = next(n for n in qdq.graph.nodes if n.target == torch.ops.aten.linear.default
                and n.args[0].target == QD.dequantize_per_tensor.default and n.next.op == "output")
    step = last.args[0].args[1]
    w = getattr(qdq, last.args[1].args[0].target).float() * getattr(qdq, last.args[1].args[1].target)[:, None]
    a, b = qdq(x).detach(), low(x).detach()
    assert float((a - b).abs().max()) <= 1.5 * step * float(w.detach().abs().sum(1).max())
    # apart from the last linear's fp32 summation order, mostly identical codes
    xs = [torch.randn(4, 3, 8, 8) * 1.5 for _ in range(16)]
    off = [float((~torch.isclose(qdq(x2), low(x2), rtol=1e-5, atol=1e-6)).float().mean()) for x2 in xs]
    assert sum(off) / len(off) < 0.05


def test_uint8_shift_is_exact_for_quantize_and_dequantize():
    """The identity the uint8 lowering rests on, on torch's own ops: uint8 codes for (z, 0, 255)
    are the int8 codes for (z - 128, -128, 127) plus 128, and dequantize to the same values."""
    torch.manual_seed(0)
    x = torch.cat([torch.randn(4096) * 40, torch.tensor([float("inf"), float("-inf"), 1e30, -1e30, 0.0, -0.0])])
    for scale, z in ((0.37, 0), (0.37, 255), (0.011, 131), (3.0, 17)):
        for qmin, qmax in ((0, 255), (z, 255)):
            u = QD.quantize_per_tensor.default(x, scale, z, qmin, qmax, torch.uint8)
            i = QD.quantize_per_tensor.default(x, scale, z - 128, qmin - 128, qmax - 128, torch.int8)
            assert torch.equal(u.int(), i.int() + 128)
            assert torch.equal(QD.dequantize_per_tensor.default(u, scale, z, qmin, qmax, torch.uint8),
                               QD.dequantize_per_tensor.default(i, scale, z - 128, qmin - 128, qmax - 128, torch.int8))


class Branchy(nn.Module):
    """A quantized conv whose input quantize also feeds an op pt2q does not lower (max_pool2d)."""

    def __init__(self):
        super().__init__()
        self.c0 = nn.Conv2d(3, 8, 3, padding=1)
        self.c1 = nn.Conv2d(8, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 8, 1)

    def forward(self, x):
        y = torch.relu(self.c0(x))
        return self.c2(self.c1(y) + 0) + nn.functional.max_pool2d(y, 3, 1, 1)


def test_uint8_quantize_shared_with_an_unlowered_op_moves_to_int8_whole():
    qdq, low, x = x86_flow(Branchy(), (2, 3, 8, 8))
    assert _targets(low).count(P.conv2d_q8.default) >= 1
    for n in low.graph.nodes:  # every quantize and its dequantizes agree on the dtype
        if n.target == QD.quantize_per_tensor.default:
            assert all(u.args[1:] == n.args[1:] for u in n.users if u.target == QD.dequantize_per_tensor.default)
    a, b = qdq(x).detach(), low(x).detach()
    # c2's output is the model's: conv2d_q8_float, whose exact integer sum differs from ATen's fp32
    # convolution by its rounding only
    assert float((~torch.isclose(a, b, rtol=1e-5, atol=1e-6)).float().mean()) < 0.05
    torch.testing.assert_close(b, a, rtol=0, atol=0.05 * float(a.abs().max()))


def test_lowered_static_model_exports_and_compiles():
    _, low, x = _flow(_xnnpack())
    ep = torch.export.export(low, (x,))
    assert "pt2q.conv2d_q8.default" in {str(n.target) for n in ep.graph.nodes}
    assert torch.equal(ep.module()(x), low(x))
    assert torch.equal(torch.compile(low)(x), low(x))


class MobileNetish(nn.Module):
    """Depthwise-separable blocks (MobileNet), a depthwise conv with multiplier 2, a grouped conv
    of 16 input channels per group (ResNeXt; conv2d_q8 runs it directly) and one of 2 per group
    (it would run a GEMM per group)."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1)
        self.dw1 = nn.Conv2d(16, 16, 3, stride=2, padding=1, groups=16)
        self.pw1 = nn.Conv2d(16, 32, 1)
        self.dw2 = nn.Conv2d(32, 64, 3, padding=1, groups=32, bias=False)
        self.grouped = nn.Conv2d(64, 32, 3, padding=1, groups=4)
        self.grouped2 = nn.Conv2d(32, 32, 3, padding=1, groups=16)
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        x = torch.relu(self.stem(x))
        x = torch.relu(self.pw1(torch.relu(self.dw1(x))))
        x = torch.relu(self.grouped2(torch.relu(self.grouped(self.dw2(x)))))
        return self.head(x.mean((2, 3)))


def test_depthwise_and_direct_grouped_convs_lower_with_their_groups():
    torch.manual_seed(0)
    model, x = MobileNetish().eval(), torch.randn(2, 3, 12, 12)
    p = pt2q.prepare_pt2e(torch.export.export(model, (x,)).module(), _xnnpack())
    for _ in range(4):
        p(torch.randn(2, 3, 12, 12) * 1.5)
    qdq, low = pt2q.convert_pt2e(p), pt2q.convert_pt2e(p, lower_to_native=True)
    convs = [n for n in low.graph.nodes if n.target == P.conv2d_q8.default]
    # groups is the 15th argument when it is not 1; the grouped conv of 2 channels per group stays
    assert sorted(n.args[14] if len(n.args) > 14 else 1 for n in convs) == [1, 1, 4, 16, 32]
    left = [n for n in low.graph.nodes if n.target == torch.ops.aten.conv2d.default]
    assert len(left) == 1 and left[0].args[6] == 16
    outs = [n for n in qdq.graph.nodes if n.op == "output"][0].args[0]
    step = outs[0].args[1]
    for x2 in [x] + [torch.randn(2, 3, 12, 12) * 1.5 for _ in range(4)]:
        a, b = qdq(x2), low(x2)
        assert float((a - b).abs().max()) <= 1.5 * step
    ep = torch.export.export(low, (x,))
    assert torch.equal(ep.module()(x), low(x))


class Residual(nn.Module):
    """Two residual additions, one with a relu after it (XNNPACK's add-relu pattern), one without."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(8, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 8, 3, padding=1)

    def forward(self, x):
        y = torch.relu(self.c1(x))
        z = torch.relu(self.c2(y) + y)
        return z + x


def residual_flow(quantizer):
    """(q/dq model, lowered model, example input) of Residual under `quantizer`."""
    torch.manual_seed(0)
    model, x = Residual().eval(), torch.randn(2, 8, 6, 6)
    p = pt2q.prepare_pt2e(torch.export.export(model, (x,)).module(), quantizer)
    for _ in range(4):
        p(torch.randn(2, 8, 6, 6))
    return pt2q.convert_pt2e(p), pt2q.convert_pt2e(p, lower_to_native=True), x


def test_static_adds_lower_to_add_q8_with_the_chains_qparams():
    qdq, low, x = residual_flow(_xnnpack())
    targets = _targets(low)
    assert targets.count(P.add_q8.default) == 2 and torch.ops.aten.add.Tensor not in targets
    assert targets.count(P.conv2d_q8.default) == 2
    # each add_q8 carries the qparams of the dequantizes and the quantize it replaced
    adds = [n for n in qdq.graph.nodes if n.target == torch.ops.aten.add.Tensor]
    for add, native in zip(adds, [n for n in low.graph.nodes if n.target == P.add_q8.default]):
        q = next(iter(add.users)) if next(iter(add.users)).target != torch.ops.aten.relu.default else \
            next(iter(next(iter(add.users)).users))
        relu = next(iter(add.users)).target == torch.ops.aten.relu.default
        da, db = add.args
        assert native.args[1:3] == da.args[1:3] and native.args[4:6] == db.args[1:3]
        assert native.args[6:8] == q.args[1:3] and native.args[9] == q.args[4]
        assert native.args[8] == (max(q.args[3], q.args[2]) if relu else q.args[3])
    a, b = qdq(x).detach(), low(x).detach()
    step = next(n for n in qdq.graph.nodes if n.op == "output").args[0][0].args[1]
    assert float((a - b).abs().max()) <= 2.5 * step  # the convs' codes within one, the adds exact
    xs = [torch.randn(2, 8, 6, 6) for _ in range(8)]
    assert sum(float((qdq(x2) != low(x2)).float().mean()) for x2 in xs) / len(xs) < 0.05


def test_x86_conv_whose_sum_nothing_quantizes_takes_the_float_conv():
    """X86 quantizes no plain add, so Residual's relu(c2(y) + y) is not quantized (z + x reads it
    float): nothing closes c2's chain, and c2 becomes conv2d_q8_float on y's codes (its float sum
    then added to the dequantized y as before); the lowered model is the q/dq one within fp32
    rounding."""
    qdq, low, x = residual_flow(_x86())
    targets = _targets(low)
    assert P.add_q8.default not in targets and targets.count(torch.ops.aten.add.Tensor) == 2
    assert targets.count(P.conv2d_q8.default) == 1 and targets.count(P.conv2d_q8_float.default) == 1
    assert torch.ops.aten.conv2d.default not in targets
    c1 = next(n for n in low.graph.nodes if n.target == P.conv2d_q8.default)
    c2 = next(n for n in low.graph.nodes if n.target == P.conv2d_q8_float.default)
    assert c2.args[0] is c1 and c2.args[1:3] == c1.args[10:12] and len(c2.args) == 10
    for x2 in [x] + [torch.randn(2, 8, 6, 6) for _ in range(4)]:
        torch.testing.assert_close(low(x2), qdq(x2), rtol=1e-5, atol=1e-5)


def x86_flow(model, shape, device="cpu"):
    """(q/dq model, lowered model, example input) of `model` under X86InductorQuantizer."""
    torch.manual_seed(0)
    model, x = model.eval().to(device), torch.randn(*shape, device=device)
    p = pt2q.prepare_pt2e(torch.export.export(model, (x,)).module(), _x86())
    for _ in range(4):
        p(torch.randn(*shape, device=device))
    return pt2q.convert_pt2e(p), pt2q.convert_pt2e(p, lower_to_native=True), x


def head_step(qdq):
    """How far one code of its input moves the output of the model's last conv (unlowered: its
    output is the model's): the input's scale times the largest L1 norm of a dequantized filter."""
    head = next(n for n in qdq.graph.nodes if n.target == torch.ops.aten.conv2d.default and n.next.op == "output")
    w = getattr(qdq, head.args[1].args[0].target).float() * getattr(qdq, head.args[1].args[1].target)[
        :, None, None, None]
    return head.args[0].args[1] * float(w.abs().sum((1, 2, 3)).max())


def close_to_qdq(qdq, low, xs, step, off_fraction):
    """The lowered model within 1.5 steps of the q/dq one on every input, and mostly identical."""
    for x2 in xs:
        assert float((qdq(x2) - low(x2)).abs().max()) <= 1.5 * step
    off = [float((~torch.isclose(qdq(x2), low(x2), rtol=1e-5, atol=1e-5)).float().mean()) for x2 in xs]
    assert sum(off) / len(off) < off_fraction


class ResidualHead(Residual):
    """relu(c2(y) + y) read by a conv, which quantizes it."""

    def __init__(self):
        super().__init__()
        self.head = nn.Conv2d(8, 4, 3)

    def forward(self, x):
        y = torch.relu(self.c1(x))
        return self.head(torch.relu(self.c2(y) + y))


def test_x86_conv_add_relu_lowers_to_a_conv_with_a_residual():
    """X86's conv -> add -> relu fusion leaves the conv's output float, so no add_q8: the add of
    the dequantized y becomes conv2d_q8's residual (y's codes and qparams, moved to int8)."""
    qdq, low, x = x86_flow(ResidualHead(), (2, 8, 6, 6))
    targets = _targets(low)
    assert P.add_q8.default not in targets and torch.ops.aten.add.Tensor not in targets
    # the head's output is the model's, not quantized: conv2d_q8_float
    assert targets.count(P.conv2d_q8.default) == 2 and targets.count(P.conv2d_q8_float.default) == 1
    assert torch.ops.aten.conv2d.default not in targets
    c1, c2 = [n for n in low.graph.nodes if n.target == P.conv2d_q8.default]
    assert len(c1.args) == 14 and len(c2.args) == 18
    # c2's input and its residual are both c1's codes, with c1's output qparams
    assert c2.args[0] is c1 and c2.args[15] is c1 and c2.args[16:] == (c1.args[10], c1.args[11])
    assert c2.args[12] == c2.args[11] and c2.args[14] == 1  # the relu, groups
    relu = next(n for n in qdq.graph.nodes if n.target == torch.ops.aten.relu.default
                and n.args[0].target == torch.ops.aten.add.Tensor)
    q = next(iter(relu.users))
    assert (c2.args[10], c2.args[11]) == (q.args[1], q.args[2] - 128)
    # the head's output within one step of z's codes of the q/dq model's, and mostly identical
    close_to_qdq(qdq, low, [x] + [torch.randn(2, 8, 6, 6) for _ in range(8)], head_step(qdq), 0.05)
    ep = torch.export.export(low, (x,))
    assert torch.equal(ep.module()(x), low(x))


class Clamped(nn.Module):
    """X86's conv -> hardtanh fusions: nn.ReLU6(inplace=True) (aten.hardtanh_(x, 0, 6)) and a
    Hardtanh of other bounds, then a head conv."""

    def __init__(self):
        super().__init__()
        self.c1, self.a1 = nn.Conv2d(3, 8, 3, padding=1), nn.ReLU6(inplace=True)
        self.c2, self.a2 = nn.Conv2d(8, 8, 3, padding=1), nn.Hardtanh(-0.5, 0.75)
        self.head = nn.Conv2d(8, 4, 1)

    def forward(self, x):
        return self.head(self.a2(self.c2(self.a1(self.c1(x)))))


def test_x86_conv_hardtanh_folds_into_the_output_clamp():
    """quantize(hardtanh(y, lo, hi)) = clamp(quantize(y), quantize(lo), quantize(hi)) (quantize
    never decreases): the hardtanh becomes conv2d_q8's output clamp, its bounds quantized as
    quantize_per_tensor quantizes them."""
    qdq, low, x = x86_flow(Clamped(), (2, 3, 8, 8))
    targets = _targets(low)
    assert targets.count(P.conv2d_q8.default) == 2 and targets.count(P.conv2d_q8_float.default) == 1
    assert not {torch.ops.aten.hardtanh.default, torch.ops.aten.hardtanh_.default,
                torch.ops.aten.conv2d.default} & set(targets)
    for conv, (lo, hi) in zip([n for n in low.graph.nodes if n.target == P.conv2d_q8.default], [(0.0, 6.0), (-0.5, 0.75)]):
        scale, zp = conv.args[10], conv.args[11]
        codes = QD.quantize_per_tensor.default(torch.tensor([lo, hi]), scale, zp, -128, 127, torch.int8)
        assert list(conv.args[12:14]) == codes.tolist(), (conv.args[10:14], codes)
    close_to_qdq(qdq, low, [x] + [torch.randn(2, 3, 8, 8) * 2 for _ in range(8)], head_step(qdq), 0.05)


class Bottleneck(nn.Module):
    """ResNet's shapes of residual: an identity block whose add has the conv second, then a
    downsampling block (a strided 1x1 conv on the shortcut) without a relu after its add, then a
    conv that quantizes its output."""

    def __init__(self):
        super().__init__()
        self.a1 = nn.Conv2d(8, 8, 3, padding=1)
        self.a2 = nn.Conv2d(8, 8, 3, padding=1)
        self.b1 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.b2 = nn.Conv2d(16, 16, 1)
        self.down = nn.Conv2d(8, 16, 1, stride=2)
        self.head = nn.Conv2d(16, 4, 3)

    def forward(self, x):
        y = torch.relu(x + self.a2(torch.relu(self.a1(x))))
        z = self.b2(torch.relu(self.b1(y))) + self.down(y)
        return self.head(z)


def test_x86_residual_blocks_lower_in_either_order_and_without_relu():
    qdq, low, x = x86_flow(Bottleneck(), (2, 8, 10, 10))
    targets = _targets(low)
    assert torch.ops.aten.add.Tensor not in targets and torch.ops.aten.conv2d.default not in targets
    assert targets.count(P.conv2d_q8_float.default) == 1  # the head
    convs = [n for n in low.graph.nodes if n.target == P.conv2d_q8.default]
    with_residual = [n for n in convs if len(n.args) == 18]
    assert len(convs) == 5 and len(with_residual) == 2
    a2, b2 = with_residual
    assert a2.args[12] == a2.args[11]  # relu after x + a2(...)
    assert b2.args[12] == -128  # no relu after b2(...) + down(y)
    assert b2.args[15].target == P.conv2d_q8.default  # the shortcut conv's codes
    for n in low.graph.nodes:
        if n.target in (QD.quantize_per_tensor.default, QD.dequantize_per_tensor.default):
            assert n.args[3:] == (-128, 127, torch.int8), n.format_node()
    close_to_qdq(qdq, low, [x] + [torch.randn(2, 8, 10, 10) for _ in range(8)], head_step(qdq), 0.1)


class UnfusableAdds(nn.Module):
    """conv -> add shapes conv2d_q8's residual does not take: a broadcast addend, a depthwise conv."""

    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(8, 8, 3, padding=1)
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.head = nn.Conv2d(8, 4, 1)

    def forward(self, x):
        y = torch.relu(self.c(x) + x.mean((2, 3), keepdim=True))
        z = torch.relu(self.dw(y) + y)
        return self.head(z)


def test_x86_adds_the_residual_cannot_take_keep_their_chains():
    qdq, low, x = x86_flow(UnfusableAdds(), (2, 8, 6, 6))
    targets = _targets(low)
    # both adds stay float after their float convs: the plain conv and the head take
    # conv2d_q8_float, the depthwise one (groups 8) keeps its chain
    assert targets.count(torch.ops.aten.add.Tensor) == 2 and P.conv2d_q8.default not in targets
    assert targets.count(P.conv2d_q8_float.default) == 2
    dw = [n for n in low.graph.nodes if n.target == torch.ops.aten.conv2d.default]
    assert len(dw) == 1 and dw[0].args[6] == 8
    close_to_qdq(qdq, low, [x] + [torch.randn(2, 8, 6, 6) for _ in range(4)], head_step(qdq), 0.05)


class Pooled(nn.Module):
    """A stem: conv -> relu -> max_pool2d (its qparams shared with its input) -> conv."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 8, 3, padding=1)

    def forward(self, x):
        return self.c2(nn.functional.max_pool2d(torch.relu(self.c1(x)), 3, 2, 1))


@pytest.mark.parametrize("which", ["xnnpack", "x86"])
def test_max_pool_lowers_on_the_codes(which):
    """XNNPACK's int8 chain, and X86's uint8 one whose neighbours' lowering already moved its input
    and output quantizes to int8: max_pool2d_q8 on the codes, the same output as the chain's
    wherever the convs' codes agree."""
    torch.manual_seed(0)
    model, x = Pooled().eval(), torch.randn(2, 3, 12, 12)
    p = pt2q.prepare_pt2e(torch.export.export(model, (x,)).module(), _xnnpack() if which == "xnnpack" else _x86())
    for _ in range(4):
        p(torch.randn(2, 3, 12, 12))
    qdq, low = pt2q.convert_pt2e(p), pt2q.convert_pt2e(p, lower_to_native=True)
    targets = _targets(low)
    assert targets.count(P.max_pool2d_q8.default) == 1 and torch.ops.aten.max_pool2d.default not in targets
    pool = next(n for n in low.graph.nodes if n.target == P.max_pool2d_q8.default)
    assert pool.args[0].target == P.conv2d_q8.default and list(pool.args[1:4]) == [[3, 3], [2, 2], [1, 1]]
    xs = [torch.randn(2, 3, 12, 12) for _ in range(8)]
    off = [float((~torch.isclose(qdq(x2), low(x2), rtol=1e-5, atol=1e-6)).float().mean()) for x2 in xs]
    assert sum(off) / len(off) < 0.05


def test_max_pool_with_other_qparams_after_it_keeps_its_chain():
    """A quantize after max_pool2d with qparams of its own (a hand-written annotation) is not the
    pooled codes: the chain stays; with the input's qparams it lowers."""
    from torch.fx import Graph, GraphModule

    def lowered_targets(out_scale):
        g = Graph()
        x = g.placeholder("x")
        d = g.call_function(QD.dequantize_per_tensor.default, (x, 0.02, 3, -128, 127, torch.int8))
        m = g.call_function(torch.ops.aten.max_pool2d.default, (d, [2, 2], [2, 2]))
        g.output(g.call_function(QD.quantize_per_tensor.default, (m, out_scale, 3, -128, 127, torch.int8)))
        ir = pt2q.graph.from_fx(GraphModule(torch.nn.Module(), g))
        ir.run_passes(["lower-to-native"])
        return {n.target for n in ir.nodes()}

    assert "pt2q.max_pool2d_q8" not in lowered_targets(0.05)
    assert "pt2q.max_pool2d_q8" in lowered_targets(0.02)


@pytest.mark.parametrize("name", ["transformer_encoder", "gpt_block"])
def test_x86_transformer_linears_run_on_their_input_codes(name):
    """X86 quantizes each linear's input but leaves its output float (the next op, an add,
    softmax, GELU or layer norm, is not one it quantizes): every linear lowers to
    linear_q8_float on its input's codes (before, to the weight-only linear on the dequantized
    input), and the model stays within a small fraction of the q/dq model's output."""
    from tests.pt2e.models import calibration_batches, make

    model, args, _ = make(name)
    p = pt2q.prepare_pt2e(torch.export.export(model, args).module(), _x86())
    for b in calibration_batches(args):
        p(*b)
    qdq, low = pt2q.convert_pt2e(p), pt2q.convert_pt2e(p, lower_to_native=True)
    linears = [n for n in qdq.graph.nodes if n.target == torch.ops.aten.linear.default]
    targets = _targets(low)
    assert linears and targets.count(P.linear_q8_float.default) == len(linears)
    assert torch.ops.aten.linear.default not in targets and P.linear_w8a16.default not in targets
    # each reads int8 codes from a quantize, itself lowered to quantize_affine over one block
    for n in low.graph.nodes:
        if n.target == P.linear_q8_float.default:
            q = n.args[0]
            assert q.target == P.quantize_affine.default and q.args[4:] == (torch.int8, -128, 127)
            assert list(q.args[1]) == list(q.args[0].meta["val"].shape)
    for b in [args] + calibration_batches(args, seed=5):
        a, c = qdq(*b).detach(), low(*b).detach()
        assert float((a - c).abs().max()) <= 0.02 * float(a.abs().max())
