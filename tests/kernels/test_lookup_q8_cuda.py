"""lookup_q8 on CUDA: the CPU kernel's codes for int8 / uint8 codes and tables, sizes around the
16-byte vector and its tail, unaligned storage (a slice starting at byte 1, so the byte-a-thread
path), channels-last and non-dense inputs; errors; opcheck. Runs on the GPU machine; skipped
elsewhere."""

import pytest
import torch
from torch.library import opcheck

import pt2q  # noqa: F401
from tests.cuda_support import needs_cuda_kernel
from tests.kernels.test_lookup_q8 import DTYPES, codes, table

pytestmark = [pytest.mark.cuda, needs_cuda_kernel("pt2q::lookup_q8")]
P = torch.ops.pt2q


@pytest.mark.parametrize("code_dtype", DTYPES)
@pytest.mark.parametrize("table_dtype", DTYPES)
def test_matches_the_cpu(code_dtype, table_dtype):
    t = table(table_dtype, seed=1)
    for i, shape in enumerate([(0,), (), (15,), (16,), (17,), (3, 5, 17), (8, 144, 56, 56), (1 << 20) + 3]):
        x = codes(shape if isinstance(shape, tuple) else (shape,), code_dtype, seed=i)
        got = P.lookup_q8(x.cuda(), t.cuda())
        assert got.is_cuda and got.dtype == table_dtype and torch.equal(got.cpu(), P.lookup_q8(x, t)), shape
        unaligned = x.reshape(-1)[1:] if x.numel() > 1 else x
        assert torch.equal(P.lookup_q8(unaligned.cuda(), t.cuda()).cpu(), P.lookup_q8(unaligned, t)), shape


def test_layouts():
    t = table(torch.int8, seed=2).cuda()
    x = codes((2, 16, 9, 7), torch.int8, seed=3)
    cl = x.contiguous(memory_format=torch.channels_last)
    got = P.lookup_q8(cl.cuda(), t)
    assert got.stride() == cl.stride() and torch.equal(got.cpu(), P.lookup_q8(x, t.cpu()))
    for view in (x[:, 3:11, ::2], x.transpose(1, 3)):
        assert torch.equal(P.lookup_q8(view.cuda(), t).cpu(), P.lookup_q8(view, t.cpu()))


def test_errors_and_opcheck():
    t = table(torch.uint8, seed=4).cuda()
    x = codes((4, 4), torch.int8, seed=5).cuda()
    with pytest.raises(ValueError, match="lookup_q8: codes must be int8 or uint8, got Float"):
        P.lookup_q8(x.float(), t)
    with pytest.raises(ValueError, match="lookup_q8: table is on cpu, codes on cuda:0"):
        P.lookup_q8(x, t.cpu())
    opcheck(P.lookup_q8.default, (codes((2, 3, 5, 5), torch.int8, seed=6).cuda(), t))
