"""convert_pt2e(use_reference_representation=True): the same graph as torchao's (every node's
target and arguments, compared as a DAG) and bit-identical outputs, for the model zoo and each
quantizer; torchao's test_representation.py ported to pt2q; the result re-exports, saves,
compiles and runs in the C++ interpreter; unmatched dtypes stay quantize/dequantize."""

import collections
import copy
import os
import subprocess
import warnings

import pytest
import torch
from torch import nn

import pt2q
from pt2q._C.graph import Interpreter
from pt2q.graph import from_fx, load, save
from pt2q.quantizer import XNNPACKQuantizer, get_symmetric_quantization_config
from tests.pt2e import compare
from tests.pt2e.models import calibration_batches, export_twice

QD = torch.ops.quantized_decomposed


def _targets(gm):
    out = collections.Counter()
    for n in gm.graph.nodes:
        if n.op == "call_function":
            t = n.target.default if isinstance(n.target, torch._ops.OpOverloadPacket) else n.target
            out[str(t)] += 1
    return out


def _structure(gm):
    """Each call_function node as (target, arguments) with node arguments replaced by their own
    structure: equal multisets mean the same DAG whatever the node names and order."""
    memo = {}

    def arg(a):
        if isinstance(a, torch.fx.Node):
            return node(a)
        if isinstance(a, (list, tuple)):
            return (type(a).__name__, tuple(arg(x) for x in a))
        if isinstance(a, float):
            return ("float", a.hex())
        if isinstance(a, torch._ops.OpOverloadPacket):  # torchao leaves some targets as packets
            a = a.default
        return ("value", str(a))

    def node(n):
        if n not in memo:
            if n.op == "call_function":
                memo[n] = (arg(n.target), arg(n.args), tuple(sorted((k, arg(v)) for k, v in n.kwargs.items())))
            else:
                memo[n] = (n.op, str(n.target))
        return memo[n]

    return collections.Counter(node(n) for n in gm.graph.nodes if n.op == "call_function")


def _prepare_calibrate(gm, quantizer, batches):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = pt2q.prepare_pt2e(gm, quantizer)
    for b in batches:
        p(*b)
    return p


# --- conformance with torchao -------------------------------------------------------------------

@pytest.fixture(scope="module")
def ao():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ao = pytest.importorskip("torchao.quantization.pt2e.quantize_pt2e")
        rewrite = pytest.importorskip("torchao.quantization.pt2e.reference_representation_rewrite")
    # torchao exports its twelve patterns on every call (two seconds); the exports do not depend
    # on the model, so the test reuses copies of them.
    original = rewrite._get_aten_graph_module_for_pattern
    cache = {}

    def memoized(pattern, example_inputs, *args, **kwargs):
        key = (getattr(pattern, "fn", pattern), tuple((tuple(x.shape), x.dtype) if isinstance(x, torch.Tensor)
                                                      else x for x in example_inputs))
        if key not in cache:
            cache[key] = original(pattern, example_inputs, *args, **kwargs)
        return copy.deepcopy(cache[key])

    rewrite._get_aten_graph_module_for_pattern = memoized
    yield ao
    rewrite._get_aten_graph_module_for_pattern = original


def _ao_quantizer(kind):
    from torchao.quantization.pt2e.quantizer import x86_inductor_quantizer as x86
    from torchao.testing.pt2e import _xnnpack_quantizer as xnn

    if kind == "x86":
        return x86.X86InductorQuantizer().set_global(x86.get_default_x86_inductor_quantization_config())
    per_channel, dynamic = {"xnnpack_per_tensor": (False, False), "xnnpack_per_channel": (True, False),
                            "xnnpack_dynamic_per_tensor": (False, True), "xnnpack_dynamic": (True, True)}[kind]
    return xnn.XNNPACKQuantizer().set_global(xnn.get_symmetric_quantization_config(is_per_channel=per_channel,
                                                                                     is_dynamic=dynamic))


def _cast_dynamic_linear_to_float32(gm):
    """pt2q's one deliberate difference (docs/pt2e.md): torchao's dynamic linear reference returns
    float64 (choose_qparams' scale dtype), which a following dynamic layer rejects; pt2q casts it
    to float32. Applies the same cast to torchao's graph."""
    for n in list(gm.graph.nodes):
        if n.target != torch.ops.aten.mul.Tensor or not isinstance(n.args[0], torch.fx.Node):
            continue
        acc = n.args[0]
        if acc.target != torch.ops.aten.add.Tensor or not all(
                isinstance(a, torch.fx.Node) and "out_dtype" in str(a.target) for a in acc.args):
            continue
        with gm.graph.inserting_after(n):
            cast = gm.graph.call_function(torch.ops.aten.to.dtype, (n, torch.float32))
        n.replace_all_uses_with(cast, delete_user_cb=lambda u: u is not cast)
    gm.recompile()
    return gm


KINDS = ["xnnpack_per_tensor", "xnnpack_per_channel", "xnnpack_dynamic_per_tensor", "xnnpack_dynamic", "x86"]
MODELS = ["mlp", "cnn_bn_pool", "residual_block", "mobilenetish", "gpt_block"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("model", MODELS)
def test_same_graph_and_bits_as_torchao(ao, model, kind):
    ea, eb, args = export_twice(model)
    q = _ao_quantizer(kind)
    batches = calibration_batches(args)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pa, pb = ao.prepare_pt2e(ea, q), pt2q.prepare_pt2e(eb, q)
        for b in batches:
            pa(*b)
            pb(*b)
        ca = ao.convert_pt2e(pa, use_reference_representation=True)
        cb = pt2q.convert_pt2e(pb, use_reference_representation=True)
    if "dynamic" in kind:
        ca = _cast_dynamic_linear_to_float32(ca)
    assert _structure(cb) == _structure(ca)
    compare.assert_same_constants(ca, cb)
    for batch in calibration_batches(args, n=2, seed=7):
        compare.assert_outputs_equal(ca, cb, batch)


# --- torchao's test_representation.py, on pt2q -----------------------------------------------

def _check_representation(model, example_inputs, quantizer, ref_counts, non_ref_counts, fixed_tol=None,
                          output_scale_idx=2):
    """torchao's _test_representation: counts in both conversions, and the reference output within
    one output quantization step (twice the scale, as torchao allows) of the q/dq output."""
    gm = torch.export.export(model, example_inputs).module()
    ref = pt2q.convert_pt2e(_prepare_calibrate(copy.deepcopy(gm), quantizer, [example_inputs]),
                            use_reference_representation=True)
    qdq = pt2q.convert_pt2e(_prepare_calibrate(gm, quantizer, [example_inputs]))
    for target, count in ref_counts.items():
        assert _targets(ref)[str(target)] == count, (target, _targets(ref))
    for target, count in non_ref_counts.items():
        assert _targets(qdq)[str(target)] == count, (target, _targets(qdq))
    tol = fixed_tol
    if tol is None:
        scales = [n.args[1] for n in qdq.graph.nodes if n.target == QD.quantize_per_tensor.default]
        tol = scales[output_scale_idx - 1]
    diff = (ref(*example_inputs) - qdq(*example_inputs)).abs().max()
    assert diff <= 2 * tol + 1e-5, (diff, tol)
    return ref


def _xnnpack(per_channel=False, dynamic=False):
    return XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=per_channel,
                                                                           is_dynamic=dynamic))


OUT_DTYPE = "out_dtype"


def test_static_linear():
    torch.manual_seed(0)
    ref = _check_representation(nn.Linear(5, 5).eval(), (torch.randn(2, 5),), _xnnpack(), {}, {})
    assert _targets(ref)[OUT_DTYPE] == 3 and "aten.linear.default" not in _targets(ref)


def test_dynamic_linear():
    torch.manual_seed(0)
    ref = _check_representation(nn.Linear(5, 5).eval(), (torch.randn(2, 5),), _xnnpack(dynamic=True), {}, {},
                                fixed_tol=1e-4)
    assert _targets(ref)[OUT_DTYPE] == 2 and _targets(ref)["quantized_decomposed.choose_qparams.tensor"] == 1


def test_stacked_dynamic_linears_stay_float32():
    """torchao's reference of two dynamically quantized linears fails in the second
    choose_qparams (a float64 input); pt2q's runs and matches the q/dq model within tolerance."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 4)).eval()
    ref = _check_representation(model, (torch.randn(3, 8),), _xnnpack(dynamic=True), {OUT_DTYPE: 4}, {},
                                fixed_tol=1e-3)
    assert ref(torch.randn(3, 8)).dtype == torch.float32


def test_conv2d():
    torch.manual_seed(0)
    _check_representation(nn.Conv2d(3, 3, 3).eval(), (torch.randn(1, 3, 3, 3),), _xnnpack(), {}, {})


class _Add(nn.Module):
    def forward(self, x, y):
        return x + y


class _AddRelu(nn.Module):
    def forward(self, x, y):
        return torch.relu(x + y)


def test_add():
    torch.manual_seed(0)
    ref = _check_representation(_Add(), (torch.randn(1, 3, 3, 3), torch.randn(1, 3, 3, 3)),
                                _xnnpack(per_channel=True), {}, {})
    assert _targets(ref)["aten.round.default"] >= 2  # torchao's add rounds each rescaled operand


def test_add_relu():
    torch.manual_seed(0)
    _check_representation(_AddRelu(), (torch.randn(1, 3, 3, 3), torch.randn(1, 3, 3, 3)),
                          _xnnpack(per_channel=True), {OUT_DTYPE: 2}, {})


class _ConvMaxPool(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 2, 1)
        self.pool = nn.MaxPool2d(1, 1)

    def forward(self, x):
        return self.pool(self.conv(x))


def test_maxpool2d():
    torch.manual_seed(0)
    _check_representation(_ConvMaxPool().eval(), (torch.randn(1, 2, 2, 2),), _xnnpack(per_channel=True), {}, {})


@pytest.mark.parametrize("shape", [(1, 5), (1, 3, 5), (1, 3, 3, 5), (1, 3, 3, 3, 5)])
def test_qdq_per_channel(shape):
    torch.manual_seed(0)
    _check_representation(nn.Linear(5, 5).eval(), (torch.randn(*shape),), _xnnpack(per_channel=True),
                          {str(QD.quantize_per_channel.default): 0, str(QD.dequantize_per_channel.default): 0},
                          {str(QD.quantize_per_channel.default): 0, str(QD.dequantize_per_channel.default): 1})


def test_qdq():
    torch.manual_seed(0)
    _check_representation(_Add(), (torch.randn(1, 3, 3, 3), torch.randn(1, 3, 3, 3)), _xnnpack(per_channel=True),
                          {str(QD.quantize_per_tensor.default): 0, str(QD.dequantize_per_tensor.default): 0},
                          {str(QD.quantize_per_tensor.default): 3, str(QD.dequantize_per_tensor.default): 3})


# --- what a converted reference model can do -------------------------------------------------

def _reference_model(per_channel=False):
    _, gm, args = export_twice("residual_block")
    p = _prepare_calibrate(gm, _xnnpack(per_channel=per_channel), calibration_batches(args))
    return pt2q.convert_pt2e(p, use_reference_representation=True), args


def test_reexports_saves_and_compiles(tmp_path):
    ref, args = _reference_model(per_channel=True)
    want = ref(*args)
    ep = torch.export.export(ref, args)
    assert torch.equal(ep.module()(*args), want)
    torch.export.save(ep, str(tmp_path / "ref.pt2"))
    assert torch.equal(torch.export.load(str(tmp_path / "ref.pt2")).module()(*args), want)
    compiled = torch.compile(ref)
    assert (compiled(*args) - want).abs().max() <= 1e-6 + want.abs().max() * 1e-5  # Inductor may fuse arithmetic


@pytest.mark.parametrize("per_channel", [False, True])
def test_cpp_interpreter_runs_out_dtype_bit_for_bit(per_channel):
    ref, args = _reference_model(per_channel)
    g = from_fx(ref)
    assert any(n.target == "torch.ops.higher_order.out_dtype" for n in g.nodes())
    got = Interpreter(g).run(*args)
    got = got[0] if isinstance(got, (tuple, list)) else got
    assert torch.equal(got, ref(*args))


def test_graph_files_keep_operator_arguments(tmp_path):
    ref, args = _reference_model()
    g = from_fx(ref)
    save(g, str(tmp_path / "ref.pt2q"))
    text = str(pt2q._C.graph.load(str(tmp_path / "ref.pt2q")))
    assert text == str(g) and 'op("aten.mul.Tensor")' in text  # the residual add-relu's rescaling
    assert torch.equal(load(str(tmp_path / "ref.pt2q"))(*args), ref(*args))


def test_other_dtypes_stay_quantize_dequantize():
    """X86's uint8 activations match no int8 pattern; its int8 weights become formulas."""
    from pt2q.quantizer import X86InductorQuantizer, get_default_x86_inductor_quantization_config

    _, gm, args = export_twice("cnn_bn_pool")
    q = X86InductorQuantizer().set_global(get_default_x86_inductor_quantization_config())
    ref = pt2q.convert_pt2e(_prepare_calibrate(gm, q, calibration_batches(args)), use_reference_representation=True)
    qs = [n for n in ref.graph.nodes if n.target == QD.quantize_per_tensor.default]
    assert qs and all(n.args[-1] == torch.uint8 for n in qs)
    assert _targets(ref)[str(QD.dequantize_per_channel.default)] == 0


def test_pt2q_opt_runs_the_pass_without_python():
    """In a C++-only process the quantized_decomposed ops are opaque calls; the pass still matches."""
    opt = os.path.join(os.path.dirname(__file__), "..", "..", "build", "tools", "pt2q-opt", "pt2q-opt")
    if not os.path.exists(opt):
        pytest.skip("pt2q-opt is not built")
    text = """graph @g(%x: f32[4]):
  %q = call_opaque "quantized_decomposed.quantize_per_tensor"(%x, 0.5, 3, -128, 127, torch.int8)
  %dq = call_opaque "quantized_decomposed.dequantize_per_tensor"(%q, 0.5, 3, -128, 127, torch.int8)
  return (%dq,)
"""
    r = subprocess.run([opt, "-", "--passes=reference-representation"], input=text, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert "quantize_per_tensor" not in r.stdout and "aten.round(%div)" in r.stdout
    assert r.stdout.count("aten.clamp(") == 2
