"""FX <-> pt2q IR on the model zoo: to_fx(from_fx(gm)) is the same graph (nodes, targets,
arguments, meta) and computes bit-identical outputs; the text form of every zoo graph prints
to a fixed point; tensors are shared, not copied; errors name the node."""

import copy
import operator

import pytest
import torch
import torch.fx as fx

import pt2q
from pt2q.graph import IRConversionError, from_fx, parse, to_fx
from tests.graph.zoo import ZOO, exported


def _arg_key(a):
    if isinstance(a, fx.Node):
        return ("node", a.name)
    if isinstance(a, (list, tuple)):
        return (type(a).__name__, tuple(_arg_key(x) for x in a))
    if isinstance(a, dict):
        return ("dict", tuple((k, _arg_key(v)) for k, v in a.items()))
    return ("value", type(a).__name__, repr(a))


def _assert_same_graph(a: fx.GraphModule, b: fx.GraphModule):
    # The IR keeps placeholders first, but to_fx restores FX's order (parameters first in export).
    na, nb = list(a.graph.nodes), list(b.graph.nodes)
    assert [n.name for n in na] == [n.name for n in nb]
    for x, y in zip(na, nb):
        assert (x.op, x.target) == (y.op, y.target), x.name
        assert _arg_key(x.args) == _arg_key(y.args), x.name
        assert _arg_key(x.kwargs) == _arg_key(y.kwargs), x.name
        assert x.meta.keys() == y.meta.keys(), x.name
        for k in ("val", "nn_module_stack", "stack_trace", "torch_fn", "source_fn_stack"):
            assert (x.meta.get(k) is y.meta.get(k)) or x.meta.get(k) == y.meta.get(k), (x.name, k)


def _outputs_equal(a, b):
    fa, _ = torch.utils._pytree.tree_flatten(a)
    fb, _ = torch.utils._pytree.tree_flatten(b)
    assert len(fa) == len(fb)
    for x, y in zip(fa, fb):
        assert x.dtype == y.dtype and x.shape == y.shape
        # bit for bit: compare the bytes (NaN payloads and -0.0 included)
        assert torch.equal(x.contiguous().view(-1).view(torch.uint8), y.contiguous().view(-1).view(torch.uint8))


@pytest.mark.parametrize("name", sorted(ZOO))
def test_round_trip_is_the_same_graph_and_bit_identical(name):
    gm, args = exported(name)
    reference = copy.deepcopy(gm)  # mutating models must start from the same state on both sides
    g = from_fx(gm)
    g.verify()
    back = to_fx(g)
    _assert_same_graph(gm, back)
    torch.manual_seed(1)
    inputs = tuple(torch.randn_like(a) for a in args)
    if name == "dynamic_batch":  # another batch size than the example: the dimension stayed symbolic
        inputs = (torch.randn(11, 16),)
    for _ in range(2):  # twice: in-place buffer updates must match too
        _outputs_equal(reference(*inputs), back(*inputs))
    for (k, t), (k2, t2) in zip(sorted(reference.state_dict().items()), sorted(back.state_dict().items())):
        assert k == k2 and torch.equal(t, t2), k


@pytest.mark.parametrize("name", sorted(ZOO))
def test_text_form_of_zoo_graphs_is_a_fixed_point(name):
    gm, _ = exported(name)
    text = str(from_fx(gm))
    assert str(parse(text)) == text


def test_dynamic_dimension_is_kept_symbolic():
    gm, _ = exported("dynamic_batch")
    text = str(from_fx(gm))
    assert "%x: f32[s" in text and "f32[5, 16]" not in text, text


def test_constants_are_shared_not_copied():
    gm, _ = exported("mlp")
    g = from_fx(gm)
    consts = g.constants()
    w = gm.get_parameter("net.0.weight")
    assert consts["net.0.weight"].data_ptr() == w.data_ptr()
    back = to_fx(g)
    assert back.get_parameter("net.0.weight").data_ptr() == w.data_ptr()


def test_ir_changes_reach_fx():
    gm, args = exported("mlp")
    g = from_fx(gm)
    relu = next(n for n in g.nodes() if n.target == "aten.relu")
    neg = g.create("call_function", "aten.neg", (relu,), name="neg", before=relu.users[0])
    for user in list(relu.users):
        if user.name != "neg":
            user.set_args(tuple(neg if (hasattr(a, "name") and a.name == "relu") else a for a in user.args),
                          user.kwargs)
    g.verify()
    back = to_fx(g)
    assert "neg" in [n.name for n in back.graph.nodes]
    x = args[0]
    p = gm.get_parameter
    h = torch.relu(torch.nn.functional.linear(x, p("net.0.weight"), p("net.0.bias")))
    expected = torch.nn.functional.linear(-h, p("net.2.weight"), p("net.2.bias"))
    assert torch.equal(back(x), expected)


def test_parsed_graph_runs_as_fx():
    g = parse("""graph @scaled(%x: f32[3], %y: f32[3]):
  %s = aten.add.Tensor(%x, %y, alpha=2)
  %t = aten._to_copy(%s, dtype=torch.float64)
  return (%t,)
""")
    gm = to_fx(g)
    x, y = torch.randn(3), torch.randn(3)
    out = gm(x, y)
    out = out[0] if isinstance(out, (tuple, list)) else out
    assert out.dtype == torch.float64 and torch.equal(out, (x + 2 * y).double())


def test_errors_name_the_node():
    with pytest.raises(IRConversionError, match="expects a torch.fx.GraphModule, got Linear"):
        from_fx(torch.nn.Linear(2, 2))
    graph = fx.Graph()
    x = graph.placeholder("x")
    bad = graph.call_function(operator.getitem, (x, slice(0, 2)))
    graph.output(bad)
    with pytest.raises(IRConversionError, match=r"node %getitem \(call_function <built-in function getitem>\): "
                                                r"the pt2q IR cannot hold an argument of type slice"):
        from_fx(fx.GraphModule(torch.nn.Module(), graph))


def test_package_exports_the_bridge():
    assert pt2q.graph.from_fx is from_fx and pt2q.graph.to_fx is to_fx


def test_graph_without_output_node_returns_none_as_in_fx():
    """Graph.graph_copy does not copy the output node; FX runs such a graph as returning None,
    and so does its IR (torchao's test_transform_for_annotation builds one)."""
    gm, (x,) = exported("mlp")
    g = fx.Graph()
    g.graph_copy(gm.graph, {})
    assert not any(n.op == "output" for n in g.nodes)
    headless = fx.GraphModule(gm, g)
    assert headless(x) is None
    ir = from_fx(headless)
    assert ir.find_node("output") is not None
    back = to_fx(ir)
    assert back(x) is None
    assert [n.target for n in back.graph.nodes if n.op == "call_function"] == \
        [n.target for n in g.nodes if n.op == "call_function"]
