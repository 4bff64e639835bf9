"""mul_q8 on CUDA: bit for bit the CPU kernel's codes (and so torch's chain's) on every pair of
codes and the CPU test's qparams (overflowing products among them), sizes around the 16-byte
vectors, misaligned views, a squeeze-excitation gate broadcast, the fused relu clamp; opcheck. Runs
on the GPU machine; skipped elsewhere."""

import pytest
import torch
from torch.library import opcheck

import pt2q  # noqa: F401
from tests.cuda_support import needs_cuda_kernel
from tests.kernels import test_add_q8_cuda as add
from tests.kernels.test_add_q8 import QPARAMS

pytestmark = [pytest.mark.cuda, needs_cuda_kernel("pt2q::mul_q8")]
P = torch.ops.pt2q


@pytest.mark.parametrize("q", QPARAMS)
def test_every_code_pair_matches_the_cpu(q):
    add.every_pair_checks(q, op="mul_q8")


def test_sizes_misalignment_and_broadcasting():
    add.sizes_checks(op="mul_q8")
    g = torch.Generator().manual_seed(2)
    x = torch.randint(-128, 128, (2, 16, 7, 9), dtype=torch.int8, generator=g)
    gate = torch.randint(-128, 128, (2, 16, 1, 1), dtype=torch.int8, generator=g)
    add.check(x, 0.03, 2, gate, 1 / 255, -128, 0.03, 3, op="mul_q8")
    opcheck(P.mul_q8.default, (x.cuda(), 0.03, 2, gate.cuda(), 1 / 255, -128, 0.03, 3, -128, 127))
