"""pt2q.linear_mx on CPU against its reference (mx_dequantize, mx_fake_quantize, then F.linear in
fp32): every weight format, ragged K, block sizes that are and are not multiples of 32, every
row-count path (the AVX-512 row kernel in groups of 4 rows, the portable loop, the dequantized
GEMM tiles), input formats, bias, bf16/fp16 inputs, NaN blocks; within the bound of fp32
summation in any order; opcheck, export, compile; the portable loop alone (PT2Q_CPU_ISA=generic;
the AVX2 kernels run this whole file in tests/mx/test_mx_isa_tables.py); errors name the argument."""

import os
import subprocess
import sys

import pytest
import torch
from torch.library import opcheck

import pt2q  # noqa: F401
from pt2q import _C

P = torch.ops.pt2q
REF = _C.reference
EPS32 = 2.0 ** -24
ULP = {torch.float32: 0.0, torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11}
FORMATS = ["int8", "fp8_e4m3", "fp8_e5m2", "fp6_e3m2", "fp6_e2m3", "fp4_e2m1", "int4", "int2", "int12"]


def make(n, k, m_shape, fmt, block, seed=0, dtype=torch.float32, bias=True):
    g = torch.Generator().manual_seed(seed)
    # rows of very different magnitudes, so that the blocks' scales differ
    w = torch.randn(n, k, generator=g) * torch.exp2(torch.randint(-8, 8, (n, 1), generator=g).float())
    codes, scales = P.mx_quantize(w, fmt, block)
    x = (torch.randn(*m_shape, k, generator=g) * 3).to(dtype)
    b = torch.randn(n, generator=g) if bias else None
    return x, codes, scales, b


def check(x, codes, scales, fmt, block, b, x_fmt=None, x_block=32):
    got = P.linear_mx(x, codes, scales, fmt, block, b, x_fmt, x_block)
    want = REF.linear_mx(x, codes, scales, fmt, block, b, x_fmt, x_block)
    assert got.dtype == x.dtype and got.shape == want.shape
    # both sum the same K exact-or-rounded products in fp32 in different orders
    k = x.shape[-1]
    w = REF.mx_dequantize(codes, scales, fmt, block, -1, k)
    xq = x if x_fmt is None else REF.mx_fake_quantize(x, x_fmt, x_block)
    terms = xq.float().abs().reshape(-1, k) @ w.abs().t()
    if b is not None:
        terms = terms + b.abs()
    lim = 2 * (k + 2) * EPS32 * terms + ULP[x.dtype] * 2 * want.float().abs().reshape(terms.shape) + 1e-30
    err = (got.float() - want.float()).abs().reshape(terms.shape)
    ok = (err <= lim) | (got.isnan() & want.isnan()).reshape(terms.shape)
    assert bool(ok.all()), (err - lim).max()
    return got


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("n,k,block", [(37, 256, 32), (9, 100, 32), (16, 128, 16), (5, 64, 0), (8, 512, 64),
                                       (13, 96, 96)])
def test_matches_reference(fmt, n, k, block):
    for m in (1, 2, 3, 4, 5, 9, 16, 17, 33):
        x, c, s, b = make(n, k, (m,), fmt, block, seed=m + n)
        for x_fmt in (None, "int8", "fp4_e2m1"):
            check(x, c, s, fmt, block, b, x_fmt)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("m_shape", [(1,), (2, 3), (20,)])
def test_half_inputs(dtype, m_shape):
    x, c, s, b = make(24, 128, m_shape, "fp4_e2m1", 32, dtype=dtype)
    check(x, c, s, "fp4_e2m1", 32, b)
    check(x, c, s, "fp4_e2m1", 32, b, "fp8_e4m3")


@pytest.mark.parametrize("fmt", ["int8", "fp4_e2m1", "fp6_e2m3", "fp8_e5m2", "int12"])
def test_bf16_many_rows_over_several_tiles(fmt):
    """bf16 x of 17+ rows: the bf16 GEMM on decoded tiles (formats of at most 8 bits; int12 takes
    the fp32 GEMM), bf16 bias inside its rounding; 600 rows of weight = 3 tiles."""
    x, c, s, b = make(600, 96, (2, 20), fmt, 32, dtype=torch.bfloat16)
    check(x, c, s, fmt, 32, b.to(torch.bfloat16))
    check(x, c, s, fmt, 32, None, "int8")


def test_nan_block_and_zero_input():
    w = torch.randn(8, 64)
    w[3, 40] = float("nan")
    c, s = P.mx_quantize(w, "fp4_e2m1")
    y = P.linear_mx(torch.ones(2, 64), c, s, "fp4_e2m1")
    assert y[:, 3].isnan().all() and not y[:, [0, 1, 2, 4, 5, 6, 7]].isnan().any()
    assert torch.equal(P.linear_mx(torch.zeros(3, 64), c[:3], s[:3], "fp4_e2m1"), torch.zeros(3, 3))
    assert P.linear_mx(torch.zeros(0, 64), c, s, "fp4_e2m1").shape == (0, 8)


def test_exact_on_small_integers():
    """Weights and x on small grids: every product and partial sum is exact in fp32, so the op
    equals the reference bit for bit whatever the order."""
    g = torch.Generator().manual_seed(3)
    grid = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])
    w = grid[torch.randint(0, 8, (20, 256), generator=g)] * (torch.randint(0, 2, (20, 256), generator=g) * 2 - 1)
    w[:, ::32] = 6.0  # every block's max is 6: scale 1
    c, s = P.mx_quantize(w, "fp4_e2m1")
    assert torch.equal(P.mx_dequantize(c, s, "fp4_e2m1"), w)
    x = torch.randint(-100, 100, (3, 256), generator=g).float()
    assert torch.equal(P.linear_mx(x, c, s, "fp4_e2m1"), x @ w.t())


# ---- MXINT8 weights x MXINT8 x: the integer (VNNI) kernel, from 5 rows --------------------------

@pytest.mark.parametrize("m", [5, 16, 17, 40, 129])
@pytest.mark.parametrize("n,k", [(13, 256), (37, 1024), (6, 96), (25, 4)])
def test_int8_single_block_is_exact(m, n, k):
    """One block over K (block 0): the int32 dot product is exact and both scales are powers of
    two, so each output is the exact real dot product of the quantized x and weight, bit for bit
    (|sum| < 2^24 code units for K <= 1024), whichever path runs."""
    g = torch.Generator().manual_seed(m * 1000 + n + k)
    w = torch.randn(n, k, generator=g) * torch.exp2(torch.randint(-20, 20, (n, 1), generator=g).float())
    x = torch.randn(m, k, generator=g) * torch.exp2(torch.randint(-20, 20, (m, 1), generator=g).float())
    c, s = P.mx_quantize(w, "int8", 0)
    got = P.linear_mx(x, c, s, "int8", 0, None, "int8", 0)
    exact = REF.mx_fake_quantize(x, "int8", 0).double() @ REF.mx_dequantize(c, s, "int8", 0, -1, k).double().t()
    assert torch.equal(got, exact.float())


@pytest.mark.parametrize("block", [32, 64, 128, 4, 8, 96])
@pytest.mark.parametrize("n,k", [(13, 256), (7, 100), (30, 1028), (12, 4)])
def test_int8_blocks_and_ragged_k(block, n, k):
    """Blocks of every size that is a multiple of 4, a ragged last block (K = 100, 1028), column
    counts around the kernel's 6 / 12-column tiles, rows around its 16-row groups."""
    for m in (5, 15, 16, 31, 33, 64):
        x, c, s, b = make(n, k, (m,), "int8", block, seed=m + n + block)
        check(x, c, s, "int8", block, b, "int8", block)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_int8_half_inputs_and_leading_dims(dtype):
    x, c, s, b = make(40, 192, (3, 7), "int8", 32, dtype=dtype)
    check(x, c, s, "int8", 32, b, "int8")
    check(x, c, s, "int8", 32, b.to(dtype), "int8")


def test_int8_other_layouts_take_the_general_path():
    """K not a multiple of 4, an input block unlike the weight's, a block not a multiple of 4, a
    rounding or scale mode other than the default: still the reference's numbers."""
    x, c, s, b = make(9, 102, (20,), "int8", 32, seed=1)
    check(x, c, s, "int8", 32, b, "int8")
    x, c, s, b = make(9, 128, (20,), "int8", 32, seed=2)
    check(x, c, s, "int8", 32, b, "int8", 64)
    x, c, s, b = make(9, 120, (20,), "int8", 6, seed=3)
    check(x, c, s, "int8", 6, b, "int8", 6)
    for rounding, mode in (("even", "ceil"), ("floor", "rceil"), ("nearest", "even")):
        got = P.linear_mx(x, c, s, "int8", 6, b, "int8", 6, rounding, mode)
        want = REF.linear_mx(x, c, s, "int8", 6, b, "int8", 6, rounding, mode)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    x, c, s, b = make(9, 128, (20,), "int8", 32, seed=4)
    for rounding, mode in (("even", "ceil"), ("floor", "rceil"), ("nearest", "even")):
        got = P.linear_mx(x, c, s, "int8", 32, b, "int8", 32, rounding, mode)
        want = REF.linear_mx(x, c, s, "int8", 32, b, "int8", 32, rounding, mode)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_int8_adversarial_blocks():
    """NaN / Inf in x blocks and weight blocks (the block's output turns NaN, as the reference's),
    zero rows, scales at both ends of E8M0 (2^-127 .. 2^127 blocks), codes at +-127 everywhere."""
    g = torch.Generator().manual_seed(11)
    n, k, m = 19, 160, 21
    w = torch.randn(n, k, generator=g)
    w[:, 32:64] *= 2.0 ** 100
    w[:, 64:96] *= 2.0 ** -100
    w[2, 5] = float("nan")
    w[7, 100] = float("inf")
    w[9] = 0.0
    x = torch.randn(m, k, generator=g)
    x[:, 32:64] *= 2.0 ** -110  # meets the 2^100 weights: products near 2^-10
    x[:, 64:96] *= 2.0 ** 20
    x[3, 70] = float("nan")
    x[4] = 0.0
    x[5, :32] = 2.0 ** 110  # meets weights near 1: a 2^110 block sum, no overflow
    x[5, 32:] = 0.0
    c, s = P.mx_quantize(w, "int8")
    got = P.linear_mx(x, c, s, "int8", 32, None, "int8")
    want = REF.linear_mx(x, c, s, "int8", 32, None, "int8")
    assert torch.equal(got.isnan(), want.isnan())
    assert got[:, 2].isnan().all() and got[3].isnan().all() and not got[6:, [0, 1, 3, 4]].isnan().any()
    fin = ~want.isnan()
    torch.testing.assert_close(got[fin], want[fin], rtol=1e-5, atol=0)
    # every code at +-127 over a 65536-element block: sum (x + 128) w is 2^31 - 25M, no overflow
    kk = 65536
    wmax = torch.ones(3, kk)
    wmax[1] = -1.0
    cm, sm = P.mx_quantize(wmax, "int8", 0)
    xmax = torch.ones(5, kk)
    xmax[2] = -1.0
    got = P.linear_mx(xmax, cm, sm, "int8", 0, None, "int8", 0)
    want = REF.linear_mx(xmax, cm, sm, "int8", 0, None, "int8", 0)
    torch.testing.assert_close(got, want, rtol=1e-6, atol=0)
    assert got[0, 0] == kk and got[2, 0] == -kk and got[2, 1] == kk


def test_int8_same_result_on_any_thread_count():
    x, c, s, b = make(100, 256, (37,), "int8", 32, seed=5)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = P.linear_mx(x, c, s, "int8", 32, b, "int8")
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(one, P.linear_mx(x, c, s, "int8", 32, b, "int8"))


SCRIPT = r"""
import importlib, sys, torch, pt2q
t = importlib.import_module("tests.kernels.test_linear_mx")
for fmt in ("int8", "fp6_e2m3", "fp4_e2m1", "fp8_e4m3"):
    for m in (1, 5, 20):
        x, c, s, b = t.make(13, 200, (m,), fmt, 32, seed=m)
        t.check(x, c, s, fmt, 32, b, "int8")
print("ok")
"""


@pytest.mark.parametrize("isa", ["generic", "avx512"])
def test_without_the_vector_kernels(isa):
    """PT2Q_CPU_ISA=generic: no vector row kernel, every code goes through the portable loop;
    avx512: no VNNI, so MXINT8 x MXINT8 takes the decode-and-FMA paths."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, cwd=root,
                       env=dict(os.environ, PT2Q_CPU_ISA=isa), timeout=120)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-2000:]


def test_opcheck():
    x, c, s, b = make(12, 64, (3,), "fp4_e2m1", 32)
    opcheck(P.linear_mx.default, (x, c, s, "fp4_e2m1", 32, b, "int8"))
    x, c, s, b = make(12, 64, (2,), "fp8_e4m3", 32)
    # FP8 codes as uint8 (also accepted): opcheck's schema check cannot compare float8 tensors
    opcheck(P.linear_mx.default, (x.to(torch.bfloat16), c.view(torch.uint8), s, "fp8_e4m3"))


class MxLinear(torch.nn.Module):
    def __init__(self, c, s, b, fmt):
        super().__init__()
        self.register_buffer("codes", c)
        self.register_buffer("scales", s)
        self.register_buffer("bias", b)
        self.fmt = fmt

    def forward(self, x):
        return P.linear_mx(x, self.codes, self.scales, self.fmt, 32, self.bias, "int8")


def test_export_and_compile():
    x, c, s, b = make(24, 64, (5,), "fp6_e3m2", 32)
    m = MxLinear(c, s, b, "fp6_e3m2")
    want = m(x)
    ep = torch.export.export(m, (x,))
    assert "pt2q.linear_mx.default" in {str(n.target) for n in ep.graph.nodes}
    assert torch.equal(ep.module()(x), want)
    assert torch.equal(torch.compile(m)(x), want)


def test_errors_name_the_argument():
    x, c, s, b = make(12, 64, (2,), "fp4_e2m1", 32)
    with pytest.raises(ValueError, match=r"linear_mx: unknown weight_format \"fp5\""):
        P.linear_mx(x, c, s, "fp5")
    with pytest.raises(TypeError, match=r"linear_mx: weight_codes of int8 must be Char"):
        P.linear_mx(x, c, s, "int8")
    with pytest.raises(ValueError, match=r"linear_mx: weight_codes must be \[N, 16\] for 32 input features"):
        P.linear_mx(x[:, :32], c, s, "fp4_e2m1")
    with pytest.raises(ValueError, match=r"linear_mx: weight_scales must be \[12, 4\]"):
        P.linear_mx(x, c, s, "fp4_e2m1", 16)
    with pytest.raises(ValueError, match=r"linear_mx: bias must be \[12\]"):
        P.linear_mx(x, c, s, "fp4_e2m1", 32, b[:5])
    with pytest.raises(ValueError, match=r"linear_mx: input_rounding must be nearest, even or floor"):
        P.linear_mx(x, c, s, "fp4_e2m1", 32, None, "int8", 32, "stochastic")
    with pytest.raises(ValueError, match=r"linear_mx: unknown input_format \"int1\""):
        P.linear_mx(x, c, s, "fp4_e2m1", 32, None, "int1")
    with pytest.raises(TypeError, match=r"linear_mx: input must be float32, bfloat16 or float16"):
        P.linear_mx(x.to(torch.int32), c, s, "fp4_e2m1")
    with pytest.raises(TypeError, match=r"linear_mx: weight_scales must be uint8"):
        P.linear_mx(x, c, s.to(torch.int32), "fp4_e2m1")
