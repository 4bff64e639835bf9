"""torchao's affine observers (AffineQuantizedMinMaxObserver and friends) in pt2q's flow: they are
used as they are and convert themselves into torchao.choose_qparams_affine / quantize_affine /
dequantize_affine, with the weight's quantize folded; the converted graph, its constants and its
outputs equal torchao's (torchao's TestQuantizePT2EAffineQuantization, run on both)."""

import operator
import warnings

import pytest
import torch
from torch import nn

import pt2q
from tests.pt2e import compare

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    ao = pytest.importorskip("torchao.quantization.pt2e.quantize_pt2e")
    from torchao.quantization.pt2e._affine_quantization import (
        AffineQuantizedMinMaxObserver,
        AffineQuantizedMovingAverageMinMaxObserver,
        AffineQuantizedPlaceholderObserver,
    )
    from torchao.quantization.pt2e.observer import MappingType, PerChannelMinMaxObserver, PerGroup, PerToken
    from torchao.quantization.pt2e.quantizer import QuantizationAnnotation, QuantizationSpec, Quantizer

TAO = torch.ops.torchao


def _act(kind):
    if kind == "static_uint8":
        return QuantizationSpec(dtype=torch.uint8, quant_min=0, quant_max=255, qscheme=None, is_dynamic=False,
                                observer_or_fake_quant_ctr=AffineQuantizedMinMaxObserver.with_args(
                                    target_dtype=torch.uint8, mapping_type=MappingType.SYMMETRIC,
                                    granularity=PerToken()))
    ctr = (AffineQuantizedMovingAverageMinMaxObserver.with_args(
        target_dtype=torch.int8, mapping_type=MappingType.SYMMETRIC, granularity=PerToken(), averaging_constant=1)
        if kind == "dynamic_moving_average" else AffineQuantizedPlaceholderObserver.with_args(
            target_dtype=torch.int8, mapping_type=MappingType.SYMMETRIC, granularity=PerToken()))
    return QuantizationSpec(dtype=torch.int8, quant_min=-128, quant_max=127, qscheme=None, is_dynamic=True,
                            observer_or_fake_quant_ctr=ctr)


def _weight(kind):
    if kind == "per_channel":
        return QuantizationSpec(dtype=torch.int8, quant_min=-127, quant_max=127, qscheme=torch.per_channel_symmetric,
                                ch_axis=0, is_dynamic=False,
                                observer_or_fake_quant_ctr=PerChannelMinMaxObserver.with_args())
    dtype, lo, hi = (torch.uint8, 0, 255) if kind == "group_uint8" else (torch.int8, -127, 127)
    return QuantizationSpec(dtype=dtype, quant_min=lo, quant_max=hi, qscheme=None, is_dynamic=False,
                            observer_or_fake_quant_ctr=AffineQuantizedMinMaxObserver.with_args(
                                target_dtype=dtype, mapping_type=MappingType.SYMMETRIC,
                                granularity=PerGroup(group_size=128)))


class _LinearQuantizer(Quantizer):
    def __init__(self, act, weight):
        super().__init__()
        self.act, self.weight = act, weight

    def annotate(self, model):
        for node in model.graph.nodes:
            if node.op == "call_function" and node.target == torch.ops.aten.linear.default:
                node.meta["quantization_annotation"] = QuantizationAnnotation(
                    input_qspec_map={node.args[0]: _act(self.act), node.args[1]: _weight(self.weight)},
                    _annotated=True)
        return model

    def validate(self, model):
        pass


def _counts(gm):
    out = {}
    for n in gm.graph.nodes:
        if n.op == "call_function":
            t = n.target.default if isinstance(n.target, torch._ops.OpOverloadPacket) else n.target
            out[t] = out.get(t, 0) + 1
    return out


# torchao's three tests: (activation, weight, expected node counts after convert)
CASES = {
    "channel_group": ("static_uint8", "group_uint8", {TAO.quantize_affine.default: 1,
                                                       TAO.dequantize_affine.default: 2}),
    "dynamic_act_per_channel_weights": ("dynamic_moving_average", "per_channel", {
        TAO.choose_qparams_affine.default: 1, operator.getitem: 2, TAO.quantize_affine.default: 1,
        TAO.dequantize_affine.default: 1, torch.ops.quantized_decomposed.dequantize_per_channel.default: 1}),
    "dynamic_per_token_act_per_group_weights": ("dynamic_placeholder", "group_int8", {
        TAO.choose_qparams_affine.default: 1, operator.getitem: 2, TAO.quantize_affine.default: 1,
        TAO.dequantize_affine.default: 2}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_same_as_torchao(case):
    act, weight, counts = CASES[case]
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(128, 20)).eval()
    args = (torch.randn(5, 128),)
    q = _LinearQuantizer(act, weight)
    converted = []
    for flow in (ao, pt2q):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            p = flow.prepare_pt2e(torch.export.export(model, args).module(), q)
            for scale in (1.0, 2.0):
                p(args[0] * scale)
            converted.append(flow.convert_pt2e(p))
    ca, cb = converted
    assert {k: v for k, v in _counts(cb).items() if k in counts} == counts
    compare.assert_same_graph(ca, cb)
    compare.assert_same_constants(ca, cb)
    compare.assert_outputs_equal(ca, cb, (torch.randn(5, 128) * 3,))


def test_the_prepared_model_is_left_unchanged():
    torch.manual_seed(0)
    args = (torch.randn(5, 128),)
    p = pt2q.prepare_pt2e(torch.export.export(nn.Linear(128, 20).eval(), args).module(),
                          _LinearQuantizer("static_uint8", "group_uint8"))
    p(*args)
    before = str(p.graph)
    pt2q.convert_pt2e(p)
    assert str(p.graph) == before
    pt2q.convert_pt2e(p)  # and can be converted again


def test_convert_before_calibration_names_the_observer():
    from pt2q._convert import ConvertError

    p = pt2q.prepare_pt2e(torch.export.export(nn.Linear(128, 20).eval(), (torch.randn(5, 128),)).module(),
                          _LinearQuantizer("static_uint8", "group_uint8"))
    with pytest.raises(ConvertError, match=r"activation_post_process_\d \(observing %\w+\): the observer saw no data"):
        pt2q.convert_pt2e(p)
