"""mul_q8 on CPU: bit for bit the codes of torch's chain dequantize_per_tensor(a) *
dequantize_per_tensor(b) -> quantize_per_tensor, on every pair of codes for add_q8's qparams
(products that overflow fp32 to an infinity among them), random qparams and lengths (tails of every
vector width), a squeeze-excitation gate broadcast over its input, the fused relu clamp; the
reference implementation the same; every ISA's kernels; errors naming the op and the argument;
opcheck."""

import functools

import pytest
import torch
from torch.library import opcheck

import pt2q  # noqa: F401
from tests.kernels import test_add_q8 as add
from tests.kernels.test_add_q8 import QPARAMS, every_pair
from tests.kernels.test_linear_weight_only import ISA_CASES, run_under_isa

P = torch.ops.pt2q
chain = functools.partial(add.chain, op="mul_q8")
check = functools.partial(add.check, op="mul_q8")


@pytest.mark.parametrize("q", QPARAMS + [(0.05, 0, 0.004, -128, 0.0002, -128)])  # + a hardsigmoid gate's
def test_every_code_pair_matches_the_chain(q):
    add.every_pair_checks(q, op="mul_q8")


def test_overflowing_products_saturate_as_the_chain():
    a, b = every_pair()
    got = check(a, 1e30, 0, b, 1e30, 0, 1e30, 0)  # |dq(a) dq(b)| up to 1.6e64: fp32 infinity
    assert got.max() == 127 and got.min() == -128


@pytest.mark.parametrize("seed", range(6))
def test_random_qparams_and_shapes(seed):
    add.random_checks(seed, op="mul_q8")


def test_squeeze_excitation_broadcast():
    g = torch.Generator().manual_seed(3)
    x = torch.randint(-128, 128, (2, 16, 7, 9), dtype=torch.int8, generator=g)
    gate = torch.randint(-128, 128, (2, 16, 1, 1), dtype=torch.int8, generator=g)
    assert check(x, 0.03, 2, gate, 1 / 255, -128, 0.03, 3).shape == (2, 16, 7, 9)
    check(gate, 1 / 255, -128, x.contiguous(memory_format=torch.channels_last), 0.03, 2, 0.03, 3)


def test_errors_name_the_op_and_argument():
    a = torch.zeros(4, dtype=torch.int8)
    with pytest.raises(ValueError, match=r"mul_q8: a of shape \[4\] and b of shape \[3\] do not broadcast"):
        P.mul_q8(a, 0.1, 0, a[:3], 0.1, 0, 0.1, 0)
    with pytest.raises(ValueError, match=r"mul_q8: a_scale must be positive and below 1e\+?36, got -0.1"):
        P.mul_q8(a, -0.1, 0, a, 0.1, 0, 0.1, 0)
    with pytest.raises(ValueError, match=r"mul_q8: output_zero_point must be in \[-128, 127\], got -129"):
        P.mul_q8(a, 0.1, 0, a, 0.1, 0, 0.1, -129)
    with pytest.raises(ValueError, match=r"a and b must be int8 codes, got Char and Byte"):
        P.mul_q8(a, 0.1, 0, a.to(torch.uint8), 0.1, 0, 0.1, 0)


def test_opcheck():
    g = torch.Generator().manual_seed(0)
    a = torch.randint(-128, 128, (3, 40), dtype=torch.int8, generator=g)
    b = torch.randint(-128, 128, (1, 40), dtype=torch.int8, generator=g)
    opcheck(P.mul_q8.default, (a, 0.02, -3, b, 0.05, 4, 0.06, -10, -10, 127))


def isa_check():
    add.isa_check(op="mul_q8")


@pytest.mark.parametrize("cap,kernels", ISA_CASES)
def test_every_isa_kernel(cap, kernels):
    run_under_isa("tests.kernels.test_mul_q8", cap, kernels)
