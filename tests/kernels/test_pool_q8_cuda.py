"""max_pool2d_q8 on CUDA: the CPU kernel's codes (and so aten.max_pool2d's on the codes) for every
window of the CPU test, int8 and uint8, 3-d, 4-d and non-contiguous inputs; errors; opcheck. Runs on
the GPU machine; skipped elsewhere."""

import pytest
import torch
from torch.library import opcheck

import pt2q  # noqa: F401
from tests.cuda_support import needs_cuda_kernel
from tests.kernels.test_pool_q8 import WINDOWS, codes

pytestmark = [pytest.mark.cuda, needs_cuda_kernel("pt2q::max_pool2d_q8")]
P = torch.ops.pt2q


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8])
@pytest.mark.parametrize("window", WINDOWS)
def test_matches_the_cpu(dtype, window):
    k, s, p, d, ceil = window
    for shape in ((2, 3, 11, 13), (4, 9, 8), (8, 64, 56, 56)):
        x = codes(shape, dtype, seed=sum(shape))
        got = P.max_pool2d_q8(x.cuda(), k, s, p, d, ceil)
        assert got.is_cuda and torch.equal(got.cpu(), P.max_pool2d_q8(x, k, s, p, d, ceil)), (shape, window)
    xt = codes((2, 13, 11, 3), dtype, seed=5).permute(0, 3, 2, 1)
    assert torch.equal(P.max_pool2d_q8(xt.cuda(), k, s, p, d, ceil).cpu(), P.max_pool2d_q8(xt, k, s, p, d, ceil))


def test_errors_and_opcheck():
    x = codes((1, 2, 8, 8), torch.int8, 1).cuda()
    with pytest.raises(ValueError, match=r"max_pool2d_q8: input must be int8 or uint8 codes, got Float"):
        P.max_pool2d_q8(x.float(), [2, 2], [2, 2])
    opcheck(P.max_pool2d_q8.default, (codes((2, 3, 9, 9), torch.int8, 2).cuda(), [3, 3], [2, 2], [1, 1], [1, 1], True))
