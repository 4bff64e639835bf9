"""linear_q8 / conv2d_q8 on CUDA (the int8 tensor-core GEMV in its linear_q8 mode; conv2d_q8 through
an im2col kernel). Codes against the exact fp64 computation from the codes (equal except within
fp32 rounding of a .5 tie, there at most one apart: the CPU test's rule) and against the CPU kernel
by the same rule; M in {1, 2, 7, 16, 33, 64, 128, 129, 2048} (the GEMM from 64 rows on), odd N, K not a multiple of 16, fused relu,
no bias, extreme codes at the int32 limit of K, misaligned and strided inputs, more rows than one
launch takes, deterministic; the reference path past that K; errors; opcheck.
Runs on the GPU machine; skipped elsewhere."""

import pytest
import torch
import torch.nn.functional as F
from torch.library import opcheck

import pt2q  # noqa: F401
from pt2q import _C
from tests.kernels.test_linear_static import CONV_SHAPES, GROUPED_SHAPES, check_codes, conv_case, exact, make, pack_conv
from tests.cuda_support import needs_cuda_kernel

pytestmark = [pytest.mark.cuda, needs_cuda_kernel("pt2q::linear_q8")]
P = torch.ops.pt2q
REF = _C.reference


def dev(t):
    return None if t is None else t.cuda()


def check_linear_cuda(x, sx, zx, w, sw, b, so, zo, qmin=-128, qmax=127, xc=None):
    packed = P.pack_weight_int8(w)
    xc = x.cuda() if xc is None else xc
    got = P.linear_q8(xc, sx, zx, packed.cuda(), sw.cuda(), dev(b), so, zo, qmin, qmax)
    assert got.is_cuda and got.dtype == torch.int8
    assert torch.equal(got, P.linear_q8(xc, sx, zx, packed.cuda(), sw.cuda(), dev(b), so, zo, qmin, qmax))
    got = got.cpu()
    v, want = exact(F.linear(x.double() - zx, w.double()), sx, sw, b, so, zo, qmin, qmax, -1)
    check_codes(got, v, want, zo, qmin, qmax)
    check_codes(got, v, P.linear_q8(x, sx, zx, packed, sw, b, so, zo, qmin, qmax), zo, qmin, qmax)
    return got


@pytest.mark.parametrize("m", [1, 2, 7, 16, 33, 64, 128, 129, 2048])
@pytest.mark.parametrize("n,k", [(5, 33), (67, 256), (130, 512), (64, 1000), (257, 4096)])
def test_linear_matches_fp64_and_cpu(m, n, k):
    check_linear_cuda(*make(n, k, (m,), seed=m + n))


def test_linear_relu_no_bias_and_leading_dims():
    check_linear_cuda(*make(67, 256, (3, 5), seed=4), qmin=-3)
    x, sx, zx, w, sw, _, so, zo = make(130, 100, (9,), seed=5, bias=False)
    check_linear_cuda(x, sx, zx, w, sw, None, so, zo)
    # a narrow output range: most codes clamp
    check_linear_cuda(*make(40, 64, (20,), seed=6), qmin=-5, qmax=5)


def test_linear_misaligned_and_strided_input():
    x, sx, zx, w, sw, b, so, zo = make(48, 64, (11,), seed=7)
    base = torch.zeros(11 * 64 + 3, dtype=torch.int8, device="cuda")
    xc = base[3:].view(11, 64)  # rows 3 bytes past a 16-byte boundary
    xc.copy_(x.cuda())
    check_linear_cuda(x, sx, zx, w, sw, b, so, zo, xc=xc)
    wide = torch.zeros(11, 128, dtype=torch.int8, device="cuda")
    wide[:, ::2] = x.cuda()
    check_linear_cuda(x, sx, zx, w, sw, b, so, zo, xc=wide[:, ::2])


@pytest.mark.parametrize("zx,xv,wv", [(127, -128, -128), (-128, 127, 127), (127, -128, 127), (-128, 127, -128)])
def test_linear_extreme_codes_at_the_int32_limit(zx, xv, wv):
    # |q - zx| w = 255 * 128 at every k: the sums reach 2^31 - 2^22 at K = 65536, still exact.
    k, n = 65536, 6
    x = torch.full((2, k), xv, dtype=torch.int8)
    w = torch.full((n, k), wv, dtype=torch.int8)
    w[1] = -w[1].clamp(-127, 127)
    sw = torch.full((n,), 1e-6)
    b = torch.linspace(-3, 3, n)
    acc = F.linear(x.double() - zx, w.double())
    so = float((acc * 0.01 * 1e-6).abs().max()) / 100
    check_linear_cuda(x, 0.01, zx, w, sw, b, so, 0)


def test_linear_past_the_int32_limit_takes_the_reference():
    k = 65536 + 16
    x, sx, zx, w, sw, b, so, zo = make(8, k, (3,), seed=8)
    packed = P.pack_weight_int8(w).cuda()
    got = P.linear_q8(x.cuda(), sx, zx, packed, sw.cuda(), b.cuda(), so, zo)
    assert torch.equal(got.cpu(), REF.linear_q8(x, sx, zx, packed.cpu(), sw, b, so, zo, -128, 127))


@pytest.mark.parametrize("shape", CONV_SHAPES + [
    (2, 5, 7, 7, 9, (3, 3), (2, 1), (1, 1), (1, 1)),
    (4, 64, 14, 14, 128, (3, 3), (1, 1), (1, 1), (1, 1)),
    (1, 12, 10, 6, 7, (2, 4), (3, 1), (3, 2), (1, 2)),
])
def test_conv2d_matches_fp64_and_cpu(shape):
    n, c, h, w_, oc, ks, st, pad, dil = shape
    x, sx, zx, w, sw, b, so, zo, acc = conv_case(*shape, seed=c + oc)
    packed = pack_conv(w)
    for qmin in (-128, zo):
        got = P.conv2d_q8(x.cuda(), sx, zx, packed.cuda(), sw.cuda(), b.cuda(), ks, st, pad, dil, so, zo, qmin, 127)
        assert got.is_cuda and got.shape == acc.shape and got.is_contiguous()
        got = got.cpu()
        v, want = exact(acc, sx, sw, b, so, zo, qmin, 127, 1)
        check_codes(got, v, want, zo, qmin, 127)
        cpu = P.conv2d_q8(x, sx, zx, packed, sw, b, ks, st, pad, dil, so, zo, qmin, 127)
        check_codes(got, v, cpu, zo, qmin, 127)


@pytest.mark.parametrize("shape", GROUPED_SHAPES)
def test_grouped_and_depthwise_conv2d_match_fp64_and_cpu(shape):
    n, c, h, w_, oc, ks, st, pad, dil, groups = shape
    x, sx, zx, w, sw, b, so, zo, acc = conv_case(*shape[:-1], seed=c + groups, groups=groups)
    packed = pack_conv(w)
    got = P.conv2d_q8(x.cuda(), sx, zx, packed.cuda(), sw.cuda(), b.cuda(), ks, st, pad, dil, so, zo, -128, 127, groups)
    assert got.is_cuda and got.shape == acc.shape
    v, want = exact(acc, sx, sw, b, so, zo, -128, 127, 1)
    check_codes(got.cpu(), v, want, zo, -128, 127)
    check_codes(got.cpu(), v, P.conv2d_q8(x, sx, zx, packed, sw, b, ks, st, pad, dil, so, zo, -128, 127, groups),
                zo, -128, 127)


def test_conv2d_channels_last_and_sliced_input():
    shape = (2, 8, 9, 9, 16, (3, 3), (1, 1), (1, 1), (1, 1))
    x, sx, zx, w, sw, b, so, zo, acc = conv_case(*shape, seed=3)
    packed = pack_conv(w).cuda()
    v, want = exact(acc, sx, sw, b, so, zo, -128, 127, 1)
    for xc in (x.cuda().contiguous(memory_format=torch.channels_last),
               torch.cat([x, x]).cuda()[2:]):
        got = P.conv2d_q8(xc, sx, zx, packed, sw.cuda(), b.cuda(), [3, 3], [1, 1], [1, 1], [1, 1], so, zo)
        check_codes(got.cpu(), v, want, zo, -128, 127)


def test_conv2d_more_rows_than_one_launch():
    # 1100 x 1000 output pixels: more than the GEMV's 16 x 65535 rows per launch.
    shape = (1, 4, 1100, 1000, 8, (1, 1), (1, 1), (0, 0), (1, 1))
    x, sx, zx, w, sw, b, so, zo, acc = conv_case(*shape, seed=11)
    got = P.conv2d_q8(x.cuda(), sx, zx, pack_conv(w).cuda(), sw.cuda(), b.cuda(), [1, 1], [1, 1], [0, 0], [1, 1],
                      so, zo)
    check_codes(got.cpu(), *exact(acc, sx, sw, b, so, zo, -128, 127, 1), zo, -128, 127)


def test_errors_name_the_device_of_the_bias():
    x, sx, zx, w, sw, b, so, zo = make(8, 32, (2,), seed=1)
    packed = P.pack_weight_int8(w).cuda()
    with pytest.raises(ValueError, match=r"linear_q8: input, packed_weight, weight_scales and bias must be on one "
                                         r"device, got cuda:0, cuda:0, cuda:0 and cpu"):
        P.linear_q8(x.cuda(), sx, zx, packed, sw.cuda(), b, so, zo)
    with pytest.raises(ValueError, match="conv2d_q8: input must be 4-d"):
        P.conv2d_q8(x.cuda(), sx, zx, packed, sw.cuda(), b.cuda(), [1, 1], [1, 1], [0, 0], [1, 1], so, zo)


def test_opcheck():
    x, sx, zx, w, sw, b, so, zo = make(37, 80, (5,), seed=2)
    opcheck(P.linear_q8, (x.cuda(), sx, zx, P.pack_weight_int8(w).cuda(), sw.cuda(), b.cuda(), so, zo, -128, 127))
    x, sx, zx, w, sw, b, so, zo, _ = conv_case(2, 8, 6, 6, 8, (3, 3), (1, 1), (1, 1), (1, 1))
    opcheck(P.conv2d_q8, (x.cuda(), sx, zx, pack_conv(w).cuda(), sw.cuda(), b.cuda(), [3, 3], [1, 1], [1, 1],
                          [1, 1], so, zo, -128, 127))
