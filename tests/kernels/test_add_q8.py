"""add_q8 on CPU: bit for bit the codes of torch's chain dequantize_per_tensor(a) +
dequantize_per_tensor(b) -> quantize_per_tensor, on every pair of codes, random and extreme
qparams, tails of every vector width, broadcasting, the fused relu clamp and saturation; the
reference implementation the same; every ISA's kernels; errors naming the argument; opcheck."""

import pytest
import torch
from torch.library import opcheck

import pt2q  # noqa: F401
import torch.ao.quantization.fx._decomposed  # noqa: F401  (registers quantized_decomposed)
from pt2q import _C
from tests.kernels.test_linear_weight_only import ISA_CASES, run_under_isa

P = torch.ops.pt2q
QD = torch.ops.quantized_decomposed
REF = _C.reference


COMBINE = {"add_q8": torch.add, "mul_q8": torch.mul}  # the op each of the two computes on the dequantized pair


def chain(a, sa, za, b, sb, zb, so, zo, qmin=-128, qmax=127, relu=False, op="add_q8"):
    y = COMBINE[op](QD.dequantize_per_tensor(a, sa, za, -128, 127, torch.int8),
                    QD.dequantize_per_tensor(b, sb, zb, -128, 127, torch.int8))
    if relu:
        y = torch.relu(y)
    return QD.quantize_per_tensor(y, so, zo, qmin, qmax, torch.int8)


def check(a, sa, za, b, sb, zb, so, zo, qmin=-128, qmax=127, relu=False, op="add_q8"):
    """The op (relu as the clamp's lower end) against the chain and the reference."""
    lo = max(qmin, zo) if relu else qmin
    got = getattr(P, op)(a, sa, za, b, sb, zb, so, zo, lo, qmax)
    want = chain(a, sa, za, b, sb, zb, so, zo, qmin, qmax, relu, op)
    assert got.dtype == torch.int8 and got.shape == want.shape
    assert torch.equal(got, want), (op, sa, za, sb, zb, so, zo, (got.int() - want.int()).abs().max())
    assert torch.equal(getattr(REF, op)(a, sa, za, b, sb, zb, so, zo, lo, qmax), want)
    return got


def every_pair():
    """All 65536 (a, b) code pairs."""
    codes = torch.arange(-128, 128, dtype=torch.int8)
    return codes.repeat_interleave(256), codes.repeat(256)


# (sa, za, sb, zb, so, zo): equal scales; ratios that land sums on .5 ties; tiny and huge scales
# (saturation both ways); zero points at both ends
QPARAMS = [(0.02, 0, 0.02, 0, 0.04, 0), (0.0125, -3, 0.05, 7, 0.025, -10), (0.1, 127, 0.3, -128, 0.2, 5),
           (1.0, 0, 1.0, 0, 2.0, 0), (0.5, 1, 0.25, -1, 1.0, 127), (3e-5, -20, 7e-4, 40, 1e-6, -128),
           (123.4, 9, 0.001, 0, 1.7, 3), (1e30, 0, 1e30, 0, 1e30, 0)]


def every_pair_checks(q, op="add_q8"):
    a, b = every_pair()
    check(a, q[0], q[1], b, q[2], q[3], q[4], q[5], op=op)
    check(a, q[0], q[1], b, q[2], q[3], q[4], q[5], relu=True, op=op)
    check(a, q[0], q[1], b, q[2], q[3], q[4], q[5], qmin=-100, qmax=90, op=op)


@pytest.mark.parametrize("q", QPARAMS)
def test_every_code_pair_matches_the_chain(q):
    every_pair_checks(q)


def random_checks(seed, op="add_q8"):
    """Random lengths (a tail in every vector width) and qparams."""
    g = torch.Generator().manual_seed(seed)
    for n in (0, 1, 7, 8, 15, 16, 17, 31, 33, 100, 4097):
        a = torch.randint(-128, 128, (n,), dtype=torch.int8, generator=g)
        b = torch.randint(-128, 128, (n,), dtype=torch.int8, generator=g)
        sa, sb, so = (float(torch.rand((), generator=g)) * 10 ** float(torch.randint(-4, 2, (), generator=g))
                      + 1e-6 for _ in range(3))
        za, zb, zo = (int(torch.randint(-128, 128, (), generator=g)) for _ in range(3))
        check(a, sa, za, b, sb, zb, so, zo, relu=bool(seed % 2), op=op)


@pytest.mark.parametrize("seed", range(6))
def test_random_qparams_and_shapes(seed):
    random_checks(seed)


def test_broadcasting_and_layouts():
    g = torch.Generator().manual_seed(3)
    x = torch.randint(-128, 128, (2, 8, 5, 5), dtype=torch.int8, generator=g)
    for other in (torch.randint(-128, 128, (1, 8, 1, 1), dtype=torch.int8, generator=g),
                  torch.randint(-128, 128, (5,), dtype=torch.int8, generator=g),
                  torch.randint(-128, 128, (), dtype=torch.int8, generator=g),
                  x.contiguous(memory_format=torch.channels_last),
                  torch.randint(-128, 128, (2, 8, 5, 10), dtype=torch.int8, generator=g)[..., ::2]):
        got = check(x, 0.03, 2, other, 0.07, -5, 0.05, 1)
        assert got.shape == (2, 8, 5, 5)
        check(other, 0.07, -5, x, 0.03, 2, 0.05, 1)
    check(x[:, 1:], 0.03, 2, x[:, :-1], 0.03, 2, 0.06, 0)  # views at an offset


def test_errors_name_the_argument():
    a = torch.zeros(4, dtype=torch.int8)
    with pytest.raises(ValueError, match=r"add_q8: a and b must be int8 codes, got Char and Float"):
        P.add_q8(a, 0.1, 0, a.float(), 0.1, 0, 0.1, 0)
    with pytest.raises(ValueError, match=r"add_q8: a of shape \[4\] and b of shape \[3\] do not broadcast"):
        P.add_q8(a, 0.1, 0, a[:3], 0.1, 0, 0.1, 0)
    with pytest.raises(ValueError, match=r"add_q8: b_scale must be positive and below 1e\+?36, got 0"):
        P.add_q8(a, 0.1, 0, a, 0.0, 0, 0.1, 0)
    with pytest.raises(ValueError, match=r"add_q8: output_scale must be positive, finite and at least 1e-38"):
        P.add_q8(a, 0.1, 0, a, 0.1, 0, 1e-45, 0)
    with pytest.raises(ValueError, match=r"add_q8: a_zero_point must be in \[-128, 127\], got 128"):
        P.add_q8(a, 0.1, 128, a, 0.1, 0, 0.1, 0)
    with pytest.raises(ValueError, match=r"add_q8: need -128 <= output_quant_min <= output_quant_max <= 127"):
        P.add_q8(a, 0.1, 0, a, 0.1, 0, 0.1, 0, 5, 4)


def test_opcheck():
    g = torch.Generator().manual_seed(0)
    a = torch.randint(-128, 128, (3, 40), dtype=torch.int8, generator=g)
    b = torch.randint(-128, 128, (1, 40), dtype=torch.int8, generator=g)
    opcheck(P.add_q8.default, (a, 0.02, -3, b, 0.05, 4, 0.06, -10, -10, 127))


def isa_check(op="add_q8"):
    a, b = every_pair()
    for q in QPARAMS:
        check(a, q[0], q[1], b, q[2], q[3], q[4], q[5], relu=True, op=op)
        check(a[:1001], q[0], q[1], b[:1001], q[2], q[3], q[4], q[5], op=op)  # a tail in every width


@pytest.mark.parametrize("cap,kernels", ISA_CASES)
def test_every_isa_kernel(cap, kernels):
    run_under_isa("tests.kernels.test_add_q8", cap, kernels)
