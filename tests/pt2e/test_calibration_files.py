"""Calibration split over processes: each shard's prepared model saves its observers; loading
them into a fresh prepared model reproduces it, and merging them gives the statistics of one
calibration over all shards (exactly for min/max observers)."""

import pytest
import torch

import pt2q
from pt2q.quantizer import QuantizationAnnotation, QuantizationSpec, Quantizer, XNNPACKQuantizer
from pt2q.quantizer import get_symmetric_quantization_config
from pt2q import observer as obs
from tests.pt2e import compare
from tests.pt2e.models import calibration_batches, make

MINMAX = QuantizationSpec(dtype=torch.int8, quant_min=-128, quant_max=127, qscheme=torch.per_tensor_affine,
                          observer_or_fake_quant_ctr=obs.MinMaxObserver)


class MinMaxLinears(Quantizer):
    def annotate(self, model):
        for n in model.graph.nodes:
            if n.target == torch.ops.aten.linear.default:
                n.meta["quantization_annotation"] = QuantizationAnnotation(
                    input_qspec_map={n.args[0]: MINMAX}, output_qspec=MINMAX, _annotated=True)

    def validate(self, model):
        pass


def prepared(quantizer):
    model, args, kwargs = make("mlp")
    return pt2q.prepare_pt2e(torch.export.export(model, args, **kwargs).module(), quantizer), args


def test_save_then_load_reproduces_the_observers(tmp_path):
    q = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
    a, args = prepared(q)
    for b in calibration_batches(args):
        a(*b)
    assert pt2q.save_calibration(a, tmp_path / "calib.pt2qobs") > 0
    fresh, _ = prepared(q)
    pt2q.load_calibration(fresh, tmp_path / "calib.pt2qobs")
    compare.assert_same_qparams(a, fresh)
    compare.assert_same_graph(pt2q.convert_pt2e(a), pt2q.convert_pt2e(fresh))


def test_merging_shards_equals_one_calibration(tmp_path):
    whole, args = prepared(MinMaxLinears())
    batches = calibration_batches(args, n=6)
    for b in batches:
        whole(*b)
    shard1, _ = prepared(MinMaxLinears())
    shard2, _ = prepared(MinMaxLinears())
    for b in batches[:3]:
        shard1(*b)
    for b in batches[3:]:
        shard2(*b)
    pt2q.save_calibration(shard2, tmp_path / "shard2")
    pt2q.load_calibration(shard1, tmp_path / "shard2", merge=True)
    compare.assert_same_qparams(whole, shard1)


def test_loading_into_a_different_model_is_refused(tmp_path):
    a, args = prepared(MinMaxLinears())
    a(*args)
    pt2q.save_calibration(a, tmp_path / "c")
    other, _ = prepared(XNNPACKQuantizer().set_global(get_symmetric_quantization_config()))
    with pytest.raises(ValueError, match=r"observer activation_post_process_\d+ is a MinMaxObserver"):
        pt2q.load_calibration(other, tmp_path / "c")
