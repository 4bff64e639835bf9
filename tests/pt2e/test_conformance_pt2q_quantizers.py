"""pt2q's own quantizers (annotating in C++) against torchao's, end to end: pt2q's
XNNPACKQuantizer + pt2q's flow gives the graphs, qparams, folded weights and outputs that
torchao's XNNPACKQuantizer + torchao's flow give (static per-tensor, per-channel, dynamic),
and likewise EmbeddingQuantizer."""

import warnings

import pytest
import torch

from pt2q.quantizer import EmbeddingQuantizer, XNNPACKQuantizer, get_symmetric_quantization_config
from tests.pt2e import compare
from tests.pt2e.models import MODELS, calibration_batches, export_twice

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    ao = pytest.importorskip("torchao.quantization.pt2e.quantize_pt2e")
    from torchao.quantization.pt2e.quantizer.embedding_quantizer import EmbeddingQuantizer as AoEmbeddingQuantizer
    from torchao.testing.pt2e import _xnnpack_quantizer as xnn

CONFIGS = {"per_tensor": dict(), "per_channel": dict(is_per_channel=True),
           "dynamic": dict(is_per_channel=True, is_dynamic=True)}


def run_both(ea, eb, args, qa, qb, batches=None):
    return compare.run_flows(ao, ea, eb, args, qa, qb, batches or calibration_batches(args))


# On a plain export torchao's XNNPACKQuantizer finds no torch.cat partition (it needs
# source_fn_stack), where pt2q annotates the cat: inplace_cnn's cat is compared with source
# partitions recreated, below.
PLAIN_EXPORT_MODELS = sorted(m for m in MODELS if m != "inplace_cnn")


@pytest.mark.parametrize("config", sorted(CONFIGS))
@pytest.mark.parametrize("model", PLAIN_EXPORT_MODELS)
def test_xnnpack_quantizer_same_as_torchao(model, config):
    ea, eb, args = export_twice(model)
    qa = xnn.XNNPACKQuantizer().set_global(xnn.get_symmetric_quantization_config(**CONFIGS[config]))
    qb = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(**CONFIGS[config]))
    ca, cb = run_both(ea, eb, args, qa, qb)
    for batch in calibration_batches(args, n=2, seed=7):
        compare.assert_outputs_equal(ca, cb, batch)


class Embed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(20, 8)
        self.lin = torch.nn.Linear(8, 4)

    def forward(self, idx):
        return self.lin(self.emb(idx))


def test_embedding_quantizer_same_as_torchao():
    torch.manual_seed(0)
    m = Embed().eval()
    idx = torch.randint(0, 20, (3, 5))
    ea = torch.export.export(m, (idx,)).module()
    eb = torch.export.export(m, (idx,)).module()
    ca, cb = run_both(ea, eb, (idx,), AoEmbeddingQuantizer(), EmbeddingQuantizer(), batches=[(idx,)])
    compare.assert_outputs_equal(ca, cb, (torch.randint(0, 20, (3, 5)),))
    targets = [n.target for n in cb.graph.nodes if n.op == "call_function"]
    assert torch.ops.quantized_decomposed.dequantize_per_channel.default in targets
    assert torch.ops.quantized_decomposed.quantize_per_channel.default not in targets  # folded


# torchao's quantizers find cat, pooling, GRU and every X86 pattern through source_fn_stack,
# which torch.export no longer records; with it recreated, they annotate as designed, and
# pt2q's operator-based annotators must give the same result.
from pt2q.quantizer import X86InductorQuantizer, get_default_x86_inductor_quantization_config  # noqa: E402
from tests.pt2e.source_fn import add_source_fn_stack  # noqa: E402

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from torchao.quantization.pt2e.quantizer import x86_inductor_quantizer as x86  # noqa: E402


@pytest.mark.parametrize("model", sorted(MODELS))
def test_x86_quantizer_same_as_torchao_with_source_partitions(model):
    ea, eb, args = export_twice(model)
    add_source_fn_stack(ea)
    qa = x86.X86InductorQuantizer().set_global(x86.get_default_x86_inductor_quantization_config())
    qb = X86InductorQuantizer().set_global(get_default_x86_inductor_quantization_config())
    ca, cb = run_both(ea, eb, args, qa, qb)
    for batch in calibration_batches(args, n=2, seed=7):
        compare.assert_outputs_equal(ca, cb, batch)


@pytest.mark.parametrize("config", sorted(CONFIGS))
@pytest.mark.parametrize("model", sorted(MODELS))
def test_xnnpack_quantizer_same_as_torchao_with_source_partitions(model, config):
    ea, eb, args = export_twice(model)
    add_source_fn_stack(ea)
    qa = xnn.XNNPACKQuantizer().set_global(xnn.get_symmetric_quantization_config(**CONFIGS[config]))
    qb = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(**CONFIGS[config]))
    run_both(ea, eb, args, qa, qb)

