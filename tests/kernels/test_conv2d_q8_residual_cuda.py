"""conv2d_q8's residual on CUDA, on each path that requantizes: the GEMV (few rows), the mma.sync
GEMM, Hopper's wgmma GEMM (many rows; bit for bit the mma.sync one), more rows than one launch
(the residual sliced with the output) and the direct grouped / depthwise kernel. Codes against the
fp64 computation (the CPU test's rule) and against the CPU kernel (bit for bit: the same fp32
steps); relu and no bias; errors; opcheck. Runs on the GPU machine; skipped elsewhere."""

import pytest
import torch
from torch.library import opcheck

import pt2q  # noqa: F401
from pt2q import _C
from tests.cuda_support import cuda_kernel_names, needs_cuda_kernel
from tests.kernels.test_conv2d_q8_residual import SHAPES, exact, residual_case
from tests.kernels.test_linear_static import check_codes, pack_conv

pytestmark = [pytest.mark.cuda, needs_cuda_kernel("pt2q::conv2d_q8")]
P = torch.ops.pt2q
REF = _C.reference


def check(shape, groups=1, seed=0, relu=False, bias=True):
    n, c, h, w_, oc, ks, st, pad, dil = shape
    x, sx, zx, w, sw, b, so, zo, acc, r, sr, zr = residual_case(shape, groups, seed)
    b = b if bias else None
    qmin = zo if relu else -128
    packed = pack_conv(w)
    tail = (list(ks), list(st), list(pad), list(dil), so, zo, qmin, 127, groups)

    def run():
        return P.conv2d_q8(x.cuda(), sx, zx, packed.cuda(), sw.cuda(), None if b is None else b.cuda(), *tail,
                           r.cuda(), sr, zr)
    got = run()
    assert got.is_cuda and got.shape == acc.shape and got.is_contiguous()
    assert torch.equal(got, run())
    check_codes(got.cpu(), *exact(acc, sx, sw, b, so, zo, qmin, 127, r, sr, zr), zo, qmin, 127)
    assert torch.equal(got.cpu(), P.conv2d_q8(x, sx, zx, packed, sw, b, *tail, r, sr, zr))
    return run


@pytest.mark.parametrize("shape", SHAPES + [(2, 16, 30, 30, 24, (3, 3), (1, 1), (1, 1), (1, 1), 1),  # 1800 rows
                                            (1, 64, 10, 9, 64, (3, 3), (1, 1), (1, 1), (1, 1), 64)])
@pytest.mark.parametrize("relu,bias", [(False, True), (True, False)])
def test_residual_matches_fp64_and_cpu(shape, relu, bias):
    run = check(shape[:-1], groups=shape[-1], seed=shape[1] + shape[4], relu=relu, bias=bias)
    if shape[-1] > 1:
        assert any("groupedConvQ8Kernel" in n for n in cuda_kernel_names(run))


def test_residual_on_the_wgmma_gemm_matches_mma_sync(monkeypatch):
    shape = (8, 24, 16, 16, 40, (3, 3), (1, 1), (1, 1), (1, 1))  # 2048 rows of k = 216
    run = check(shape, seed=12, relu=True)
    got = run()
    assert any("dynWgmma" in n for n in cuda_kernel_names(run))
    monkeypatch.setenv("PT2Q_CUDA_Q8_WGMMA", "0")
    assert torch.equal(got, run())


def test_residual_over_more_rows_than_one_launch():
    # 1100 x 1000 output pixels: more than the GEMV's 16 x 65535 rows a launch; the residual's
    # rows must follow each slice.
    shape = (1, 4, 1100, 1000, 8, (1, 1), (1, 1), (0, 0), (1, 1))
    x, sx, zx, w, sw, b, so, zo, acc, r, sr, zr = residual_case(shape, seed=11)
    got = P.conv2d_q8(x.cuda(), sx, zx, pack_conv(w).cuda(), sw.cuda(), b.cuda(), [1, 1], [1, 1], [0, 0], [1, 1],
                      so, zo, -128, 127, 1, r.cuda(), sr, zr)
    check_codes(got.cpu(), *exact(acc, sx, sw, b, so, zo, -128, 127, r, sr, zr), zo, -128, 127)


def test_residual_on_another_device_is_an_error():
    x, sx, zx, w, sw, b, so, zo, _, r, sr, zr = residual_case((1, 4, 6, 6, 8, (3, 3), (1, 1), (1, 1), (1, 1)))
    with pytest.raises(ValueError, match=r"conv2d_q8: residual must be on the input's device \(cuda:0\), got cpu"):
        P.conv2d_q8(x.cuda(), sx, zx, pack_conv(w).cuda(), sw.cuda(), b.cuda(), [3, 3], [1, 1], [1, 1], [1, 1], so,
                    zo, -128, 127, 1, r, sr, zr)


def test_opcheck():
    x, sx, zx, w, sw, b, so, zo, _, r, sr, zr = residual_case((2, 8, 6, 6, 8, (3, 3), (1, 1), (1, 1), (1, 1)))
    opcheck(P.conv2d_q8, (x.cuda(), sx, zx, pack_conv(w).cuda(), sw.cuda(), b.cuda(), [3, 3], [1, 1], [1, 1],
                          [1, 1], so, zo, zo, 127, 1, r.cuda(), sr, zr))
