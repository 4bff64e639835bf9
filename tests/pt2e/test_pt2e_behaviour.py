"""Public behaviour of prepare_pt2e/convert_pt2e, ported from torchao's test_quantize_pt2e.py,
test_duplicate_dq.py and ExecuTorch's XNNPACK quantizer tests (contract §4.2): custom quantizers
with every spec class, sharing rules, weight folding, train/eval, the observer callback, and
re-export, save/load and torch.compile of converted models. Where torchao runs on the same
input, the result is also compared with torchao's."""

import copy
import io
import operator
import warnings

import pytest
import torch
from torch import nn

import pt2q
from pt2q.quantizer import (
    ComposableQuantizer,
    DerivedQuantizationSpec,
    EmbeddingQuantizer,
    FixedQParamsQuantizationSpec,
    QuantizationAnnotation,
    QuantizationSpec,
    Quantizer,
    SharedQuantizationSpec,
    XNNPACKQuantizer,
    get_symmetric_quantization_config,
)
from pt2q import observer as obs
from tests.pt2e import compare

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    ao = pytest.importorskip("torchao.quantization.pt2e.quantize_pt2e")
    from tests.pt2e.adapter import AoAdapter  # noqa: E402  (needs torchao)

Q = torch.ops.quantized_decomposed


def export(m, args):
    return torch.export.export(m.eval(), args).module()


def count(gm, target):
    return sum(1 for n in gm.graph.nodes if n.op == "call_function" and n.target == target)


def calls(gm):
    return [n.target for n in gm.graph.nodes if n.op == "call_function"]


def is_subsequence(wanted, seq):
    it = iter(seq)
    return all(any(w == s for s in it) for w in wanted)


def flows(model, args, quantizer, batches=1):
    """(torchao converted, pt2q converted), after checking they are the same graph and weights."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = ao.prepare_pt2e(export(copy.deepcopy(model), args), AoAdapter(quantizer))
        b = pt2q.prepare_pt2e(export(copy.deepcopy(model), args), quantizer)
        compare.assert_same_prepared(a, b)
        for _ in range(batches):
            a(*args)
            b(*args)
        ca, cb = ao.convert_pt2e(a), pt2q.convert_pt2e(b)
    compare.assert_same_graph(ca, cb)
    compare.assert_same_constants(ca, cb)
    compare.assert_outputs_equal(ca, cb, args)
    return ca, cb


class Conv(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 3, 3)

    def forward(self, x):
        return self.conv(x)


ACT_U8 = QuantizationSpec(dtype=torch.uint8, quant_min=0, quant_max=255, qscheme=torch.per_tensor_affine,
                          is_dynamic=False, observer_or_fake_quant_ctr=obs.default_observer)
W_I8 = QuantizationSpec(dtype=torch.int8, quant_min=-128, quant_max=127, qscheme=torch.per_tensor_symmetric,
                        is_dynamic=False, observer_or_fake_quant_ctr=obs.default_weight_observer)
BIAS_F = QuantizationSpec(dtype=torch.float32, is_dynamic=False, observer_or_fake_quant_ctr=obs.PlaceholderObserver)


class ConvQuantizer(Quantizer):
    """torchao's test_simple_quantizer: uint8 activations, int8 weight, float bias."""

    def __init__(self, with_output=True):
        self.with_output = with_output

    def annotate(self, model):
        for n in model.graph.nodes:
            if n.op == "call_function" and n.target == torch.ops.aten.conv2d.default:
                x, w, b = n.args[0], n.args[1], n.args[2]
                n.meta["quantization_annotation"] = QuantizationAnnotation(
                    input_qspec_map={x: ACT_U8, w: W_I8, b: BIAS_F},
                    output_qspec=ACT_U8 if self.with_output else None, _annotated=True)
        return model

    def validate(self, model):
        pass


def test_simple_quantizer():
    _, cb = flows(Conv(), (torch.randn(1, 3, 5, 5),), ConvQuantizer())
    assert count(cb, Q.quantize_per_tensor.default) == 2
    assert count(cb, Q.dequantize_per_tensor.default) == 3
    assert is_subsequence([Q.dequantize_per_tensor.default, Q.dequantize_per_tensor.default,
                           torch.ops.aten.conv2d.default, Q.quantize_per_tensor.default], calls(cb))


def test_no_output_annotation_means_no_output_qdq():
    _, cb = flows(Conv(), (torch.randn(1, 3, 5, 5),), ConvQuantizer(with_output=False))
    assert calls(cb)[-1] == torch.ops.aten.conv2d.default


class Sigmoid(nn.Module):
    def forward(self, x):
        return torch.sigmoid(x)


class FixedQuantizer(Quantizer):
    def annotate(self, model):
        for n in model.graph.nodes:
            if n.target == torch.ops.aten.sigmoid.default:
                fixed = FixedQParamsQuantizationSpec(dtype=torch.uint8, scale=1.0 / 256.0, zero_point=0,
                                                     quant_min=0, quant_max=255, qscheme=torch.per_tensor_affine)
                n.meta["quantization_annotation"] = QuantizationAnnotation(
                    input_qspec_map={n.args[0]: ACT_U8}, output_qspec=fixed, _annotated=True)

    def validate(self, model):
        pass


def test_fixed_qparams_spec():
    _, cb = flows(Sigmoid(), (torch.randn(2, 4),), FixedQuantizer())
    qs = [n for n in cb.graph.nodes if n.target == Q.quantize_per_tensor.default]
    assert [tuple(n.args[1:]) for n in qs][-1] == (1.0 / 256.0, 0, 0, 255, torch.uint8)


class Linear(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)

    def forward(self, x):
        return self.lin(x)


class DerivedBiasQuantizer(Quantizer):
    """torchao's test_derived_qspec: int32 bias with scale = act scale * weight scale."""

    def annotate(self, model):
        for n in model.graph.nodes:
            if n.target == torch.ops.aten.linear.default:
                x, w, b = n.args

                def derive(observers):
                    (sa, _), (sw, _) = (o.calculate_qparams() for o in observers)
                    return sa * sw, torch.zeros_like(sa, dtype=torch.int32)

                bias = DerivedQuantizationSpec(derived_from=[(x, n), (w, n)], derive_qparams_fn=derive,
                                               dtype=torch.int32, quant_min=-2 ** 31, quant_max=2 ** 31 - 1,
                                               qscheme=torch.per_tensor_symmetric)
                n.meta["quantization_annotation"] = QuantizationAnnotation(
                    input_qspec_map={x: ACT_U8, w: W_I8, b: bias}, output_qspec=ACT_U8, _annotated=True)

    def validate(self, model):
        pass


def test_derived_bias_spec():
    _, cb = flows(Linear(), (torch.randn(2, 4),), DerivedBiasQuantizer())
    assert count(cb, Q.quantize_per_tensor.default) == 2  # weight and bias quantize folded
    assert count(cb, Q.dequantize_per_tensor.default) == 4


class AddChain(nn.Module):
    def forward(self, x, y, z):
        return (x + y) + z


class NoImplicitSharing(Quantizer):
    """torchao's test_allow_implicit_sharing: each add's inputs/output share one observer, and
    adds do not share with each other."""

    def annotate(self, model):
        for n in model.graph.nodes:
            if n.target == torch.ops.aten.add.Tensor:
                a, b = n.args
                shared = SharedQuantizationSpec((a, n))
                n.meta["quantization_annotation"] = QuantizationAnnotation(
                    input_qspec_map={a: ACT_U8, b: shared}, output_qspec=shared, allow_implicit_sharing=False,
                    _annotated=True)

    def validate(self, model):
        pass


def test_allow_implicit_sharing_false():
    args = tuple(torch.randn(2, 3) for _ in range(3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = ao.prepare_pt2e(export(AddChain(), args), AoAdapter(NoImplicitSharing()))
        b = pt2q.prepare_pt2e(export(AddChain(), args), NoImplicitSharing())
    compare.assert_same_prepared(a, b)
    assert len(compare.sharing_partition(b)) == 2


class Cats(nn.Module):
    def forward(self, a, b, c):
        return torch.cat([torch.cat([a, b]), c])


class CatQuantizer(Quantizer):
    def annotate(self, model):
        for n in model.graph.nodes:
            if n.target == torch.ops.aten.cat.default:
                first, *rest = n.args[0]
                shared = SharedQuantizationSpec((first, n))
                n.meta["quantization_annotation"] = QuantizationAnnotation(
                    input_qspec_map={first: ACT_U8, **{r: shared for r in rest}}, output_qspec=shared,
                    _annotated=True)

    def validate(self, model):
        pass


def test_shared_qspec_transitivity():
    args = tuple(torch.randn(2, 3) * (i + 1) for i in range(3))
    _, cb = flows(Cats(), args, CatQuantizer())
    scales = {n.args[1] for n in cb.graph.nodes if n.target == Q.quantize_per_tensor.default}
    assert len(scales) == 1  # one observer for both cats and all their inputs


class LateAnchor(Quantizer):
    """A shared spec naming an edge that appears later in graph order (pytorch/ao#4421): torchao
    asserts while creating observers; pt2q builds the group from its real spec."""

    def annotate(self, model):
        adds = [n for n in model.graph.nodes if n.target == torch.ops.aten.add.Tensor]
        first, second = adds
        second.meta["quantization_annotation"] = QuantizationAnnotation(
            input_qspec_map={second.args[0]: ACT_U8, second.args[1]: ACT_U8}, _annotated=True)
        first.meta["quantization_annotation"] = QuantizationAnnotation(
            input_qspec_map={first.args[0]: SharedQuantizationSpec((second.args[1], second))}, _annotated=True)

    def validate(self, model):
        pass


def test_shared_spec_anchored_later_in_the_graph():
    args = tuple(torch.randn(2, 3) for _ in range(3))
    with pytest.raises(AssertionError):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ao.prepare_pt2e(export(AddChain(), args), AoAdapter(LateAnchor()))
    b = pt2q.prepare_pt2e(export(AddChain(), args), LateAnchor())
    b(*args)
    c = pt2q.convert_pt2e(b)
    assert count(c, Q.quantize_per_tensor.default) == 3
    torch.testing.assert_close(c(*args), AddChain()(*args), atol=0.1, rtol=0.1)


def test_fold_quantize_counts():
    q = XNNPACKQuantizer().set_global(get_symmetric_quantization_config())
    _, cb = flows(Linear(), (torch.randn(2, 4),), q)
    assert count(cb, Q.quantize_per_tensor.default) == 2 and count(cb, Q.dequantize_per_tensor.default) == 3
    q = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
    _, cb = flows(Linear(), (torch.randn(2, 4),), q)
    assert count(cb, Q.quantize_per_tensor.default) == 2 and count(cb, Q.dequantize_per_tensor.default) == 2
    assert count(cb, Q.dequantize_per_channel.default) == 1
    assert count(cb, Q.quantize_per_channel.default) == 0


def test_fold_quantize_false_keeps_float_weights():
    q = XNNPACKQuantizer().set_global(get_symmetric_quantization_config())
    m = pt2q.prepare_pt2e(export(Linear(), (torch.randn(2, 4),)), q)
    m(torch.randn(2, 4))
    c = pt2q.convert_pt2e(m, fold_quantize=False)
    assert count(c, Q.quantize_per_tensor.default) == 3


class TransposedWeight(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(2, 2))
        self.dont_fold_me = nn.Parameter(torch.randn(2, 2))
        self.lin = nn.Linear(2, 2)

    def forward(self, x):
        return nn.functional.linear(x, self.weight.t()) + self.lin(x) + self.dont_fold_me.t()


def test_fold_ops_before_quantize_but_not_other_constants():
    q = XNNPACKQuantizer().set_module_type(nn.Linear, get_symmetric_quantization_config())
    _, cb = flows(TransposedWeight(), (torch.randn(2, 2),), q)
    assert count(cb, torch.ops.aten.t.default) == 2  # neither t() feeds a quantize: not folded


class DynamicLinears(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 4)

    def forward(self, x):
        return self.b(self.a(x))


def test_dynamic_linear_counts():
    q = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True, is_dynamic=True))
    _, cb = flows(DynamicLinears(), (torch.randn(3, 8),), q)
    assert count(cb, Q.choose_qparams.tensor) == 2
    assert count(cb, Q.quantize_per_tensor.tensor) == 2 and count(cb, Q.dequantize_per_tensor.tensor) == 2
    assert count(cb, Q.dequantize_per_channel.default) == 2


class ConvTwoLinears(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 3, 3)
        self.l1 = nn.Linear(3, 8)
        self.l2 = nn.Linear(8, 8)

    def forward(self, x):
        y = self.conv(x).permute(0, 2, 3, 1)
        return self.l2(self.l1(y))


def test_conv_linear_per_channel_counts():
    q = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
    _, cb = flows(ConvTwoLinears(), (torch.randn(2, 3, 4, 4),), q)
    assert count(cb, Q.quantize_per_tensor.default) == 5 and count(cb, Q.dequantize_per_tensor.default) == 5
    assert count(cb, Q.dequantize_per_channel.default) == 3 and count(cb, Q.quantize_per_channel.default) == 0


class SharedDQ(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 3, 3)
        self.c1 = nn.Conv2d(3, 3, 1)
        self.c2 = nn.Conv2d(3, 3, 1)

    def forward(self, x):
        y = self.conv(x)
        return self.c1(y) + self.c2(y)


def test_duplicate_dq_per_annotated_user():
    q = XNNPACKQuantizer().set_global(get_symmetric_quantization_config())
    _, cb = flows(SharedDQ(), (torch.randn(1, 3, 6, 6),), q)
    for n in cb.graph.nodes:
        if n.target == Q.dequantize_per_tensor.default:
            assert len(n.users) == 1, n.name


class EmbedConvLinear(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 12)
        self.conv = nn.Conv2d(3, 3, 1)
        self.lin = nn.Linear(12, 3)

    def forward(self, idx, x):
        return self.lin(self.emb(idx)), self.conv(x)


def test_composable_embedding_and_xnnpack():
    q = ComposableQuantizer([EmbeddingQuantizer(),
                             XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))])
    args = (torch.randint(0, 10, (4,)), torch.randn(1, 3, 4, 4))
    _, cb = flows(EmbedConvLinear(), args, q)
    assert count(cb, Q.dequantize_per_channel.default) == 3


class Overwriting(Quantizer):
    def annotate(self, model):
        for n in model.graph.nodes:
            n.meta["quantization_annotation"] = None

    def validate(self, model):
        pass


def test_composable_quantizer_rejects_a_quantizer_that_replaces_annotations():
    q = ComposableQuantizer([XNNPACKQuantizer().set_global(get_symmetric_quantization_config()), Overwriting()])
    m = export(Conv(), (torch.randn(1, 3, 5, 5),))
    with pytest.raises(RuntimeError, match="Overwriting has changed annotations on node"):
        pt2q.prepare_pt2e(m, q)


class Callback(XNNPACKQuantizer):
    """prepare_obs_or_fq_callback forces fixed qparams on the model output."""

    def prepare_obs_or_fq_callback(self, model, edge_or_node_to_obs_or_fq):
        out = [n for n in model.graph.nodes if n.op == "output"][0].args[0][0]
        edge_or_node_to_obs_or_fq[out] = obs.FixedQParamsObserver(scale=0.125, zero_point=3, dtype=torch.int8,
                                                                   quant_min=-128, quant_max=127)


def test_prepare_obs_or_fq_callback_can_replace_an_observer():
    q = Callback().set_global(get_symmetric_quantization_config())
    _, cb = flows(Linear(), (torch.randn(2, 4),), q)
    last_q = [n for n in cb.graph.nodes if n.target == Q.quantize_per_tensor.default][-1]
    assert last_q.args[1:3] == (0.125, 3)



class ConvBn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)

    def forward(self, x):
        return self.bn(self.conv(x))


class RunsItsModel(ConvQuantizer):
    """A quantizer that runs the model it annotates and reads its code (prepare hands it a copy
    whose code is generated only on demand)."""

    def __init__(self, x):
        super().__init__()
        self.x, self.seen = x, {}

    def transform_for_annotation(self, model):
        self.seen["transformed"] = model(self.x)
        return model

    def annotate(self, model):
        super().annotate(model)
        self.seen["annotated"] = model(self.x)
        self.seen["code"] = model.code
        return model


def test_quantizer_can_run_and_print_the_model_it_annotates():
    m = ConvBn().eval()
    with torch.no_grad():
        m.bn.running_mean.uniform_(-1, 1)
        m.bn.running_var.uniform_(0.5, 2)
    x = torch.randn(2, 3, 6, 6)
    q = RunsItsModel(x)
    prepared = pt2q.prepare_pt2e(export(m, (x,)), q)
    expected = m(x)
    # The BatchNorm is folded into the conv it sees: same values within fp32 rounding, no batch_norm call.
    torch.testing.assert_close(q.seen["transformed"], expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(q.seen["annotated"], expected, rtol=1e-5, atol=1e-5)
    assert "conv2d" in q.seen["code"] and "batch_norm" not in q.seen["code"]
    # What the caller gets is an ordinary GraphModule with its code generated.
    from torch.fx._lazy_graph_module import _LazyGraphModule
    assert not isinstance(prepared, _LazyGraphModule)
    assert "activation_post_process_" in prepared.code
    torch.testing.assert_close(prepared(x), expected, rtol=1e-5, atol=1e-5)



def test_convert_takes_a_deep_copy_of_the_prepared_model():
    """copy.deepcopy of a GraphModule copies node.meta shallowly, so the copy's annotations still
    name the original's nodes. torchao converts such a copy too (but its metadata port then
    misses the stack traces of the input dequantizes); pt2q converts it as the original."""
    m, x = ConvBn().eval(), torch.randn(2, 3, 6, 6)
    for per_channel in (False, True):
        q = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=per_channel))
        prepared = pt2q.prepare_pt2e(export(m, (x,)), q)
        prepared(x)
        twin = copy.deepcopy(prepared)
        qa = next(n.meta["quantization_annotation"] for n in twin.graph.nodes if "quantization_annotation" in n.meta)
        assert all(k.graph is prepared.graph for k in qa.input_qspec_map)  # what makes this case
        from_copy, from_original = pt2q.convert_pt2e(twin), pt2q.convert_pt2e(prepared)
        compare.assert_same_graph(from_copy, from_original)
        compare.assert_same_constants(from_copy, from_original)
        torch.testing.assert_close(from_copy(x), from_original(x), rtol=0, atol=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            a = ao.prepare_pt2e(export(m, (x,)), AoAdapter(q))
            a(x)
            compare.assert_same_graph(ao.convert_pt2e(a), from_copy)


class Dropout(nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.3)
        self.bn = nn.BatchNorm1d(4, eps=1e-3, momentum=0.03)

    def forward(self, x):
        return self.bn(self.drop(x))


def test_train_eval_helpers_keep_arguments_and_are_idempotent():
    m = export(Dropout(), (torch.randn(8, 4),))
    m = pt2q.prepare_pt2e(m, XNNPACKQuantizer().set_global(get_symmetric_quantization_config()))
    with pytest.raises(NotImplementedError, match="move_exported_model_to_train"):
        m.train()
    with pytest.raises(NotImplementedError):
        m.eval()
    pt2q.move_exported_model_to_train(m)
    pt2q.move_exported_model_to_train(m)
    drop = [n for n in m.graph.nodes if n.target == torch.ops.aten.dropout.default]
    bn = [n for n in m.graph.nodes if n.target == torch.ops.aten.batch_norm.default]
    assert drop and drop[0].args[1:] == (0.3, True)
    assert bn and bn[0].args[5:8] == (True, 0.03, 1e-3)
    pt2q.move_exported_model_to_eval(m)
    assert drop[0].args[2] is False and bn[0].args[5] is False and bn[0].args[6:8] == (0.03, 1e-3)
    pt2q.allow_exported_model_train_eval(m)
    m.train()
    assert drop[0].args[2] is True
    m.eval()
    assert drop[0].args[2] is False


def test_converted_model_reexports_saves_loads_and_compiles():
    q = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
    x = torch.randn(2, 3, 4, 4)
    m = pt2q.prepare_pt2e(export(ConvTwoLinears(), (x,)), q)
    m(x)
    c = pt2q.convert_pt2e(m)
    ref = c(x)
    ep = torch.export.export(c, (x,), strict=True)
    buf = io.BytesIO()
    torch.export.save(ep, buf)
    buf.seek(0)
    loaded = torch.export.load(buf).module()
    assert torch.equal(loaded(x), ref)
    compiled = torch.compile(c)
    torch.testing.assert_close(compiled(x), ref, atol=1e-5, rtol=1e-5)


class ForeignObserverQuantizer(ConvQuantizer):
    """Specs naming torch.ao's observer classes and a user-written one."""

    def annotate(self, model):
        import torch.ao.quantization.observer as tao

        class Recording(nn.Module):  # unknown class: used as it is
            def __init__(self, **kwargs):
                super().__init__()
                self.kwargs = kwargs
                self.dtype = kwargs["dtype"]
                self.seen = 0

            def forward(self, x):
                self.seen += 1
                return x

        act = QuantizationSpec(dtype=torch.uint8, quant_min=0, quant_max=255, qscheme=torch.per_tensor_affine,
                               observer_or_fake_quant_ctr=tao.HistogramObserver.with_args(eps=2 ** -12))
        rec = QuantizationSpec(dtype=torch.float32, observer_or_fake_quant_ctr=Recording)
        for n in model.graph.nodes:
            if n.target == torch.ops.aten.conv2d.default:
                x, w, b = n.args
                n.meta["quantization_annotation"] = QuantizationAnnotation(
                    input_qspec_map={x: act, w: W_I8, b: rec}, _annotated=True)


def test_torch_ao_observers_map_to_pt2q_and_unknown_ones_are_kept():
    m = pt2q.prepare_pt2e(export(Conv(), (torch.randn(1, 3, 5, 5),)), ForeignObserverQuantizer())
    kinds = {type(o).__name__: o for o in compare.observers(m).values()}
    assert type(kinds["HistogramObserver"]).__module__ == "pt2q.observer"
    assert kinds["HistogramObserver"].eps.item() == 2 ** -12
    m(torch.randn(1, 3, 5, 5))
    assert kinds["Recording"].seen == 1 and kinds["Recording"].kwargs["dtype"] == torch.float32


def test_convert_neither_runs_nor_folds_buffer_mutations():
    # torchao's constant folding evaluates in-place buffer updates at convert time (the buffer
    # moves on) and folds their quantize into a constant; pt2q folds only pure computations.
    from tests.graph.zoo import Counter

    torch.manual_seed(0)
    x = torch.randn(3, 4)
    m = torch.export.export(Counter(), (x,)).module()
    p = pt2q.prepare_pt2e(m, XNNPACKQuantizer().set_global(get_symmetric_quantization_config()))
    p(x)
    steps = p.steps.clone()
    c = pt2q.convert_pt2e(p)
    assert torch.equal(c.steps, steps)
    c(x)
    assert torch.equal(c.steps, steps + 1)
    mutations = [n for n in c.graph.nodes if n.target in (torch.ops.aten.add_.Tensor, torch.ops.aten.mul_.Tensor)]
    assert all(n.users for n in mutations if n.target == torch.ops.aten.mul_.Tensor)


def test_folded_bn_bias_has_a_value_in_its_meta_as_torchaos():
    """torchao's test_chunked_bn_fusion: one bias-free conv and BatchNorm on each chunk, so folding
    gives the conv a bias it did not have."""
    from tests.pt2e.test_fold_batch_norm import Chunked

    torch.manual_seed(0)
    model, x = Chunked(bias=False).eval(), torch.rand(1, 3, 16, 16)
    q = XNNPACKQuantizer().set_global(get_symmetric_quantization_config())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = ao.prepare_pt2e(export(copy.deepcopy(model), (x,)), AoAdapter(q))
        b = pt2q.prepare_pt2e(export(copy.deepcopy(model), (x,)), q)
    assert all(n.meta for n in b.graph.nodes)
    # (pt2q's observer calls carry their input's value too, for torch 2.11's loops)
    with_val = lambda gm: {n.name for n in gm.graph.nodes  # noqa: E731
                           if "val" in n.meta and not n.name.startswith("activation_post_process_")}
    assert with_val(a) == with_val(b)
    biases = [n for n in b.graph.nodes if n.op == "get_attr" and n.target.endswith("_bias")]
    assert biases
    for n in biases:
        va, vb = next(m for m in a.graph.nodes if m.name == n.name).meta["val"], n.meta["val"]
        assert isinstance(vb, torch._subclasses.FakeTensor)
        assert (vb.shape, vb.dtype) == (va.shape, va.dtype) == (operator.attrgetter(n.target)(b).shape, torch.float32)
    torch.testing.assert_close(b(x), model(x), rtol=1e-4, atol=1e-4)


def test_observers_are_instances_of_torchao_and_torch_ao_observer_base():
    """Code written for torchao checks `isinstance(obs, ObserverBase)` (torchao's own x86 and
    scan / while_loop tests do): pt2q's observers register with both ABCs."""
    import torch.ao.quantization.observer as tao_obs
    from torchao.quantization.pt2e import ObserverBase as AoObserverBase

    m = pt2q.prepare_pt2e(export(Conv(), (torch.randn(1, 3, 5, 5),)),
                          XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True)))
    found = compare.observers(m).values()
    assert {type(o).__name__ for o in found} == {"HistogramObserver", "PerChannelMinMaxObserver"}
    assert all(isinstance(o, AoObserverBase) and isinstance(o, tao_obs.ObserverBase) for o in found)
    assert not isinstance(torch.nn.ReLU(), AoObserverBase)


def test_observer_base_imported_after_pt2q_is_registered_at_prepare(monkeypatch):
    import abc
    import sys
    import types

    late = types.ModuleType("late_observer_library")

    class LateObserverBase(abc.ABC):
        pass

    late.ObserverBase = LateObserverBase
    monkeypatch.setitem(sys.modules, "late_observer_library", late)
    monkeypatch.setattr(obs, "_FOREIGN_OBSERVER_MODULES", obs._FOREIGN_OBSERVER_MODULES + ("late_observer_library",))
    m = pt2q.prepare_pt2e(export(Conv(), (torch.randn(1, 3, 5, 5),)), XNNPACKQuantizer().set_global(
        get_symmetric_quantization_config()))
    assert all(isinstance(o, LateObserverBase) for o in compare.observers(m).values())


class CopyingQuantizer(Quantizer):
    """torchao's test_transform_for_annotation: transform_for_annotation returns a new module
    whose graph came from Graph.graph_copy (no output node) with add turned into mul, so
    prepare must use the returned module, whatever its graph lacks."""

    def transform_for_annotation(self, model):
        graph = torch.fx.Graph()
        graph.graph_copy(model.graph, {})
        for n in graph.nodes:
            if n.target == torch.ops.aten.add.Tensor:
                n.target = torch.ops.aten.mul.Tensor
        return torch.fx.GraphModule(model, graph)

    def annotate(self, model):
        return model

    def validate(self, model):
        pass


def test_transform_for_annotation_result_is_what_gets_prepared():
    class AddThree(nn.Module):
        def forward(self, x):
            return x + 3

    x = torch.randn(1, 2, 3, 3)
    a = ao.prepare_pt2e(export(AddThree(), (x,)), CopyingQuantizer())
    b = pt2q.prepare_pt2e(export(AddThree(), (x,)), CopyingQuantizer())
    for m in (a, b):
        assert (count(m, torch.ops.aten.add.Tensor), count(m, torch.ops.aten.mul.Tensor)) == (0, 1)
        assert m(x) is None
