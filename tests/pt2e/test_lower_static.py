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


def test_uint8_activations_keep_their_chain():
    """X86InductorQuantizer's activations are uint8: the static pattern (int8) does not apply, the
    weights still lower (weight-only linear) and the convs stay q/dq."""
    qdq, low, x = _flow(X86InductorQuantizer().set_global(get_default_x86_inductor_quantization_config()))
    targets = _targets(low)
    assert P.conv2d_q8.default not in targets and P.linear_q8.default not in targets
    torch.testing.assert_close(low(x), qdq(x), rtol=1e-4, atol=1e-4)


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
