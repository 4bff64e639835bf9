"""prepare_pt2e's BatchNorm folding (observers/fold_batch_norm.cpp) on weights and outputs that
something else also reads. Folding rewrites the conv's weight and bias and its value, so it is
only right when nothing else reads them: a weight shared by convs that all feed the same
BatchNorm folds once (the bias too), anything else keeps its BatchNorm with a warning naming the
nodes. The reference is the float model; where torchao folds correctly the folded constants are
also compared with torchao's bit for bit (on the others torchao's prepared model is wrong by
3.5-5.9 here: it folds anyway, and a second conv on a bias-free shared weight overwrites the
folded bias with zeros)."""

import copy
import warnings

import pytest
import torch
from torch import nn

import pt2q
from pt2q.quantizer import XNNPACKQuantizer, get_symmetric_quantization_config
from tests.pt2e import compare


def batch_norm(c):
    """A BatchNorm with a nonzero mean and shift, so a lost bias shows."""
    b = nn.BatchNorm2d(c)
    b.running_mean.normal_()
    b.running_var.uniform_(0.5, 2.0)
    b.weight.data.uniform_(0.5, 2.0)
    b.bias.data.normal_()
    return b


class Chunked(nn.Module):
    """torchao's test_chunked_bn_fusion: one conv and one BatchNorm on each chunk."""

    def __init__(self, bias):
        super().__init__()
        self.conv = nn.Conv2d(1, 8, 3, padding=1, bias=bias)
        self.bn = batch_norm(8)

    def forward(self, x):
        return torch.cat([torch.relu(self.bn(self.conv(c))) for c in x.chunk(3, 1)], 1)


class TwoBatchNorms(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 8, 3, padding=1)
        self.b1, self.b2 = batch_norm(8), batch_norm(8)

    def forward(self, x):
        a, b = x.chunk(2, 1)
        return self.b1(self.conv(a)) + self.b2(self.conv(b))


class OneUseWithout(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 8, 3, padding=1)
        self.bn = batch_norm(8)

    def forward(self, x):
        a, b = x.chunk(2, 1)
        return self.bn(self.conv(a)) + self.conv(b)


class OutputUsedTwice(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 8, 3, padding=1)
        self.bn = batch_norm(8)

    def forward(self, x):
        y = self.conv(x)
        return self.bn(y) + y


class TwoInARow(nn.Module):
    """conv -> BatchNorm -> BatchNorm: the first folds; the second, whose input is the folded conv
    only after that fold, stays (torchao folds it into the conv as a repeat of the first, which
    drops it: off by 3.75 here)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 8, 3, padding=1)
        self.b1, self.b2 = batch_norm(8), batch_norm(8)

    def forward(self, x):
        return self.b2(self.b1(self.conv(x)))


class Plain(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 8, 3, padding=1)
        self.bn = batch_norm(8)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


# model, input channels, BatchNorms left, words of the warning (None: folded, no warning)
CASES = {
    "chunked_no_bias": (lambda: Chunked(False), 3, 0, None),
    "chunked_bias": (lambda: Chunked(True), 3, 0, None),
    "plain": (Plain, 1, 0, None),
    "two_in_a_row": (TwoInARow, 1, 1, None),
    "two_batch_norms": (TwoBatchNorms, 2, 2, "%conv2d and %conv2d_1 share a weight but feed different BatchNorms"),
    "one_use_without": (OneUseWithout, 2, 1, '"conv.weight" is also used by %conv2d_1'),
    "output_used_twice": (OutputUsedTwice, 1, 1, "the output of %conv2d is also used by %add"),
}


def xnnpack():
    return XNNPACKQuantizer().set_global(get_symmetric_quantization_config())


def prepare(model, x):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        p = pt2q.prepare_pt2e(torch.export.export(copy.deepcopy(model), (x,)).module(), xnnpack())
    return p, [str(w.message) for w in caught if "fold-batch-norm" in str(w.message)]


def batch_norms(gm):
    return sum(1 for n in gm.graph.nodes if n.op == "call_function" and "batch_norm" in str(n.target))


@pytest.mark.parametrize("case", sorted(CASES))
def test_prepared_model_computes_the_float_model(case):
    make, channels, left, words = CASES[case]
    torch.manual_seed(0)
    model, x = make().eval(), torch.randn(2, channels, 8, 8)
    p, warned = prepare(model, x)
    torch.testing.assert_close(p(x), model(x), rtol=1e-5, atol=1e-5)
    assert batch_norms(p) == left
    if words is None:
        assert warned == []
    else:
        assert len(warned) == 1 and words in warned[0], warned


@pytest.mark.parametrize("case", ["chunked_bias", "plain"])
def test_folded_constants_are_torchaos_where_torchao_folds_right(case):
    ao = pytest.importorskip("torchao.quantization.pt2e.quantize_pt2e")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from tests.pt2e.adapter import AoAdapter
    make, channels, _, _ = CASES[case]
    torch.manual_seed(0)
    model, x = make().eval(), torch.randn(2, channels, 8, 8)
    b, _ = prepare(model, x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = ao.prepare_pt2e(torch.export.export(copy.deepcopy(model), (x,)).module(), AoAdapter(xnnpack()))
    compare.assert_same_prepared(a, b)
    compare.assert_same_constants(a, b)


def test_linear_on_3d_input_keeps_its_batch_norm_with_torchaos_warning():
    """Linear acts on the last dim and BatchNorm1d on dim 1 (pytorch/ao#4116): torchao's
    warning, as a Python warning (C++ warnings surface through the bindings)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 5), nn.BatchNorm1d(5)).eval()
    model[1].running_mean.normal_()
    x = torch.randn(2, 5, 3)
    with pytest.warns(UserWarning, match="Not fusing linear\\+bn for node 'linear': the linear input is 3-D"):
        p = pt2q.prepare_pt2e(torch.export.export(model, (x,)).module(), xnnpack())
    assert batch_norms(p) == 1
    torch.testing.assert_close(p(x), model(x), rtol=1e-6, atol=1e-6)


def test_a_warning_filter_that_raises_makes_prepare_raise():
    model = OutputUsedTwice().eval()
    x = torch.randn(2, 1, 8, 8)
    m = torch.export.export(model, (x,)).module()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(UserWarning, match="the output of %conv2d is also used by %add"):
            pt2q.prepare_pt2e(m, xnnpack())
