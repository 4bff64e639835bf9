"""The C++ interpreter on the model zoo: outputs equal the FX GraphModule's bit for bit (buffer
updates included); what needs Python fails naming the node."""

import copy

import pytest
import torch

from pt2q._C.graph import Interpreter
from pt2q.graph import from_fx, parse
from tests.graph.zoo import ZOO, exported

RUNNABLE = sorted(ZOO)


def _flat(x):
    return torch.utils._pytree.tree_flatten(x)[0]


@pytest.mark.parametrize("name", RUNNABLE)
def test_interpreter_matches_fx_bit_for_bit(name):
    gm, args = exported(name)
    reference = copy.deepcopy(gm)
    interp = Interpreter(from_fx(gm))
    torch.manual_seed(3)
    inputs = tuple(torch.randn_like(a) for a in args)
    if name == "dynamic_batch":
        inputs = (torch.randn(9, 16),)
    for _ in range(2):
        got, want = _flat(interp.run(*inputs)), _flat(reference(*inputs))
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and torch.equal(g.contiguous().view(torch.uint8), w.contiguous().view(torch.uint8))
    for k, t in reference.state_dict().items():
        assert torch.equal(gm.state_dict()[k], t), k


def test_cond_runs_the_branch_the_predicate_picks():
    gm, _ = exported("cond")
    reference = copy.deepcopy(gm)
    interp = Interpreter(from_fx(gm))
    x = torch.randn(3, 4)
    for sign in (1.0, -1.0):  # sum > 0 takes the relu branch, else the sigmoid branch
        inp = sign * (x.abs() + 0.1)
        (got,), want = interp.run(inp), reference(inp)
        assert torch.equal(got, want)
    assert not torch.equal(interp.run(x.abs() + 0.1)[0], interp.run(-(x.abs() + 0.1))[0])


def test_cond_branches_must_be_subgraphs():
    g = parse('graph @g(%p: b8[], %x: f32[2], %f: f32[2]):\n'
              '  %c = call_opaque "torch.ops.higher_order.cond"(%p, %f, %f, (%x,))\n  return (%c,)\n')
    with pytest.raises(RuntimeError, match=r"node %c .*a cond branch must be a get_attr of a subgraph, got %f"):
        Interpreter(g)


def test_opaque_calls_and_modules_need_python():
    g = parse('graph @g(%x: f32[2]):\n  %a = call_opaque "builtins.print"(%x)\n  return (%x,)\n')
    with pytest.raises(RuntimeError, match=r"node %a .*the opaque call builtins.print needs Python"):
        Interpreter(g)
    g = parse('graph @g(%x: f32[2]):\n  %m = call_module "sub"(%x)\n  return (%m,)\n')
    with pytest.raises(RuntimeError, match=r"node %m .*call_module runs a Python module"):
        Interpreter(g)


def test_text_graph_runs_with_literals_defaults_and_kwargs():
    g = parse("""graph @g(%x: f32[2, 3], %y: f32[2, 3]):
  %s = aten.add.Tensor(%x, %y, alpha=2)
  %m = aten.mul.Tensor(%s, 3)
  %c = aten.cat([%m, %x], 1)
  %t = aten._to_copy(%c, dtype=torch.float64)
  %sp = aten.split.Tensor(%t, 2, -1)
  %g1 = call_opaque "_operator.getitem"(%sp, 1)
  %sum = aten.sum.dim_IntList(%g1, [0], true)
  return (%sum, %sp)
""")
    x, y = torch.randn(2, 3), torch.randn(2, 3)
    (total, parts) = Interpreter(g).run(x, y)
    expected = torch.cat([(x + 2 * y) * 3, x], 1).double()
    assert torch.equal(total, expected.split(2, -1)[1].sum(0, keepdim=True))
    assert len(parts) == 3 and torch.equal(parts[2], expected.split(2, -1)[2])


def test_wrong_number_of_inputs():
    g = parse("graph @g(%x: f32[2]):\n  return (%x,)\n")
    with pytest.raises(RuntimeError, match=r"graph @g takes 1 input\(s\), got 2"):
        Interpreter(g).run(torch.ones(2), torch.ones(2))


def test_out_dtype_promotes_runs_and_casts_like_torch():
    """out_dtype(op, dtype, *args) as torch's fallback: int16 operands promoted with int32, int32
    result; an int32 tensor times a 0-dim float scale computed in float32, then truncated."""
    from torch._higher_order_ops.out_dtype import out_dtype

    g = parse('graph @g(%a: i16[3, 5], %b: i16[4, 5], %acc: i32[3, 4], %s: f32[]):\n'
              '  %l = call_opaque "torch.ops.higher_order.out_dtype"(op("aten.linear"), torch.int32, %a, %b, none)\n'
              '  %m = call_opaque "torch.ops.higher_order.out_dtype"(op("aten.mul.Tensor"), torch.int32, %acc, %s)\n'
              '  return (%l, %m)\n')
    a = torch.randint(-300, 300, (3, 5), dtype=torch.int16)
    b = torch.randint(-300, 300, (4, 5), dtype=torch.int16)
    acc = torch.randint(-2**20, 2**20, (3, 4), dtype=torch.int32)
    s = torch.tensor(0.0123)
    got_l, got_m = Interpreter(g).run(a, b, acc, s)
    want_l = out_dtype(torch.ops.aten.linear.default, torch.int32, a, b, None)
    want_m = out_dtype(torch.ops.aten.mul.Tensor, torch.int32, acc, s)
    assert got_l.dtype == got_m.dtype == torch.int32
    assert torch.equal(got_l, want_l) and torch.equal(got_m, want_m)


def test_out_dtype_needs_an_operator_and_a_dtype():
    g = parse('graph @g(%x: i32[2]):\n'
              '  %o = call_opaque "torch.ops.higher_order.out_dtype"("aten.mul.Tensor", torch.int32, %x, %x)\n'
              '  return (%o,)\n')
    with pytest.raises(RuntimeError, match=r"node %o .*out_dtype takes \(operator, dtype, \*args\)"):
        Interpreter(g)
    g = parse('graph @g(%x: i32[2]):\n'
              '  %o = call_opaque "torch.ops.higher_order.out_dtype"(op("aten.no_such_op"), torch.int32, %x)\n'
              '  return (%o,)\n')
    with pytest.raises(RuntimeError, match=r"node %o .*the dispatcher knows no operator aten.no_such_op"):
        Interpreter(g)
