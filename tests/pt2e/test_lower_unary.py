"""lower-to-native on dq -> elementwise unary ops -> q (convert/lower_static_unary.cpp): the chain
becomes pt2q.lookup_q8 on the codes, with a table equal to the q/dq chain's own codes for each of the
256 inputs, and a model's lowered outputs equal its q/dq outputs. XNNPACKQuantizer leaves ReLU6,
Hardswish, SiLU, Sigmoid, GELU, ... between its convolutions with their own qparams; hand-built
graphs cover uint8 / int8 sides, several ops in one chain, and the chains that must stay."""

import pytest
import torch
from torch import nn
from torch.fx import Graph, GraphModule

import pt2q
import torch.ao.quantization.fx._decomposed  # noqa: F401  (registers quantized_decomposed)
from pt2q.quantizer import XNNPACKQuantizer, get_symmetric_quantization_config

P = torch.ops.pt2q
A = torch.ops.aten
QD = torch.ops.quantized_decomposed

ACTIVATIONS = {
    "relu6_inplace": lambda: nn.ReLU6(inplace=True),
    "hardtanh": lambda: nn.Hardtanh(-0.7, 1.3),
    "hardswish_inplace": lambda: nn.Hardswish(inplace=True),
    "hardsigmoid": lambda: nn.Hardsigmoid(),
    "silu_inplace": lambda: nn.SiLU(inplace=True),
    "sigmoid": lambda: nn.Sigmoid(),
    "tanh": lambda: nn.Tanh(),
    "gelu": lambda: nn.GELU(),
    "gelu_tanh": lambda: nn.GELU(approximate="tanh"),
    "leaky_relu": lambda: nn.LeakyReLU(0.1),
    "elu": lambda: nn.ELU(0.5),
}
FLOAT_UNARY = {A.hardtanh.default, A.hardtanh_.default, A.hardswish.default, A.hardswish_.default,
               A.hardsigmoid.default, A.silu.default, A.silu_.default, A.sigmoid.default, A.tanh.default,
               A.gelu.default, A.leaky_relu.default, A.elu.default}


class Net(nn.Module):
    """conv -> activation -> conv -> activation -> conv: XNNPACK quantizes every activation's input
    and output (the next conv's input) apart."""

    def __init__(self, act):
        super().__init__()
        self.c1, self.c2, self.c3 = nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(8, 8, 1), nn.Conv2d(8, 4, 3)
        self.a1, self.a2 = act(), act()

    def forward(self, x):
        return self.c3(self.a2(self.c2(self.a1(self.c1(x)))))


def targets(gm):
    return [n.target for n in gm.graph.nodes if n.op == "call_function"]


@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("act", sorted(ACTIVATIONS))
def test_activation_between_convs_becomes_a_lookup_with_the_same_outputs(act, per_channel):
    torch.manual_seed(0)
    model = Net(ACTIVATIONS[act]).eval()
    x = torch.randn(2, 3, 13, 11)  # odd sizes: ATen's vector loops end in a scalar tail
    quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=per_channel))
    p = pt2q.prepare_pt2e(torch.export.export(model, (x,)).module(), quantizer)
    g = torch.Generator().manual_seed(1)
    for _ in range(4):
        p(torch.randn(2, 3, 13, 11, generator=g) * 2)
    qdq, low = pt2q.convert_pt2e(p), pt2q.convert_pt2e(p, lower_to_native=True)
    assert targets(low).count(P.lookup_q8.default) == 2, targets(low)
    assert not FLOAT_UNARY & set(targets(low)), targets(low)
    assert targets(low).count(P.conv2d_q8.default) == 3
    for _ in range(4):
        x = torch.randn(2, 3, 13, 11, generator=g) * 3
        assert torch.equal(low(x), qdq(x)), act


def chain_graph(ops, dq, q, second_user=False):
    """placeholder codes -> dequantize_per_tensor(*dq) -> ops -> quantize_per_tensor(*q), a constant
    beside (the lowering puts its table on the constants' device)."""
    g = Graph()
    c = g.placeholder("c")
    g.get_attr("w")
    y = d = g.call_function(QD.dequantize_per_tensor.default, (c, *dq))
    for op, args in ops:
        y = g.call_function(op, (y, *args))
    out = g.call_function(QD.quantize_per_tensor.default, (y, *q))
    g.output((out, d) if second_user else (out,))
    root = nn.Module()
    root.register_buffer("w", torch.zeros(1))
    return GraphModule(root, g)


def lowered(gm):
    ir = pt2q.graph.from_fx(gm)
    ir.run_passes(["lower-to-native"])
    return pt2q.graph.to_fx(ir)


CHAINS = {
    "relu6_inplace": [(A.hardtanh_.default, (0.0, 6.0))],
    "mul_add_sigmoid": [(A.mul.Scalar, (1.7,)), (A.add.Scalar, (-0.25,)), (A.sigmoid.default, ())],
    "clamp_neg_abs": [(A.clamp.default, (-2.0, 3.0)), (A.neg.default, ()), (A.abs.default, ())],
    "silu_div": [(A.silu_.default, ()), (A.div.Scalar, (3.0,))],
    "gelu_tanh": [(A.gelu.default, ()), (A.clamp_min.default, (-0.1,)), (A.tanh.default, ())],
}
SIDES = {  # (dequantize qparams, quantize qparams)
    "int8_int8": ((0.043, -7, -128, 127, torch.int8), (0.021, 3, -128, 127, torch.int8)),
    "uint8_uint8": ((0.05, 131, 0, 255, torch.uint8), (0.012, 0, 0, 255, torch.uint8)),
    "int8_uint8": ((0.031, 0, -127, 127, torch.int8), (0.009, 118, 0, 255, torch.uint8)),
    "uint8_int8_narrow": ((0.02, 128, 0, 255, torch.uint8), (0.03, -2, -100, 90, torch.int8)),
}


@pytest.mark.parametrize("side", sorted(SIDES))
@pytest.mark.parametrize("chain", sorted(CHAINS))
def test_table_is_the_chains_code_for_every_input_code(chain, side):
    dq, q = SIDES[side]
    gm = chain_graph(CHAINS[chain], dq, q)
    low = lowered(gm)
    assert targets(low) == [P.lookup_q8.default], targets(low)
    lo, hi = (-128, 128) if dq[-1] == torch.int8 else (0, 256)
    every = torch.arange(lo, hi, dtype=torch.int16).to(dq[-1])
    assert torch.equal(low(every)[0], gm(every)[0])  # the table, entry by entry
    codes = torch.randint(lo, hi, (3, 37, 29), dtype=torch.int16, generator=torch.Generator().manual_seed(2))
    assert torch.equal(low(codes.to(dq[-1]))[0], gm(codes.to(dq[-1]))[0])


def test_nan_from_the_chain_gives_qmin_as_pt2qs_quantize():
    # 0 * inf: the chain maps code -7 (value 0) to NaN, which pt2q's quantize writes as qmin
    gm = chain_graph([(A.mul.Scalar, (float("inf"),))], (0.5, -7, -128, 127, torch.int8),
                     (0.25, 1, -120, 120, torch.int8))
    low = lowered(gm)
    out = low(torch.arange(-128, 128, dtype=torch.int16).to(torch.int8))[0]
    assert out[-7 + 128] == -120 and out[0] == -120 and out[-1] == 120


def test_chains_that_stay():
    dq, q = SIDES["int8_int8"]
    # an in-place op whose input another node reads: removing it would change what that node reads
    kept = targets(lowered(chain_graph([(A.hardtanh_.default, (0.0, 6.0))], dq, q, second_user=True)))
    assert P.lookup_q8.default not in kept and A.hardtanh_.default in kept
    # out of place, the dequantize stays for its other user and the chain still lowers
    both = targets(lowered(chain_graph([(A.hardtanh.default, (0.0, 6.0))], dq, q, second_user=True)))
    assert P.lookup_q8.default in both and QD.dequantize_per_tensor.default in both
    # not elementwise with literal arguments: a tensor bound, a reduction
    g = Graph()
    c, lo_t = g.placeholder("c"), g.placeholder("lo")
    g.get_attr("w")
    d = g.call_function(QD.dequantize_per_tensor.default, (c, *dq))
    y = g.call_function(A.clamp.Tensor, (d, lo_t))
    g.output((g.call_function(QD.quantize_per_tensor.default, (y, *q)),))
    root = nn.Module()
    root.register_buffer("w", torch.zeros(1))
    assert P.lookup_q8.default not in targets(lowered(GraphModule(root, g)))
    softmax = targets(lowered(chain_graph([(A._softmax.default, (-1, False))], dq, q)))
    assert P.lookup_q8.default not in softmax
