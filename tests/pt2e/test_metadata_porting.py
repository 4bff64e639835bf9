"""convert_pt2e ports node meta "quantization_tag" (and stack traces) onto quantize, dequantize
and choose_qparams nodes as torchao's PortNodeMetaForQDQ does: compared node by node with
torchao on static, per-channel and dynamic configs, with string and non-string tags."""

import enum
import warnings

import pytest
import torch
from torch import nn

import pt2q
from tests.pt2e.models import calibration_batches

QD = torch.ops.quantized_decomposed
QDQ_TARGETS = {QD.quantize_per_tensor.default, QD.dequantize_per_tensor.default, QD.quantize_per_tensor.tensor,
               QD.dequantize_per_tensor.tensor, QD.quantize_per_channel.default, QD.dequantize_per_channel.default,
               QD.choose_qparams.tensor}


class Backend(enum.Enum):
    A = "BackendA"


class ConvLinear(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.linear = nn.Linear(6, 5)

    def forward(self, x):
        y = torch.relu(self.conv(x))
        return self.linear(y + y)


def _tagging(base, non_string):
    """A subclass of `base` (a torchao or pt2q XNNPACKQuantizer) that tags the nodes it annotates,
    as torchao's test_metadata_porting quantizer does."""

    class Tagging(base):
        def annotate(self, model):
            model = super().annotate(model) or model
            counts = {}
            for n in model.graph.nodes:
                if n.op != "call_function" or "quantization_annotation" not in n.meta:
                    continue
                kind = str(n.target).split(".")[-2]
                counts[kind] = counts.get(kind, 0) + 1
                n.meta["quantization_tag"] = (Backend.A, kind) if non_string else f"BackendA_{kind}_{counts[kind]}"
            return model

    return Tagging


def _tags(gm):
    return {n.name: n.meta.get("quantization_tag") for n in gm.graph.nodes if n.target in QDQ_TARGETS}


@pytest.mark.parametrize("non_string", [False, True])
@pytest.mark.parametrize("config", [(False, False), (True, False), (True, True)])
def test_tags_ported_as_torchao_ports_them(config, non_string):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ao = pytest.importorskip("torchao.quantization.pt2e.quantize_pt2e")
        from torchao.testing.pt2e import _xnnpack_quantizer as xnn
    per_channel, dynamic = config
    torch.manual_seed(0)
    model, args = ConvLinear().eval(), (torch.randn(1, 3, 8, 8),)
    cfg = xnn.get_symmetric_quantization_config(is_per_channel=per_channel, is_dynamic=dynamic)
    q = _tagging(xnn.XNNPACKQuantizer, non_string)().set_global(cfg)
    converted = []
    for flow in (ao, pt2q):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            p = flow.prepare_pt2e(torch.export.export(model, args).module(), q)
            for b in calibration_batches(args):
                p(*b)
            converted.append(flow.convert_pt2e(p))
    want, got = _tags(converted[0]), _tags(converted[1])
    assert got == want
    assert sum(v is not None for v in got.values()) >= 4  # the test tags something


def test_pt2q_quantizer_subclass_tags_reach_qdq_nodes():
    from pt2q.quantizer import XNNPACKQuantizer, get_symmetric_quantization_config

    torch.manual_seed(0)
    model, args = ConvLinear().eval(), (torch.randn(1, 3, 8, 8),)
    q = _tagging(XNNPACKQuantizer, False)().set_global(get_symmetric_quantization_config())
    p = pt2q.prepare_pt2e(torch.export.export(model, args).module(), q)
    p(*args)
    c = pt2q.convert_pt2e(p)
    tags = _tags(c)
    linear_input_dq = next(n for n in c.graph.nodes if n.target == torch.ops.aten.linear.default).args[0]
    assert tags[linear_input_dq.name] == "BackendA_linear_1"  # a dq takes its consumer's tag
    conv = next(n for n in c.graph.nodes if n.target == torch.ops.aten.conv2d.default)
    assert [u.target for u in conv.users] == [torch.ops.aten.relu.default]  # observed after the relu
    weight_dq = conv.args[1]
    assert tags[weight_dq.name] == "BackendA_conv2d_1"
    relu = next(n for n in c.graph.nodes if n.target == torch.ops.aten.relu.default)
    assert [tags[u.name] for u in relu.users] == ["BackendA_relu_1"]  # a q takes its producer's tag
