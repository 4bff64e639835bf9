"""pt2q.linear_mx on CUDA (mx_dequantize and mx_fake_quantize's CUDA kernels, then an fp32
matmul) against the CPU reference on the same inputs, within the bound of fp32 summation in any
order: every weight format, ragged K, block sizes, input formats, bias, bf16 / fp16 x, NaN
blocks; deterministic; opcheck. Runs on the GPU machine; skipped elsewhere."""

import pytest
import torch
from torch.library import opcheck

import pt2q  # noqa: F401
from tests.kernels.test_linear_mx import EPS32, FORMATS, REF, ULP, make
from tests.cuda_support import needs_cuda_kernel

pytestmark = [pytest.mark.cuda, needs_cuda_kernel("pt2q::linear_mx")]
P = torch.ops.pt2q


def check(x, codes, scales, fmt, block, b, x_fmt=None, x_block=32):
    dev = lambda t: None if t is None else t.cuda()  # noqa: E731
    args = (codes.cuda(), scales.cuda(), fmt, block, dev(b), x_fmt, x_block)
    got = P.linear_mx(x.cuda(), *args)
    bits = torch.int32 if got.dtype == torch.float32 else torch.int16
    assert torch.equal(got.view(bits), P.linear_mx(x.cuda(), *args).view(bits))  # same bits, NaN included
    want = REF.linear_mx(x, codes, scales, fmt, block, b, x_fmt, x_block)
    assert got.is_cuda and got.dtype == x.dtype and got.shape == want.shape
    k = x.shape[-1]
    w = REF.mx_dequantize(codes, scales, fmt, block, -1, k)
    xq = x if x_fmt is None else REF.mx_fake_quantize(x, x_fmt, x_block)
    terms = xq.float().abs().reshape(-1, k) @ w.abs().t() + (0 if b is None else b.abs())
    lim = 2 * (k + 2) * EPS32 * terms + ULP[x.dtype] * 2 * want.float().abs().reshape(terms.shape) + 1e-30
    g = got.cpu().float().reshape(terms.shape)
    ok = ((g - want.float().reshape(terms.shape)).abs() <= lim) | (g.isnan() & want.isnan().reshape(terms.shape))
    assert bool(ok.all())


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("n,k,block", [(37, 256, 32), (9, 100, 32), (16, 128, 16), (5, 64, 0), (13, 96, 96)])
def test_matches_cpu_reference(fmt, n, k, block):
    for m in (1, 5, 33):
        x, c, s, b = make(n, k, (m,), fmt, block, seed=m + n)
        for x_fmt in (None, "int8", "fp4_e2m1"):
            check(x, c, s, fmt, block, b, x_fmt)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_half_inputs_leading_dims_and_nan_blocks(dtype):
    x, c, s, b = make(24, 128, (2, 3), "fp8_e4m3", 32, seed=3, dtype=dtype)
    s[5, 1] = 255  # a NaN block of the weight: NaN in output column 5
    check(x, c, s, "fp8_e4m3", 32, b, "int8")


def test_opcheck():
    x, c, s, b = make(16, 64, (3,), "int8", 32, seed=4)
    opcheck(P.linear_mx.default, (x.cuda(), c.cuda(), s.cuda(), "int8", 32, b.cuda(), "fp4_e2m1", 32))
