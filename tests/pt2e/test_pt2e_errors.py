"""Bad input to prepare_pt2e/convert_pt2e: each error names what is wrong (node, observer,
argument), and the caller's model is left as it was."""

import pytest
import torch
from torch import fx, nn

import pt2q
from pt2q.quantizer import (
    QuantizationAnnotation,
    QuantizationSpec,
    Quantizer,
    SharedQuantizationSpec,
    XNNPACKQuantizer,
    get_symmetric_quantization_config,
)
from pt2q import observer as obs

ACT = QuantizationSpec(dtype=torch.int8, quant_min=-128, quant_max=127, qscheme=torch.per_tensor_affine,
                       observer_or_fake_quant_ctr=obs.HistogramObserver)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)
        self.lin = nn.Linear(4, 2)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x))).mean((2, 3))
        return self.lin(y) + 1.0


def exported():
    torch.manual_seed(0)
    m = Net().eval()
    m.bn.running_var.uniform_(0.5, 2)
    x = torch.randn(2, 3, 8, 8)
    return torch.export.export(m, (x,)).module(), x


def xnnpack():
    return XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))


def snapshot(gm):
    return str(gm.graph), {k: v.clone() for k, v in gm.state_dict().items()}


def assert_unchanged(gm, snap):
    code, state = snap
    assert str(gm.graph) == code
    now = gm.state_dict()
    assert now.keys() == state.keys()
    for k, v in state.items():
        assert torch.equal(now[k], v), k


class Annotating(Quantizer):
    def __init__(self, fn):
        self.fn = fn

    def annotate(self, model):
        self.fn(model)
        return model

    def validate(self, model):
        pass


def adds(model):
    return [n for n in model.graph.nodes if n.target == torch.ops.aten.add.Tensor]


def test_prepare_leaves_the_model_as_it_was():
    m, x = exported()
    snap = snapshot(m)
    p = pt2q.prepare_pt2e(m, xnnpack())
    assert not any(n.target == torch.ops.aten.batch_norm.default for n in p.graph.nodes)  # folded in the copy
    assert_unchanged(m, snap)
    p(x)
    pt2q.convert_pt2e(p)
    assert_unchanged(m, snap)


@pytest.mark.parametrize("what", ["module", "exported_program", "symbolic_trace"])
def test_prepare_rejects_what_is_not_an_exported_graph_module(what):
    m = Net().eval()
    x = torch.randn(2, 3, 8, 8)
    if what == "module":
        bad, match = m, "takes the GraphModule of `torch.export.export"
    elif what == "exported_program":
        bad, match = torch.export.export(m, (x,)), r"pass `exported_program.module\(\)`"
    else:
        bad, match = fx.symbolic_trace(m), r"node %conv calls the module `conv`"
    with pytest.raises(TypeError, match=match):
        pt2q.prepare_pt2e(bad, xnnpack())
    with pytest.raises(TypeError):
        pt2q.convert_pt2e(bad)


def test_annotation_naming_a_node_of_another_graph():
    other, _ = exported()
    foreign = next(n for n in other.graph.nodes if n.op == "placeholder")

    def annotate(model):
        add = adds(model)[0]
        add.meta["quantization_annotation"] = QuantizationAnnotation(input_qspec_map={foreign: ACT})

    m, _ = exported()
    snap = snapshot(m)
    with pytest.raises(ValueError, match=r"annotation of node %add: %x is a node of another graph"):
        pt2q.prepare_pt2e(m, Annotating(annotate))
    assert_unchanged(m, snap)


def test_annotation_naming_a_constant_or_a_non_input():
    def constant(model):
        add = adds(model)[0]
        add.meta["quantization_annotation"] = QuantizationAnnotation(input_qspec_map={6: ACT})

    with pytest.raises(ValueError, match=r"annotation of node %add: 6 is not a node"):
        pt2q.prepare_pt2e(exported()[0], Annotating(constant))

    def non_input(model):
        x = next(n for n in model.graph.nodes if n.op == "placeholder")
        add = adds(model)[0]
        add.meta["quantization_annotation"] = QuantizationAnnotation(input_qspec_map={x: ACT})

    with pytest.raises(ValueError, match=r"%x is annotated as an input edge, but it is not an input of %add"):
        pt2q.prepare_pt2e(exported()[0], Annotating(non_input))


def test_shared_spec_naming_an_unannotated_edge():
    def annotate(model):
        add = adds(model)[0]
        lin = next(n for n in model.graph.nodes if n.target == torch.ops.aten.linear.default)
        add.meta["quantization_annotation"] = QuantizationAnnotation(
            input_qspec_map={add.args[0]: SharedQuantizationSpec((lin.args[0], lin))})

    with pytest.raises(ValueError, match=r"names %mean -> %linear, which no annotation quantizes"):
        pt2q.prepare_pt2e(exported()[0], Annotating(annotate))


def test_shared_specs_in_a_cycle():
    def annotate(model):
        relu = next(n for n in model.graph.nodes if n.target == torch.ops.aten.relu.default)
        mean = next(n for n in model.graph.nodes if n.target == torch.ops.aten.mean.dim)
        relu.meta["quantization_annotation"] = QuantizationAnnotation(output_qspec=SharedQuantizationSpec(mean))
        mean.meta["quantization_annotation"] = QuantizationAnnotation(output_qspec=SharedQuantizationSpec(relu))

    with pytest.raises(ValueError, match="SharedQuantizationSpecs form a cycle"):
        pt2q.prepare_pt2e(exported()[0], Annotating(annotate))


def test_tensor_kwarg_on_an_annotated_node():
    class Add(nn.Module):
        def forward(self, x, y):
            return x + y

    args = (torch.randn(2), torch.randn(2))
    m = torch.export.export(Add(), args).module()

    def annotate(model):
        add = adds(model)[0]
        x, y = add.args
        add.args, add.kwargs = (x,), {"other": y}  # a quantizer's transform left a tensor keyword
        add.meta["quantization_annotation"] = QuantizationAnnotation(input_qspec_map={x: ACT})

    with pytest.raises(ValueError, match=r"annotation of node %add: kwarg 'other' holds a tensor"):
        pt2q.prepare_pt2e(m, Annotating(annotate))
    with pytest.raises(AssertionError):  # what torchao raises here, for code that catches it
        pt2q.prepare_pt2e(m, Annotating(annotate))


def test_convert_before_calibration_names_the_observer_and_node():
    p = pt2q.prepare_pt2e(exported()[0], xnnpack())
    with pytest.raises(ValueError, match=r"activation_post_process_\d+ \(observing %\w+\): the observer saw no "
                                         r"data; run calibration data"):
        pt2q.convert_pt2e(p)


def test_nan_in_calibration_names_the_observer_and_node():
    p = pt2q.prepare_pt2e(exported()[0], xnnpack())
    x = torch.randn(2, 3, 8, 8)
    x[0, 0, 0, 0] = float("nan")
    with pytest.raises(RuntimeError, match=r"HistogramObserver observing %x: HistogramObserver: the observed "
                                           r"tensor holds NaN"):
        p(x)


def test_inf_is_an_error_for_min_max_observers_and_dropped_by_histograms():
    spec = QuantizationSpec(dtype=torch.int8, quant_min=-128, quant_max=127, qscheme=torch.per_tensor_affine,
                            observer_or_fake_quant_ctr=obs.MinMaxObserver)

    def annotate(model):
        add = adds(model)[0]
        add.meta["quantization_annotation"] = QuantizationAnnotation(input_qspec_map={add.args[0]: spec})

    class AddOne(nn.Module):
        def forward(self, x):
            return x + 1.0

    m = torch.export.export(AddOne(), (torch.randn(4),)).module()
    p = pt2q.prepare_pt2e(m, Annotating(annotate))
    with pytest.raises(RuntimeError, match=r"MinMaxObserver observing %x: .*\+-inf"):
        p(torch.tensor([1.0, float("inf"), 0.0, 2.0]))
    h = pt2q.prepare_pt2e(torch.export.export(AddOne(), (torch.randn(4),)).module(), xnnpack())
    h(torch.tensor([1.0, float("inf"), -3.0, 2.0]))  # torch.ao's rule: infinities are left out of histograms
    c = pt2q.convert_pt2e(h)
    q = [n for n in c.graph.nodes if n.target == torch.ops.quantized_decomposed.quantize_per_tensor.default]
    assert q and all(0 < n.args[1] < 1 for n in q)  # scales from the finite values only


def test_convert_arguments_are_checked():
    p = pt2q.prepare_pt2e(exported()[0], xnnpack())
    with pytest.raises(ValueError, match="use_reference_representation"):
        pt2q.convert_pt2e(p, "yes")
    with pytest.raises(ValueError, match="fold_quantize must be a bool"):
        pt2q.convert_pt2e(p, fold_quantize=1)


def test_not_yet_supported_is_said_plainly():
    with pytest.raises(NotImplementedError, match="quantization-aware training is not supported"):
        pt2q.prepare_qat_pt2e(exported()[0], xnnpack())
    with pytest.raises(NotImplementedError, match="quantization-aware training"):
        get_symmetric_quantization_config(is_qat=True)


def test_set_module_name_none_is_refused():
    with pytest.raises(ValueError, match="a None config is not supported"):
        XNNPACKQuantizer().set_module_name("lin", None)
