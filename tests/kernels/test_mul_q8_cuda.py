"""mul_q8 on CUDA: bit for bit the CPU kernel's codes (and so torch's chain's) on every pair of
codes and the CPU test's qparams (overflowing products among them), sizes around the 16-byte
vectors, misaligned views, a squeeze-excitation gate broadcast, the fused relu clamp; opcheck. Runs
on the GPU machine; skipped elsewhere."""

import pytest
import torch
from torch.library import opcheck

import pt2q  # noqa: F401
from tests.cuda_support import needs_cuda_kernel
from tests.kernels.test_add_q8 import QPARAMS, every_pair
from tests.kernels.test_mul_q8 import chain

pytestmark = [pytest.mark.cuda, needs_cuda_kernel("pt2q::mul_q8")]
P = torch.ops.pt2q


def check(a, sa, za, b, sb, zb, so, zo, qmin=-128, qmax=127):
    got = P.mul_q8(a.cuda(), sa, za, b.cuda(), sb, zb, so, zo, qmin, qmax)
    assert got.is_cuda and got.dtype == torch.int8
    want = P.mul_q8(a, sa, za, b, sb, zb, so, zo, qmin, qmax)
    assert torch.equal(got.cpu(), want), (sa, za, sb, zb, so, zo)
    assert torch.equal(want, chain(a, sa, za, b, sb, zb, so, zo, qmin, qmax))


@pytest.mark.parametrize("q", QPARAMS)
def test_every_code_pair_matches_the_cpu(q):
    a, b = every_pair()
    check(a, *q[:2], b, *q[2:])
    check(a, *q[:2], b, *q[2:4], q[4], q[5], max(-128, q[5]), 127)  # relu's clamp


def test_sizes_misalignment_and_broadcasting():
    g = torch.Generator().manual_seed(1)
    for n in (1, 15, 16, 17, 255, 4096 + 3, 1 << 20):
        a = torch.randint(-128, 128, (n + 1,), dtype=torch.int8, generator=g)
        b = torch.randint(-128, 128, (n + 1,), dtype=torch.int8, generator=g)
        check(a[:n], 0.03, 2, b[:n], 0.07, -5, 0.05, 1)
        got = P.mul_q8(a.cuda()[1:], 0.03, 2, b.cuda()[1:], 0.07, -5, 0.05, 1)  # the scalar path
        assert torch.equal(got.cpu(), P.mul_q8(a[1:], 0.03, 2, b[1:], 0.07, -5, 0.05, 1))
    x = torch.randint(-128, 128, (2, 16, 7, 9), dtype=torch.int8, generator=g)
    gate = torch.randint(-128, 128, (2, 16, 1, 1), dtype=torch.int8, generator=g)
    check(x, 0.03, 2, gate, 1 / 255, -128, 0.03, 3)
    opcheck(P.mul_q8.default, (x.cuda(), 0.03, 2, gate.cuda(), 1 / 255, -128, 0.03, 3, -128, 127))
