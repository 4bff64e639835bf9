"""A model prepared by torchao's prepare_qat_pt2e (pt2q has no QAT yet, and its error says to use
torchao's) and then given to pt2q's convert_pt2e: torchao's convert folds each conv + BatchNorm
that QAT left in training mode back into the conv; pt2q's does not, so it must refuse such a
model, leave it unchanged, and still convert QAT models without that pattern as torchao does."""

import copy
import warnings

import pytest
import torch
from torch import nn

import pt2q
from tests.graph.zoo import MLP  # linear -> relu -> linear, 16 -> 32 -> 8


@pytest.fixture(scope="module")
def ao():
    xiq = pytest.importorskip("torchao.quantization.pt2e.quantizer.x86_inductor_quantizer")
    q = pytest.importorskip("torchao.quantization.pt2e.quantize_pt2e")
    return xiq, q


class ConvBn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.bn = nn.BatchNorm2d(8)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


def qat_prepared(ao, model, x):
    xiq, q = ao
    torch.manual_seed(0)
    quantizer = xiq.X86InductorQuantizer().set_global(xiq.get_default_x86_inductor_quantization_config(is_qat=True))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = q.prepare_qat_pt2e(torch.export.export(model, (x,)).module(), quantizer)
    for _ in range(3):
        p(x * torch.rand(1) * 2)
    return p


@pytest.mark.parametrize("to_eval", [False, True], ids=["training", "moved_to_eval"])
def test_conv_bn_trained_with_torchao_is_refused_and_left_unchanged(ao, to_eval):
    # torchao's documented flow moves the model to eval before convert; its convert folds the
    # BatchNorm either way
    x = torch.randn(2, 3, 12, 12, generator=torch.Generator().manual_seed(1))
    p = qat_prepared(ao, ConvBn(), x)
    if to_eval:
        pytest.importorskip("torchao.quantization.pt2e").move_exported_model_to_eval(p)
    code, state = p.code, {k: v.clone() for k, v in p.state_dict().items()}
    with pytest.raises(NotImplementedError, match=r"BatchNorm %\S+ after conv %conv2d\S* .*torchao's convert_pt2e"):
        pt2q.convert_pt2e(p)
    assert p.code == code
    after = p.state_dict()
    assert state.keys() == after.keys() and all(torch.equal(state[k], after[k]) for k in state)
    # torchao's own convert takes it (the way out the error names)
    ao[1].convert_pt2e(copy.deepcopy(p))


def test_qat_without_batch_norm_converts_as_torchao_does(ao):
    x = torch.randn(4, 16, generator=torch.Generator().manual_seed(2))
    p = qat_prepared(ao, MLP(), x)
    theirs = ao[1].convert_pt2e(copy.deepcopy(p))
    mine = pt2q.convert_pt2e(p)
    for probe in (x, x * 3, -x):
        assert torch.equal(mine(probe), theirs(probe))


def test_post_training_model_in_train_mode_is_not_mistaken_for_qat():
    # No fake-quantize modules: the check does not fire on a post-training flow.
    from pt2q.quantizer import XNNPACKQuantizer, get_symmetric_quantization_config

    m = ConvBn().train()
    x = torch.randn(2, 3, 12, 12)
    ep = torch.export.export(m, (x,)).module()
    p = pt2q.prepare_pt2e(ep, XNNPACKQuantizer().set_global(get_symmetric_quantization_config()))
    p(x)
    y = pt2q.convert_pt2e(p)(x)
    assert y.shape == (2, 8, 10, 10) and torch.isfinite(y).all()
