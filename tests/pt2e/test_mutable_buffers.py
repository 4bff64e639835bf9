"""Buffers the graph writes are state, not constants: convert_pt2e must not fold the quantize of
one into a frozen tensor, nor lower_to_native pack it, or every later call reads the value the
buffer had at convert time. Both spellings of a buffer update are covered: export's functional
form (`copy_(buffer, new)` at the end, as `run_decompositions` gives it) and the in-place ops
that `torch.export(...).module()` keeps (`w.mul_(0.75)`). The reference for the folded model
is the same model converted with `fold_quantize=False` (every quantize runs at call time), and,
for the functional form, torchao's convert (which checks copy_ targets too)."""

import copy
import warnings

import pytest
import torch
import torch.nn.functional as F

import pt2q
from pt2q.quantizer import XNNPACKQuantizer, get_symmetric_quantization_config

Q = torch.ops.quantized_decomposed


class Accumulate(torch.nn.Module):
    """A running sum in a buffer, read by an add XNNPACK quantizes, then a linear."""

    def __init__(self):
        super().__init__()
        self.register_buffer("total", torch.rand(2, 8))
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        y = self.lin(self.total + x)
        self.total.add_(x)
        return y


class DecayingWeight(torch.nn.Module):
    """A linear whose weight is a buffer scaled after each call, then an ordinary linear."""

    def __init__(self):
        super().__init__()
        self.register_buffer("w", torch.randn(8, 16))
        self.lin = torch.nn.Linear(8, 4)

    def forward(self, x):
        y = F.linear(x, self.w)
        self.w.mul_(0.75)
        return self.lin(y)


def functional_export(m, args):
    """export's functional graph: the update is `copy_(total, add)` after every read of total."""
    return torch.export.export(m.eval(), args).run_decompositions({}).module()


def in_place_export(m, args):
    return torch.export.export(m.eval(), args).module()


def model_buffers(m):
    return {k: v.clone() for k, v in m.named_buffers() if not k.startswith("activation_post_process_")}


def prepared(model_cls, export, per_channel, args):
    torch.manual_seed(0)
    m = export(model_cls(), args)
    cfg = get_symmetric_quantization_config(is_per_channel=per_channel)
    p = pt2q.prepare_pt2e(m, XNNPACKQuantizer().set_global(cfg))
    state = model_buffers(p)
    p(*args)
    p(*[a * 1.5 for a in args])
    for k, v in state.items():  # calibration moved the buffers; start every model from the same state
        p.get_buffer(k).copy_(v)
    return p


def run_calls(m, inputs):
    return [m(x) for x in inputs]


def quantizes_of(gm, buffer):
    """The quantize calls whose input is a get_attr of `buffer` (and not folded): torch's, or
    pt2q's one-pass quantize that lower_to_native puts in their place."""
    kinds = (Q.quantize_per_tensor.default, Q.quantize_per_channel.default, torch.ops.pt2q.quantize_affine.default)
    return [n for n in gm.graph.nodes
            if n.op == "call_function" and n.target in kinds
            and n.args[0].op == "get_attr" and n.args[0].target == buffer]


CASES = [(Accumulate, functional_export, "total", (2, 8)), (Accumulate, in_place_export, "total", (2, 8)),
         (DecayingWeight, functional_export, "w", (3, 16)), (DecayingWeight, in_place_export, "w", (3, 16))]


@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("model_cls,export,buffer,shape", CASES,
                         ids=[f"{c.__name__}-{e.__name__}" for c, e, _, _ in CASES])
def test_a_written_buffer_is_read_at_call_time(model_cls, export, buffer, shape, per_channel):
    args = (torch.randn(*shape),)
    p = prepared(model_cls, export, per_channel, args)
    folded = pt2q.convert_pt2e(copy.deepcopy(p))
    unfolded = pt2q.convert_pt2e(copy.deepcopy(p), fold_quantize=False)
    lowered = pt2q.convert_pt2e(copy.deepcopy(p), lower_to_native=True)

    inputs = [torch.randn(*shape) for _ in range(4)]
    want = run_calls(unfolded, inputs)
    assert not torch.equal(want[0], want[-1])  # the state moves, so a frozen read would show
    for got in (run_calls(folded, inputs), run_calls(lowered, inputs)):
        for g, w in zip(got, want):
            # The lowered model's other linear runs pt2q's int8 kernel: its fp32 sums may differ
            # from ATen's by rounding; the folded model is the same graph, so equal.
            torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)
    assert torch.equal(folded.get_buffer(buffer), unfolded.get_buffer(buffer))
    for g, w in zip(run_calls(folded, inputs), run_calls(unfolded, inputs)):
        assert torch.equal(g, w)

    # Every quantize of the buffer still runs (the functional form quantizes w for its mul too).
    assert len(quantizes_of(folded, buffer)) == len(quantizes_of(unfolded, buffer)) >= 1
    assert len(quantizes_of(lowered, buffer)) == len(quantizes_of(unfolded, buffer))
    # Constants the graph does not write still fold: lin.weight became an int8 _frozen_param,
    # and nothing of the buffer's shape did.
    frozen = [getattr(folded, n.target) for n in folded.graph.nodes
              if n.op == "get_attr" and n.target.startswith("_frozen_param")]
    shapes = [tuple(t.shape) for t in frozen if t.dtype == torch.int8]
    assert tuple(p.lin.weight.shape) in shapes
    assert tuple(p.get_buffer(buffer).shape) not in shapes


def test_torchao_agrees_on_the_functional_form():
    ao = pytest.importorskip("torchao.quantization.pt2e.quantize_pt2e")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torchao.testing.pt2e import _xnnpack_quantizer as xnn
    args = (torch.randn(2, 8),)
    torch.manual_seed(0)
    ours = prepared(Accumulate, functional_export, False, args)
    torch.manual_seed(0)
    theirs = functional_export(Accumulate(), args)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = ao.prepare_pt2e(theirs, xnn.XNNPACKQuantizer().set_global(xnn.get_symmetric_quantization_config()))
        state = model_buffers(theirs)
        theirs(*args)
        theirs(*[a * 1.5 for a in args])
        for k, v in state.items():
            theirs.get_buffer(k).copy_(v)
        theirs = ao.convert_pt2e(theirs)
    ours = pt2q.convert_pt2e(ours)
    assert len(quantizes_of(theirs, "total")) == len(quantizes_of(ours, "total")) == 1
    for _ in range(3):
        x = torch.randn(2, 8)
        assert torch.equal(ours(x), theirs(x))
    assert torch.equal(ours.total, theirs.total)


@pytest.mark.parametrize("written", [False, True])
def test_lower_to_native_packs_only_weights_the_graph_does_not_write(written):
    """int8 weight codes held in a buffer: a dequantize -> linear of them lowers to the
    weight-only op (the codes packed at convert time) unless a node writes the buffer."""
    from torch.fx import Graph, GraphModule

    root = torch.nn.Module()
    root.register_buffer("codes", torch.randint(-127, 128, (8, 16), dtype=torch.int8))
    root.register_buffer("scale", torch.rand(8) / 100)
    root.register_buffer("zp", torch.zeros(8, dtype=torch.int64))
    g = Graph()
    x = g.placeholder("x")
    codes, scale, zp = (g.get_attr(n) for n in ("codes", "scale", "zp"))
    w = g.call_function(Q.dequantize_per_channel.default, (codes, scale, zp, 0, -127, 127, torch.int8))
    y = g.call_function(torch.ops.aten.linear.default, (x, w))
    if written:
        g.call_function(torch.ops.aten.add_.Scalar, (codes, 1))
    g.output(y)
    ir = pt2q.graph.from_fx(GraphModule(root, g))
    ir.run_passes(["lower-to-native"])
    targets = {n.target for n in ir.nodes()}
    assert ("pt2q.linear_w8a16" in targets) == (not written)
    assert ("aten.linear" in targets) == written
