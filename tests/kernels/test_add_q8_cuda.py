"""add_q8 on CUDA: bit for bit the CPU kernel's codes (and so torch's chain's) on every pair of
codes and the CPU test's qparams, random sizes around the 16-byte vectors, misaligned views,
broadcasting, the fused relu clamp; the kernel it runs; errors; opcheck; a lowered residual model
on the GPU agrees with the same model on the CPU. Runs on the GPU machine; skipped elsewhere."""

import copy

import pytest
import torch
from torch.library import opcheck

import pt2q  # noqa: F401
from tests.cuda_support import cuda_kernel_names, needs_cuda_kernel
from tests.kernels.test_add_q8 import QPARAMS, chain, every_pair

pytestmark = [pytest.mark.cuda, needs_cuda_kernel("pt2q::add_q8")]
P = torch.ops.pt2q


def check(a, sa, za, b, sb, zb, so, zo, qmin=-128, qmax=127, op="add_q8"):
    got = getattr(P, op)(a.cuda(), sa, za, b.cuda(), sb, zb, so, zo, qmin, qmax)
    assert got.is_cuda and got.dtype == torch.int8
    want = getattr(P, op)(a, sa, za, b, sb, zb, so, zo, qmin, qmax)
    assert torch.equal(got.cpu(), want), (op, sa, za, sb, zb, so, zo)
    assert torch.equal(want, chain(a, sa, za, b, sb, zb, so, zo, qmin, qmax, op=op))
    return got


def every_pair_checks(q, op="add_q8"):
    a, b = every_pair()
    check(a, *q[:2], b, *q[2:], op=op)
    check(a, *q[:2], b, *q[2:4], q[4], q[5], max(-128, q[5]), 127, op=op)  # relu's clamp


@pytest.mark.parametrize("q", QPARAMS)
def test_every_code_pair_matches_the_cpu(q):
    every_pair_checks(q)


def sizes_checks(op="add_q8"):
    """Lengths around the 16-byte vectors, views one byte into their storage (the scalar path),
    broadcasting."""
    g = torch.Generator().manual_seed(1)
    for n in (1, 15, 16, 17, 255, 4096 + 3, 1 << 20):
        a = torch.randint(-128, 128, (n + 1,), dtype=torch.int8, generator=g)
        b = torch.randint(-128, 128, (n + 1,), dtype=torch.int8, generator=g)
        check(a[:n], 0.03, 2, b[:n], 0.07, -5, 0.05, 1, op=op)
        got = getattr(P, op)(a.cuda()[1:], 0.03, 2, b.cuda()[1:], 0.07, -5, 0.05, 1)
        assert torch.equal(got.cpu(), getattr(P, op)(a[1:], 0.03, 2, b[1:], 0.07, -5, 0.05, 1))
    x = torch.randint(-128, 128, (2, 8, 5, 5), dtype=torch.int8, generator=g)
    for other in (torch.randint(-128, 128, (1, 8, 1, 1), dtype=torch.int8, generator=g),
                  x.contiguous(memory_format=torch.channels_last)):
        check(x, 0.03, 2, other, 0.07, -5, 0.05, 1, op=op)


def test_sizes_misalignment_and_broadcasting():
    sizes_checks()


def test_runs_its_kernel_and_errors():
    a = torch.randint(-128, 128, (4096,), dtype=torch.int8).cuda()
    names = cuda_kernel_names(lambda: P.add_q8(a, 0.1, 0, a, 0.2, 1, 0.3, 2))
    assert any("addVec16" in n for n in names), names
    for x, y in ((a, a.cpu()), (a.cpu(), a)):
        with pytest.raises(ValueError, match=r"add_q8: a and b must be on one device"):
            P.add_q8(x, 0.1, 0, y, 0.1, 0, 0.1, 0)
    with pytest.raises(ValueError, match=r"add_q8: a and b must be int8 codes"):
        P.add_q8(a, 0.1, 0, a.float(), 0.1, 0, 0.1, 0)


def test_opcheck():
    a = torch.randint(-128, 128, (3, 40), dtype=torch.int8, device="cuda")
    b = torch.randint(-128, 128, (1, 40), dtype=torch.int8, device="cuda")
    opcheck(P.add_q8.default, (a, 0.02, -3, b, 0.05, 4, 0.06, -10, -10, 127))


def test_lowered_residual_model_on_the_gpu_equals_the_cpu():
    from tests.pt2e.test_lower_static import _xnnpack, residual_flow

    _, low, x = residual_flow(_xnnpack())
    assert [n.target for n in low.graph.nodes].count(P.add_q8.default) == 2
    on_gpu = copy.deepcopy(low).cuda()
    # the convs' codes may differ by one where fp32 lands on a .5 tie (test_linear_static_cuda's
    # rule); the adds are exact on both devices
    got, want = on_gpu(x.cuda()).cpu().detach(), low(x).detach()
    step = next(n for n in low.graph.nodes if n.op == "output").args[0][0].args[1]
    assert float((got - want).abs().max()) <= 2.5 * step
    assert float((got != want).float().mean()) < 0.05
