"""pt2q's prepare_pt2e/convert_pt2e against torchao's, driven by the same torchao quantizer
objects (XNNPACK static per-tensor, per-channel, dynamic; X86Inductor): the same prepared graph
(observer names, classes, placement and sharing), bit-identical qparams after calibration, the
same converted graph (targets and arguments), the same folded weights, and equal outputs."""

import warnings

import pytest

from tests.pt2e import compare
from tests.pt2e.models import MODELS, calibration_batches, export_twice

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    ao = pytest.importorskip("torchao.quantization.pt2e.quantize_pt2e")
    from torchao.quantization.pt2e.quantizer import x86_inductor_quantizer as x86
    from torchao.testing.pt2e import _xnnpack_quantizer as xnn


def quantizer(kind):
    if kind == "x86":
        return x86.X86InductorQuantizer().set_global(x86.get_default_x86_inductor_quantization_config())
    per_channel, dynamic = {"xnnpack_per_tensor": (False, False), "xnnpack_per_channel": (True, False),
                            "xnnpack_dynamic": (True, True)}[kind]
    cfg = xnn.get_symmetric_quantization_config(is_per_channel=per_channel, is_dynamic=dynamic)
    return xnn.XNNPACKQuantizer().set_global(cfg)


KINDS = ["xnnpack_per_tensor", "xnnpack_per_channel", "xnnpack_dynamic", "x86"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("model", sorted(MODELS))
def test_same_as_torchao(model, kind):
    ea, eb, args = export_twice(model)
    q = quantizer(kind)
    if model == "inplace_cnn" and kind == "x86":
        # torch 2.13's partitions of a plain export group a module's calls by module: torchao's X86
        # recipe refuses the relu module the model calls three times, under either flow.
        import pt2q
        for prepare, m in ((ao.prepare_pt2e, ea), (pt2q.prepare_pt2e, eb)):
            with pytest.raises(ValueError, match="more than one output node"):
                prepare(m, q)
        return
    ca, cb = compare.run_flows(ao, ea, eb, args, q, q, calibration_batches(args))
    for batch in calibration_batches(args, n=2, seed=7):
        compare.assert_outputs_equal(ca, cb, batch)
