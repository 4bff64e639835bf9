"""pt2q.linear_mx on CPU against its reference (mx_dequantize, mx_fake_quantize, then F.linear in
fp32): every weight format, ragged K, block sizes that are and are not multiples of 32, every
row-count path (the AVX-512 row kernel in groups of 4 rows, the portable loop, the dequantized
GEMM tiles), input formats, bias, bf16/fp16 inputs, NaN blocks; within the bound of fp32
summation in any order; opcheck, export, compile; the portable loop alone (PT2Q_CPU_ISA=avx2);
errors name the argument."""

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


SCRIPT = r"""
import importlib, sys, torch, pt2q
t = importlib.import_module("tests.kernels.test_linear_mx")
for fmt in ("int8", "fp6_e2m3", "fp4_e2m1", "fp8_e4m3"):
    for m in (1, 5):
        x, c, s, b = t.make(13, 200, (m,), fmt, 32, seed=m)
        t.check(x, c, s, fmt, 32, b, "int8")
print("ok")
"""


def test_portable_loop_alone():
    """PT2Q_CPU_ISA=avx2: no AVX-512 row kernel, every code goes through the portable loop."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, cwd=root,
                       env=dict(os.environ, PT2Q_CPU_ISA="avx2"), timeout=120)
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
