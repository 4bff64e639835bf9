"""convert_pt2e(..., lower_to_native=True) with Int8WeightOnlyQuantizer: every linear becomes
pt2q.linear_w8a16 with its weight packed at convert time (no dequantize left, no float or int8
copy of the weight kept), without calibration; outputs equal the unlowered q/dq model within
the bound of fp32 summation; weight qparams are torch.ao's per-channel observer's; module
filters; export and compile. Static chains: test_lower_static.py."""

import pytest
import torch
from torch import nn

import pt2q
from pt2q.quantizer import Int8WeightOnlyQuantizer, X86InductorQuantizer, XNNPACKQuantizer
from pt2q.quantizer import get_default_x86_inductor_quantization_config, get_symmetric_quantization_config

P = torch.ops.pt2q
QD = torch.ops.quantized_decomposed
EPS32 = 2.0 ** -24


def _targets(gm):
    return [n.target for n in gm.graph.nodes if n.op == "call_function"]


def _flow(model, args, quantizer, calibrate=False):
    p = pt2q.prepare_pt2e(torch.export.export(model, args).module(), quantizer)
    if calibrate:
        p(*args)
    return pt2q.convert_pt2e(p), pt2q.convert_pt2e(p, lower_to_native=True)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(3, 64), (2, 5, 33), (1, 130)])
def test_one_linear_lowers_and_matches_the_qdq_model(shape, bias):
    torch.manual_seed(0)
    k = shape[-1]
    model = nn.Linear(k, 37, bias=bias).eval()
    x = torch.randn(*shape)
    qdq, low = _flow(model, (x,), Int8WeightOnlyQuantizer())
    assert _targets(low).count(P.linear_w8a16.default) == 1
    assert not any("quantized_decomposed" in str(t) for t in _targets(low))
    assert not any(n.startswith("_frozen_param") for n, _ in low.named_buffers())  # no int8 copy kept
    # the dequantized weight the q/dq model uses, and the bound of two fp32 sums in any order
    dq = next(n for n in qdq.graph.nodes if n.target == QD.dequantize_per_channel.default)
    w = QD.dequantize_per_channel.default(*[getattr(qdq, a.target) if isinstance(a, torch.fx.Node) else a
                                            for a in dq.args])
    terms = x.abs() @ w.abs().t() + (model.bias.abs() if bias else 0)
    err = (low(x) - qdq(x)).abs()
    assert bool((err <= 2 * (k + 2) * EPS32 * terms + 1e-30).all())


def test_weight_qparams_are_torch_aos_per_channel_observer():
    torch.manual_seed(0)
    model = nn.Linear(48, 20).eval()
    _, low = _flow(model, (torch.randn(2, 48),), Int8WeightOnlyQuantizer())
    ref = torch.ao.quantization.PerChannelMinMaxObserver(ch_axis=0, dtype=torch.qint8, quant_min=-127, quant_max=127,
                                                        qscheme=torch.per_channel_symmetric, eps=2 ** -12)
    ref(model.weight.detach())
    scale, _ = ref.calculate_qparams()
    node = next(n for n in low.graph.nodes if n.target == P.linear_w8a16.default)
    assert torch.equal(getattr(low, node.args[2].target), scale)
    assert node.args[3] is None  # symmetric: zero points all zero, dropped
    codes = torch.clamp(torch.round(model.weight.detach() / scale[:, None]), -127, 127).to(torch.int8)
    assert torch.equal(getattr(low, node.args[1].target), P.pack_weight_int8(codes))


class TwoLayers(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(32, 64)
        self.b = nn.Linear(64, 16)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def test_module_filter_lowers_only_the_selected_linear():
    torch.manual_seed(0)
    x = torch.randn(4, 32)
    _, low = _flow(TwoLayers().eval(), (x,), Int8WeightOnlyQuantizer().set_module_name("b"))
    targets = _targets(low)
    assert targets.count(P.linear_w8a16.default) == 1 and targets.count(torch.ops.aten.linear.default) == 1
    _, low = _flow(TwoLayers().eval(), (x,), Int8WeightOnlyQuantizer().set_module_type(nn.Linear))
    assert _targets(low).count(P.linear_w8a16.default) == 2


def _weight_dq_scales(qdq):
    return [n.args[1] for n in qdq.graph.nodes
            if n.target == QD.dequantize_per_tensor.default and n.args[0].op == "get_attr"]


def test_static_per_tensor_weights_lower_with_one_scale_per_channel():
    """XNNPACK's default config quantizes weights per tensor: each static chain becomes linear_q8
    with the weight's scale, as the dequantize applies it (in fp32), repeated per output channel;
    outputs within one step of the output quantizer of the q/dq model's, mostly identical."""
    torch.manual_seed(0)
    x = torch.randn(4, 32)
    q = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=False))
    qdq, low = _flow(TwoLayers().eval(), (x,), q, calibrate=True)
    natives = [n for n in low.graph.nodes if n.target == P.linear_q8.default]
    assert len(natives) == 2 and torch.ops.aten.linear.default not in _targets(low)
    assert not any(n.startswith("_frozen_param") for n, _ in low.named_buffers())
    scales = _weight_dq_scales(qdq)
    assert len(scales) == 2 and all(isinstance(v, float) for v in scales)
    for node, scale, n_out in zip(natives, scales, (64, 16)):
        got = getattr(low, node.args[4].target)
        assert got.dtype == torch.float32 and torch.equal(got, torch.full((n_out,), scale, dtype=torch.float32))
    step = next(n for n in qdq.graph.nodes if n.op == "output").args[0][0].args[1]
    a, b = qdq(x), low(x)
    assert float((a - b).abs().max()) <= 1.5 * step
    assert float((a != b).float().mean()) < 0.05


def test_dynamic_per_tensor_weights_lower_to_w8a8():
    """XNNPACK's dynamic config with its default per-tensor weights: linear_w8a8 with
    per_tensor_eps; the same activation codes, so within the bound of fp32 summation."""
    torch.manual_seed(0)
    x = torch.randn(4, 32) * 2
    q = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_dynamic=True))
    qdq, low = _flow(TwoLayers().eval(), (x,), q)
    natives = [n for n in low.graph.nodes if n.target == P.linear_w8a8.default]
    assert len(natives) == 2 and all(n.kwargs == {"per_tensor_eps": 2.0 ** -12} for n in natives)
    assert all(n.args[3] is None for n in natives)  # symmetric: no zero points
    assert not any("quantized_decomposed" in str(t) for t in _targets(low))
    for node, scale in zip(natives, _weight_dq_scales(qdq)):
        assert torch.equal(getattr(low, node.args[2].target), torch.full_like(getattr(low, node.args[2].target), scale))
    a, b = qdq(x), low(x)
    assert float((a - b).abs().max()) <= 1e-5 * float(a.abs().max())
    assert torch.equal(torch.compile(low)(x), b)


def test_x86_dynamic_uint8_chain_lowers_to_per_tensor_w8a8():
    """X86InductorQuantizer's dynamic config chooses uint8 qparams over [0, 255]: the same scale as
    over [-128, 127] and a zero point 128 higher, so the same dequantized x: linear_w8a8 with
    per_tensor_eps, within the bound of fp32 summation of the q/dq model."""
    torch.manual_seed(0)
    x = torch.randn(4, 32) * 2 + 0.5
    q = X86InductorQuantizer().set_global(get_default_x86_inductor_quantization_config(is_dynamic=True))
    qdq, low = _flow(TwoLayers().eval(), (x,), q)
    chooses = [n for n in qdq.graph.nodes if n.target == QD.choose_qparams.tensor]
    assert chooses and all(n.args[1:3] == (0, 255) and n.args[4] == torch.uint8 for n in chooses)
    natives = [n for n in low.graph.nodes if n.target == P.linear_w8a8.default]
    assert len(natives) == len(chooses) and all(n.kwargs == {"per_tensor_eps": chooses[0].args[3]} for n in natives)
    assert QD.choose_qparams.tensor not in _targets(low)
    for x2 in (x, torch.randn(4, 32).abs(), -torch.randn(4, 32).abs() * 3):
        a, b = qdq(x2).detach(), low(x2).detach()
        assert float((a - b).abs().max()) <= 1e-5 * float(a.abs().max())


def test_lowered_model_exports_and_compiles():
    torch.manual_seed(0)
    x = torch.randn(4, 32)
    _, low = _flow(TwoLayers().eval(), (x,), Int8WeightOnlyQuantizer())
    ep = torch.export.export(low, (x,))
    assert "pt2q.linear_w8a16.default" in {str(n.target) for n in ep.graph.nodes}
    assert torch.equal(ep.module()(x), low(x))
    assert torch.equal(torch.compile(low)(x), low(x))


def test_arguments_are_checked():
    p = pt2q.prepare_pt2e(torch.export.export(nn.Linear(8, 4).eval(), (torch.randn(1, 8),)).module(),
                          Int8WeightOnlyQuantizer())
    with pytest.raises(ValueError, match="lower_to_native=True needs fold_quantize=True"):
        pt2q.convert_pt2e(p, fold_quantize=False, lower_to_native=True)
    with pytest.raises(ValueError, match="use_reference_representation=False"):
        pt2q.convert_pt2e(p, use_reference_representation=True, lower_to_native=True)
    with pytest.raises(TypeError, match="set_module_name takes a module path"):
        Int8WeightOnlyQuantizer().set_module_name(3)


def test_xnnpack_dynamic_chain_lowers_to_per_tensor_w8a8():
    """XNNPACK's dynamic config (choose_qparams.tensor -> q/dq_per_tensor.tensor on the input,
    per-channel int8 weights): pt2q.linear_w8a8 with per_tensor_eps, the same activation codes,
    within the bound of fp32 summation of the q/dq model; exports and compiles."""
    torch.manual_seed(0)
    x = torch.randn(4, 32) * 2
    q = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True, is_dynamic=True))
    qdq, low = _flow(TwoLayers().eval(), (x,), q)
    natives = [n for n in low.graph.nodes if n.target == P.linear_w8a8.default]
    assert len(natives) == 2 and all(n.kwargs == {"per_tensor_eps": 2.0 ** -12} for n in natives)
    assert not any("quantized_decomposed" in str(t) for t in _targets(low))
    a, b = qdq(x), low(x)
    assert float((a - b).abs().max()) <= 1e-5 * float(a.abs().max())
    ep = torch.export.export(low, (x,))
    assert torch.equal(ep.module()(x), b)
    assert torch.equal(torch.compile(low)(x), b)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_xnnpack_dynamic_chain_of_a_half_model_keeps_torchs_codes(dtype):
    """A bf16/fp16 model's dynamic chain chooses its per-tensor qparams in that dtype (torch's
    determine_qparams rounds the scale to it before eps promotes it); the lowered linear_w8a8
    uses the same codes: its output is within fp32 summation and one output rounding of the fp64
    product of torch's dequantized codes and weight."""
    torch.manual_seed(0)
    model = nn.Linear(96, 40).eval().to(dtype)
    x = (torch.randn(5, 96) * 3).to(dtype)
    q = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True, is_dynamic=True))
    qdq, low = _flow(model, (x,), q)
    node = next(n for n in low.graph.nodes if n.target == P.linear_w8a8.default)
    assert node.kwargs == {"per_tensor_eps": 2.0 ** -12}
    s, z = QD.choose_qparams.tensor(x, -128, 127, 2.0 ** -12, torch.int8)
    xd = QD.dequantize_per_tensor.tensor(QD.quantize_per_tensor.tensor(x, s, z, -128, 127, torch.int8),
                                         s, z, -128, 127, torch.int8).double()
    dq = next(n for n in qdq.graph.nodes if n.target == QD.dequantize_per_channel.default)
    w = QD.dequantize_per_channel.default(*[getattr(qdq, a.target) if isinstance(a, torch.fx.Node) else a
                                            for a in dq.args], out_dtype=torch.float64)
    want = xd @ w.t() + model.bias.double()
    terms = xd.abs() @ w.abs().t() + model.bias.double().abs()
    ulp = 2.0 ** -8 if dtype == torch.bfloat16 else 2.0 ** -11
    got = low(x)
    assert got.dtype == dtype
    assert bool(((got.double() - want).abs() <= 2 * (96 + 8) * EPS32 * terms + 2 * ulp * want.abs()).all())
