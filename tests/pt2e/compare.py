"""Structural and numerical comparison of two PT2E-prepared or -converted GraphModules."""

import re

import torch
from torch import fx


def _trace(t):
    # graphs of different exports number their generated code differently
    return re.sub(r"<eval_with_key>\.\d+", "<eval_with_key>", t) if isinstance(t, str) else t


def arg_key(a):
    if isinstance(a, fx.Node):
        return ("node", a.name)
    if isinstance(a, (list, tuple)):
        return (type(a).__name__, tuple(arg_key(x) for x in a))
    if isinstance(a, dict):
        return ("dict", tuple((k, arg_key(v)) for k, v in a.items()))
    if isinstance(a, float):
        return ("float", a.hex())
    return ("value", repr(a))


def node_list(gm):
    return [(n.op, str(n.target) if n.op != "placeholder" else "", n.name) for n in gm.graph.nodes]


def assert_same_graph(a: fx.GraphModule, b: fx.GraphModule):
    """Same nodes in the same order with the same targets and arguments."""
    la, lb = node_list(a), node_list(b)
    if la != lb:
        import difflib
        diff = "\n".join(difflib.unified_diff([str(x) for x in la], [str(x) for x in lb], lineterm="", n=2))
        raise AssertionError("node lists differ (- first, + second):\n" + diff)
    for x, y in zip(a.graph.nodes, b.graph.nodes):
        assert arg_key(x.args) == arg_key(y.args), x.name
        assert arg_key(x.kwargs) == arg_key(y.kwargs), x.name
        # stack traces, including those convert ports onto quantize/dequantize nodes
        assert _trace(x.meta.get("stack_trace")) == _trace(y.meta.get("stack_trace")), (x.name, "stack_trace")


def observers(gm):
    return {n.target: getattr(gm, n.target) for n in gm.graph.nodes if n.op == "call_module"
            and n.target.startswith("activation_post_process_")}


def sharing_partition(gm):
    groups = {}
    for name, obs in observers(gm).items():
        groups.setdefault(id(obs), []).append(name)
    return sorted(sorted(g) for g in groups.values())


def assert_same_prepared(a, b):
    assert_same_graph(a, b)
    oa, ob = observers(a), observers(b)
    assert {k: type(v).__name__ for k, v in oa.items()} == {k: type(v).__name__ for k, v in ob.items()}
    assert sharing_partition(a) == sharing_partition(b)


def assert_same_qparams(a, b):
    for name, oa in observers(a).items():
        ob = observers(b)[name]
        if type(oa).__name__ == "PlaceholderObserver":
            continue
        qa, qb = oa.calculate_qparams(), ob.calculate_qparams()
        for x, y in zip(qa, qb):
            assert x.dtype == y.dtype and torch.equal(x, y), (name, qa, qb)


def assert_same_constants(a, b):
    ta = {n.target: getattr_path(a, n.target) for n in a.graph.nodes if n.op == "get_attr"}
    tb = {n.target: getattr_path(b, n.target) for n in b.graph.nodes if n.op == "get_attr"}
    assert sorted(ta) == sorted(tb)
    for k, v in ta.items():
        if isinstance(v, torch.Tensor):
            assert v.dtype == tb[k].dtype and torch.equal(v, tb[k]), k


def getattr_path(m, path):
    for p in path.split("."):
        m = getattr(m, p)
    return m


def assert_outputs_equal(a, b, args):
    fa, _ = torch.utils._pytree.tree_flatten(a(*args))
    fb, _ = torch.utils._pytree.tree_flatten(b(*args))
    assert len(fa) == len(fb)
    for x, y in zip(fa, fb):
        assert torch.equal(x, y), (x - y).abs().max()


def run_flows(ao, ea, eb, args, qa, qb, batches):
    """torchao's flow on `ea` with `qa` and pt2q's on `eb` with `qb`, checked step by step to be
    the same; returns the two converted models."""
    import warnings

    import pt2q

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = ao.prepare_pt2e(ea, qa)
        b = pt2q.prepare_pt2e(eb, qb)
        assert_same_prepared(a, b)
        for batch in batches:
            a(*batch)
            b(*batch)
        assert_same_qparams(a, b)
        ca, cb = ao.convert_pt2e(a), pt2q.convert_pt2e(b)
    assert_same_graph(ca, cb)
    assert_same_constants(ca, cb)
    return ca, cb
