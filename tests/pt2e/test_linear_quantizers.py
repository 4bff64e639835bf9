"""The weight-only and dynamic quantizers (Int4WeightOnly, Int8DynActInt8Weight,
Int8DynActInt4Weight; Int8WeightOnly is in test_lower_to_native.py) through prepare/convert:
the converted graph holds torch's quantized_decomposed per-group / per-token ops and computes
exactly what those ops compute by hand; its group qparams are torch.ao's per-channel observer's
over the groups (and torchao's 8da4w qparams); lower_to_native turns every linear into the
matching native op, equal to the q/dq model within the bound of fp32 summation; module
filters, export, compile and errors."""

import pytest
import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401
from torch import nn

import pt2q
from pt2q.quantizer import (
    Int4WeightOnlyQuantizer,
    Int8DynActInt4WeightQuantizer,
    Int8DynActInt8WeightQuantizer,
    Int8WeightOnlyQuantizer,
)

P = torch.ops.pt2q
QD = torch.ops.quantized_decomposed
EPS32 = 2.0 ** -24

CASES = [  # quantizer, the native op it lowers to, per-group?, per-token?
    (lambda: Int4WeightOnlyQuantizer(32), P.linear_w4a16.default, True, False),
    (lambda: Int4WeightOnlyQuantizer(64), P.linear_w4a16.default, True, False),
    (lambda: Int8DynActInt8WeightQuantizer(), P.linear_w8a8.default, False, True),
    (lambda: Int8DynActInt4WeightQuantizer(32), P.linear_w4a8.default, True, True),
    (lambda: Int8DynActInt4WeightQuantizer(128), P.linear_w4a8.default, True, True),
]


def _targets(gm):
    return [n.target for n in gm.graph.nodes if n.op == "call_function"]


def _flow(model, args, quantizer):
    p = pt2q.prepare_pt2e(torch.export.export(model, args).module(), quantizer)
    return pt2q.convert_pt2e(p), pt2q.convert_pt2e(p, lower_to_native=True)


def _const(gm, a):
    return getattr(gm, a.target) if isinstance(a, torch.fx.Node) else a


def _dequantized_weight(qdq):
    dq = next(n for n in qdq.graph.nodes
              if n.target in (QD.dequantize_per_channel_group.default, QD.dequantize_per_channel.default))
    return dq.target(*[_const(qdq, a) for a in dq.args]), dq


def _by_hand(x, w, per_token, bias):
    """The q/dq model's computation, written with torch's ops directly."""
    if per_token:
        s, z = QD.choose_qparams_per_token_asymmetric(x, torch.int8)
        x = QD.dequantize_per_token(QD.quantize_per_token(x, s, z, -128, 127, torch.int8), s, z, -128, 127,
                                    torch.int8, torch.float32)
    return torch.nn.functional.linear(x, w, bias), x


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("shape", [(3, 128), (2, 5, 256), (1, 384)])
def test_converts_to_torch_ops_and_lowers(case, shape):
    make_q, native, per_group, per_token = CASES[case]
    torch.manual_seed(case)
    k = shape[-1]
    model = nn.Linear(k, 37).eval()
    x = torch.randn(*shape) * 2 + 0.5
    qdq, low = _flow(model, (x,), make_q())
    targets = _targets(qdq)
    assert targets.count(QD.dequantize_per_channel_group.default) == int(per_group)
    assert targets.count(QD.dequantize_per_channel.default) == int(not per_group)
    assert targets.count(QD.quantize_per_token.default) == int(per_token)
    w, _ = _dequantized_weight(qdq)
    want, xd = _by_hand(x, w, per_token, model.bias)
    assert torch.equal(qdq(x), want)
    assert _targets(low) == [native]
    assert not any(n.startswith("_frozen_param") for n, _ in low.named_buffers())
    terms = xd.abs() @ w.abs().t() + model.bias.abs()
    err = (low(x) - want).abs()
    assert bool((err <= 2 * (k + k // 32 + 10) * EPS32 * terms + 1e-30).all()), (err / terms).max()


@pytest.mark.parametrize("group_size", [32, 64, 128, 256])
def test_group_qparams_are_torch_aos_and_torchaos(group_size):
    torch.manual_seed(group_size)
    model = nn.Linear(512, 24).eval()
    model.weight.data[3, :group_size] = 0  # an all-zero group and a tiny one: eps
    model.weight.data[5, -group_size:] *= 1e-9
    qdq, _ = _flow(model, (torch.randn(2, 512),), Int8DynActInt4WeightQuantizer(group_size))
    _, dq = _dequantized_weight(qdq)
    scales, zps = _const(qdq, dq.args[1]), _const(qdq, dq.args[2])
    w = model.weight.detach()
    ref = torch.ao.quantization.PerChannelMinMaxObserver(ch_axis=0, dtype=torch.qint8, quant_min=-8, quant_max=7,
                                                        qscheme=torch.per_channel_symmetric,
                                                        eps=torch.finfo(torch.float32).smallest_normal)
    ref(w.reshape(-1, group_size))
    rs, rz = ref.calculate_qparams()
    assert torch.equal(scales, rs.reshape(24, -1)) and torch.equal(zps, rz.reshape(24, -1))
    assert dq.args[3:7] == (-8, 7, torch.int8, group_size)
    codes = _const(qdq, dq.args[0])
    assert torch.equal(codes, QD.quantize_per_channel_group(w, scales, zps, -8, 7, torch.int8, group_size))
    utils = pytest.importorskip("torchao.quantization.utils")
    ts, tz = utils.get_group_qparams_symmetric(w, n_bit=4, groupsize=group_size, precision=torch.float32)
    assert torch.equal(scales, ts.reshape(24, -1)) and torch.equal(zps.to(tz.dtype), tz.reshape(24, -1))


class TwoLayers(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(128, 256)
        self.b = nn.Linear(256, 32)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


@pytest.mark.parametrize("case", range(len(CASES)))
def test_module_filters(case):
    make_q, native, _, _ = CASES[case]
    x = torch.randn(4, 128)
    _, low = _flow(TwoLayers().eval(), (x,), make_q().set_module_name("b"))
    targets = _targets(low)
    assert targets.count(native) == 1 and targets.count(torch.ops.aten.linear.default) == 1
    _, low = _flow(TwoLayers().eval(), (x,), make_q().set_module_type(nn.Linear))
    assert _targets(low).count(native) == 2


@pytest.mark.parametrize("case", [2, 3])
def test_lowered_dynamic_model_exports_and_compiles(case):
    make_q, native, _, _ = CASES[case]
    x = torch.randn(4, 128)
    _, low = _flow(TwoLayers().eval(), (x,), make_q())
    ep = torch.export.export(low, (x,))
    assert str(native) in {str(n.target) for n in ep.graph.nodes}
    assert torch.equal(ep.module()(x), low(x))
    assert torch.equal(torch.compile(low)(x), low(x))


class WeightAsInput(nn.Module):
    def forward(self, x, w):
        return torch.nn.functional.linear(x, w)


def test_a_chain_that_does_not_fit_stays_qdq():
    """A weight that is a model input (not a constant) cannot be packed at convert time: its
    linear keeps the per-token chain and the dequantize, and still runs."""
    args = (torch.randn(3, 128), torch.randn(16, 128))
    p = pt2q.prepare_pt2e(torch.export.export(WeightAsInput(), args).module(), Int8DynActInt8WeightQuantizer())
    p(*args)
    qdq, low = pt2q.convert_pt2e(p), pt2q.convert_pt2e(p, lower_to_native=True)
    targets = _targets(low)
    assert P.linear_w8a8.default not in targets and torch.ops.aten.linear.default in targets
    assert QD.quantize_per_token.default in targets and QD.dequantize_per_channel.default in targets
    assert torch.equal(low(*args), qdq(*args))


def test_errors():
    for cls in (Int4WeightOnlyQuantizer, Int8DynActInt4WeightQuantizer):
        with pytest.raises(ValueError, match=r"group_size must be one of \(32, 64, 128, 256\), got 48"):
            cls(48)
    with pytest.raises(TypeError, match="set_module_type takes a class"):
        Int8DynActInt8WeightQuantizer().set_module_type("Linear")
    p = pt2q.prepare_pt2e(torch.export.export(nn.Linear(100, 8).eval(), (torch.randn(1, 100),)).module(),
                          Int4WeightOnlyQuantizer(32))
    with pytest.raises(ValueError, match="in_features 100 is not a multiple of group_size 32"):
        pt2q.convert_pt2e(p)
    with pytest.raises(ValueError, match=r"per-token activations are dynamic int8 in \[-128, 127\]"):
        pt2q.observer.PerTokenDynamicObserver(dtype=torch.uint8, quant_min=0, quant_max=255)
    assert isinstance(Int8WeightOnlyQuantizer().set_module_name("a"), Int8WeightOnlyQuantizer)


@pytest.mark.parametrize("make_q,native", [(Int8WeightOnlyQuantizer, P.linear_w8a16.default),
                                           (lambda: Int4WeightOnlyQuantizer(32), P.linear_w4a16.default),
                                           (Int8DynActInt8WeightQuantizer, P.linear_w8a8.default),
                                           (lambda: Int8DynActInt4WeightQuantizer(32), P.linear_w4a8.default)])
def test_bf16_models_lower_too(make_q, native):
    """A bf16 model's weight dequantize carries out_dtype=bfloat16 (or output_dtype): it lowers all
    the same, and the native op (fp32 inside, bf16 out) stays within bf16 rounding of the q/dq model."""
    torch.manual_seed(0)
    x = torch.randn(4, 128).to(torch.bfloat16)
    qdq, low = _flow(TwoLayers().eval().to(torch.bfloat16), (x,), make_q())
    assert _targets(low).count(native) == 2 and not any("quantized_decomposed" in str(t) for t in _targets(low))
    a, b = qdq(x).float(), low(x).float()
    assert low(x).dtype == torch.bfloat16
    assert float((a - b).abs().max()) <= 0.05 * float(a.abs().max()) + 1e-3


class Deep(nn.Module):
    def __init__(self, depth=16):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(32, 32) for _ in range(depth))

    def forward(self, x):
        for layer in self.layers:
            x = x + layer(x)  # residuals: the paths through the graph double with every layer
        return x


def test_per_token_chains_get_their_consumers_metadata_in_deep_graphs():
    """The per-token choose/quantize/dequantize take the stack trace of the linear they feed
    (torchao's PortNodeMetaForQDQ for dynamic chains); the search for them visits each node once
    (it used to walk every path of a residual graph: 16 layers would not convert in hours)."""
    x = torch.randn(2, 32)
    p = pt2q.prepare_pt2e(torch.export.export(Deep().eval(), (x,)).module(), Int8DynActInt8WeightQuantizer())
    qdq = pt2q.convert_pt2e(p)
    chooses = [n for n in qdq.graph.nodes if n.target == QD.choose_qparams_per_token_asymmetric.default]
    assert len(chooses) == 16
    for choose in chooses:
        getitem = list(choose.users)[-1]
        q = next(u for u in getitem.users if u.target == QD.quantize_per_token.default)
        dq = next(iter(q.users))
        linear = next(iter(dq.users))
        assert linear.target == torch.ops.aten.linear.default
        trace = linear.meta.get("stack_trace")
        assert trace and all(n.meta.get("stack_trace") == trace for n in (choose, q, dq))


def test_group_statistics_survive_a_calibration_file(tmp_path):
    """A calibration file holds the observers' statistics only; the per-group qparams regain their
    [rows, groups] shape from the observed weight at convert time."""
    x = torch.randn(2, 128)
    model = TwoLayers().eval()
    p = pt2q.prepare_pt2e(torch.export.export(model, (x,)).module(), Int4WeightOnlyQuantizer(32))
    p(x)
    pt2q.save_calibration(p, tmp_path / "cal.bin")
    fresh = pt2q.prepare_pt2e(torch.export.export(model, (x,)).module(), Int4WeightOnlyQuantizer(32))
    pt2q.load_calibration(fresh, tmp_path / "cal.bin")
    a, b = pt2q.convert_pt2e(p), pt2q.convert_pt2e(fresh)
    assert torch.equal(a(x), b(x))
    assert _targets(pt2q.convert_pt2e(fresh, lower_to_native=True)).count(P.linear_w4a16.default) == 2


# The annotation rule, written plainly in Python (what the quantizers did before the C++
# annotator "native_linear" took over): the reference the C++ annotator is compared with.
def _reference_annotations(gm, weight_spec, input_spec, selected):
    out = {}
    for n in gm.graph.nodes:
        if n.op != "call_function" or n.target != torch.ops.aten.linear.default or not selected(n):
            continue
        if "quantization_annotation" in n.meta:
            continue
        x = n.args[0] if n.args else None
        w = n.args[1] if len(n.args) > 1 else None
        if not isinstance(w, torch.fx.Node):
            continue
        specs = {w.name: weight_spec}
        if input_spec is not None and isinstance(x, torch.fx.Node):
            specs[x.name] = input_spec
        out[n.name] = specs
    return out


def _annotations(gm):
    out = {}
    for n in gm.graph.nodes:
        a = n.meta.get("quantization_annotation")
        if a is not None:
            assert a.output_qspec is None and a._annotated
            out[n.name] = {k.name: v for k, v in a.input_qspec_map.items()}
    return out


class Mixed(nn.Module):
    """Linears in nested modules, a functional linear whose weight is a model input, one whose
    input is its own weight, and one without bias."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(16, 16)
        self.blk = nn.Sequential(nn.Linear(16, 16, bias=False), nn.ReLU(), nn.Linear(16, 16))
        self.c = nn.Conv1d(4, 4, 1)

    def forward(self, x, w):
        y = self.blk(self.a(x))
        z = torch.nn.functional.linear(y, w)
        s = torch.nn.functional.linear(w, w)
        return z, s, self.c(x.reshape(4, 4, 4))


QUANTIZERS = [Int8WeightOnlyQuantizer, lambda: Int4WeightOnlyQuantizer(32), Int8DynActInt8WeightQuantizer,
              lambda: Int8DynActInt4WeightQuantizer(64)]


@pytest.mark.parametrize("make_q", QUANTIZERS)
@pytest.mark.parametrize("filters", [(), ("name", "blk.2"), ("type", nn.Linear), ("name", "a", "name", "blk")])
def test_cpp_annotator_matches_the_reference_rule(make_q, filters):
    from pt2q.quantizer._annotate import module_name_filter, module_type_filter

    args = (torch.randn(4, 16), torch.randn(16, 16))
    q = make_q()
    preds = []
    for kind, arg in zip(filters[::2], filters[1::2]):
        if kind == "name":
            q.set_module_name(arg)
            preds.append(module_name_filter(arg))
        else:
            q.set_module_type(arg)
            preds.append(module_type_filter(arg))
    selected = (lambda n: any(f(n) for f in preds)) if preds else (lambda n: True)
    gm = torch.export.export(Mixed().eval(), args).module()
    want = _reference_annotations(gm, q._weight_spec, q._input_spec, selected)
    q.annotate(gm)
    got = _annotations(gm)
    assert got.keys() == want.keys() and len(want) >= (1 if filters else 4)
    for name, specs in want.items():
        assert list(got[name]) == list(specs)  # weight first, as the map's order
        assert all(got[name][a] is s for a, s in specs.items())  # the quantizer's own spec objects
    # F.linear(w, w): one edge, the input spec where there is one (the later dict entry wins)
    if not filters:
        self_lin = next(n for n in gm.graph.nodes if n.op == "call_function" and n.args[:1] == n.args[1:2])
        assert len(got[self_lin.name]) == 1


def test_cpp_annotator_leaves_another_quantizers_linears_alone():
    """Composed after XNNPACK's quantizer (module filter on `a`), the linear quantizer takes the
    other linears and keeps XNNPACK's annotation objects (ComposableQuantizer checks identity)."""
    from pt2q.quantizer import ComposableQuantizer, XNNPACKQuantizer, get_symmetric_quantization_config

    args = (torch.randn(4, 16), torch.randn(16, 16))
    gm = torch.export.export(Mixed().eval(), args).module()
    xnn = XNNPACKQuantizer().set_module_name("a", get_symmetric_quantization_config())
    lin = Int8DynActInt8WeightQuantizer()
    ComposableQuantizer([xnn, lin]).annotate(gm)
    anns = {n.name: n.meta["quantization_annotation"] for n in gm.graph.nodes if "quantization_annotation" in n.meta}
    a_lin = next(n for n in gm.graph.nodes if n.target == torch.ops.aten.linear.default)
    assert anns[a_lin.name].output_qspec is not None  # XNNPACK's: it quantizes the output too
    others = [n for n in gm.graph.nodes if n.target == torch.ops.aten.linear.default and n is not a_lin]
    assert len(others) == 4 and all(anns[n.name].output_qspec is None for n in others)
    p = pt2q.prepare_pt2e(torch.export.export(Mixed().eval(), args).module(),
                          ComposableQuantizer([xnn, lin]))
    p(*args)
    out = pt2q.convert_pt2e(p)(*args)
    assert all(torch.isfinite(t).all() for t in out)


def test_cpp_annotator_errors_leave_the_graph_unchanged():
    from pt2q import graph as G
    from pt2q._C import quantizers as cq

    gm = torch.export.export(nn.Linear(8, 4).eval(), (torch.randn(2, 8),)).module()
    g = G.from_fx(gm)
    before = [n.annotation for n in g.nodes()]
    with pytest.raises(RuntimeError, match="native_linear annotator: the quantization config has no weight spec"):
        cq.annotate(g, ["native_linear"], {"weight": None}, None)
    with pytest.raises(RuntimeError, match="unknown annotator 'native_linear_x'; the annotators are: .*native_linear"):
        cq.annotate(g, ["native_linear_x"], {"weight": None}, None)
    assert [n.annotation for n in g.nodes()] == before
    assert "native_linear" in cq.annotators()
