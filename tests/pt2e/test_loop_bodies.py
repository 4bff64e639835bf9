"""The bodies of scan and while_loop are quantized as models of their own (torchao's recursion):
while_loop against torchao (prepared body, qparams, converted body, outputs); scan, whose
body torch runs as a traced graph (observers inside it see nothing; torchao's prepare fails),
is prepared and convert says why it cannot convert. cond's branches stay float, as in
torchao."""

import copy
import warnings

import pytest
import torch
from torch import nn
from torch._higher_order_ops.scan import scan

import pt2q
from pt2q.quantizer import XNNPACKQuantizer, get_symmetric_quantization_config
from tests.pt2e import compare

QD = torch.ops.quantized_decomposed


class WhileLinear(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, it, x):
        return torch._higher_order_ops.while_loop(lambda i, x: i < 3, lambda i, x: (i + 1, self.lin(x)), (it, x))


class ScanLinear(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, init, xs):
        def combine(c, x):
            y = self.lin(x + c)
            return y, y.clone()

        return scan(combine, init, xs)


def _targets(gm):
    return [n.target for n in gm.graph.nodes if n.op == "call_function"]


def test_while_loop_body_same_as_torchao():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ao = pytest.importorskip("torchao.quantization.pt2e.quantize_pt2e")
        from torchao.testing.pt2e import _xnnpack_quantizer as xnn
    torch.manual_seed(0)
    model, args = WhileLinear().eval(), (torch.tensor(0), torch.randn(2, 8))
    q = xnn.XNNPACKQuantizer().set_global(xnn.get_symmetric_quantization_config())
    ea, eb = (torch.export.export(copy.deepcopy(model), args).module() for _ in range(2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pa, pb = ao.prepare_pt2e(ea, q), pt2q.prepare_pt2e(eb, q)
        compare.assert_same_prepared(pa.while_loop_body_graph_0, pb.while_loop_body_graph_0)
        for scale in (1.0, 3.0):
            pa(args[0], args[1] * scale)
            pb(args[0], args[1] * scale)
        compare.assert_same_qparams(pa.while_loop_body_graph_0, pb.while_loop_body_graph_0)
        ca, cb = ao.convert_pt2e(pa), pt2q.convert_pt2e(pb)
    for body in ("while_loop_body_graph_0", "while_loop_cond_graph_0"):
        compare.assert_same_graph(getattr(ca, body), getattr(cb, body))
        compare.assert_same_constants(getattr(ca, body), getattr(cb, body))
    assert QD.quantize_per_tensor.default in _targets(cb.while_loop_body_graph_0)
    compare.assert_outputs_equal(ca, cb, (torch.tensor(0), torch.randn(2, 8)))


def _scan_prepared():
    torch.manual_seed(0)
    model = ScanLinear().eval()
    args = (torch.randn(2, 8), torch.randn(4, 2, 8))
    gm = torch.export.export(model, args).module()
    q = XNNPACKQuantizer().set_global(get_symmetric_quantization_config())
    return model, args, pt2q.prepare_pt2e(gm, q)


def test_scan_body_is_prepared_and_convert_explains_why_it_saw_no_data():
    """torch 2.13 runs a scan's body as a graph traced from it (with fake tensors), so observers
    inside record nothing; torchao's prepare_pt2e fails on this model. pt2q prepares the body,
    calibration runs, and convert says what happened, naming the scan."""
    from pt2q._convert import ConvertError

    model, (init, xs), p = _scan_prepared()
    body = p.scan_combine_graph_0
    assert len([n for n in body.graph.nodes if n.op == "call_module"]) == 5  # add inputs/output, weight, output
    out = p(init, xs)  # runs
    want = torch.export.export(model, (init, xs)).module()(init, xs)
    assert all(torch.equal(a, b) for a, b in zip(out, want))  # observers do not change values
    with pytest.raises(ConvertError, match=r"in the combine_fn of %scan \(scan_combine_graph_0\): "
                                           r"activation_post_process_\d.*saw no data.*record nothing"):
        pt2q.convert_pt2e(p)


def test_prepared_bodies_leave_the_caller_model_alone():
    torch.manual_seed(0)
    gm = torch.export.export(WhileLinear().eval(), (torch.tensor(0), torch.randn(2, 8))).module()
    before = str(gm.while_loop_body_graph_0.graph)
    p = pt2q.prepare_pt2e(gm, XNNPACKQuantizer().set_global(get_symmetric_quantization_config()))
    p(torch.tensor(0), torch.randn(2, 8))
    pt2q.convert_pt2e(p)
    assert str(gm.while_loop_body_graph_0.graph) == before
    assert [n for n in p.while_loop_body_graph_0.graph.nodes if n.op == "call_module"]  # p keeps its observers
