"""pt2q.save / pt2q.load: .pt2q files of the zoo load into GraphModules that compute the same
bits; files hold no code, so Python-only parts fail at save time naming the node; bad files
fail with errors naming the file."""

import copy

import pytest
import torch

import pt2q
from pt2q.graph import IRConversionError
from tests.graph.zoo import ZOO, exported

SAVABLE = sorted(ZOO)


def _flat(x):
    return torch.utils._pytree.tree_flatten(x)[0]


@pytest.mark.parametrize("name", SAVABLE)
def test_saved_zoo_model_computes_the_same_bits(name, tmp_path):
    gm, args = exported(name)
    reference = copy.deepcopy(gm)
    path = tmp_path / f"{name}.pt2q"
    pt2q.save(gm, path)
    loaded = pt2q.load(path)
    torch.manual_seed(5)
    inputs = (torch.randn(13, 16),) if name == "dynamic_batch" else tuple(torch.randn_like(a) for a in args)
    for _ in range(2):
        got, want = _flat(loaded(*inputs)), _flat(reference(*inputs))
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert torch.equal(g.contiguous().view(torch.uint8), w.contiguous().view(torch.uint8))
    assert str(pt2q.graph.from_fx(loaded)).splitlines()[1:] != []


def test_loaded_module_keeps_the_exported_calling_convention(tmp_path):
    gm, args = exported("gru_lstm")  # returns a (z, h) tuple; mlp returns a bare tensor
    pt2q.save(gm, tmp_path / "r.pt2q")
    z, h = pt2q.load(tmp_path / "r.pt2q")(*args)
    z2, h2 = gm(*args)
    assert torch.equal(z, z2) and torch.equal(h, h2)
    gm, args = exported("mlp")
    pt2q.save(gm, tmp_path / "m.pt2q")
    out = pt2q.load(tmp_path / "m.pt2q")(*args)
    assert isinstance(out, torch.Tensor) and torch.equal(out, gm(*args))
    out = pt2q.load(tmp_path / "m.pt2q")(x=args[0])  # keyword call, as the exported module allows
    assert torch.equal(out, gm(*args))


def test_parameters_and_buffers_come_back(tmp_path):
    gm, _ = exported("cnn_bn_pool")
    pt2q.save(gm, tmp_path / "m.pt2q")
    loaded = pt2q.load(tmp_path / "m.pt2q")
    assert isinstance(loaded.get_parameter("conv.weight"), torch.nn.Parameter)
    assert torch.equal(loaded.get_buffer("bn.running_var"), gm.get_buffer("bn.running_var"))


def test_cond_branches_are_saved_as_subgraphs(tmp_path):
    gm, _ = exported("cond")
    pt2q.save(gm, tmp_path / "c.pt2q")
    loaded = pt2q.load(tmp_path / "c.pt2q")
    assert isinstance(loaded.true_graph_0, torch.fx.GraphModule)
    x = torch.randn(3, 4).abs() + 0.1
    for inp in (x, -x):
        assert torch.equal(loaded(inp), gm(inp))  # the exported calling convention: a bare tensor


def test_python_modules_are_refused_at_save_time(tmp_path):
    root = torch.nn.Module()
    root.sub = torch.nn.Linear(2, 2)
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    sub = graph.get_attr("sub")
    graph.output(graph.call_function(id, (sub,)))
    with pytest.raises(IRConversionError, match=r"node %sub: get_attr \"sub\" is neither a tensor nor a graph"):
        pt2q.save(torch.fx.GraphModule(root, graph), tmp_path / "m.pt2q")
    del x


def test_bad_files_name_the_file(tmp_path):
    foreign = tmp_path / "image.png"
    foreign.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 100)
    with pytest.raises(RuntimeError, match=r"image.png is not a pt2q graph file"):
        pt2q.load(foreign)
    gm, _ = exported("mlp")
    good = tmp_path / "mlp.pt2q"
    pt2q.save(gm, good)
    cut = tmp_path / "cut.pt2q"
    cut.write_bytes(good.read_bytes()[:-40])
    with pytest.raises(RuntimeError, match=r"cut.pt2q is truncated or corrupted"):
        pt2q.load(cut)
    with pytest.raises(RuntimeError, match=r"cannot read .*missing.pt2q"):
        pt2q.load(tmp_path / "missing.pt2q")
