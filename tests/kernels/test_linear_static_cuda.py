"""linear_q8 / conv2d_q8 on CUDA (the int8 tensor-core GEMV in its linear_q8 mode; conv2d_q8 through
an im2col kernel; grouped and depthwise conv2d_q8 through a direct kernel). Codes against the exact
fp64 computation from the codes (equal except within fp32 rounding of a .5 tie, there at most one
apart: the CPU test's rule) and against the CPU kernel by the same rule (grouped: bit for bit);
M in {1, 2, 7, 16, 33, 64, 128, 129, 2048} (the GEMM from 64 rows on; Hopper's wgmma GEMM from 256,
bit for bit against the mma.sync one), odd N, K not a multiple of 16, fused relu, no bias, extreme
codes at the int32 limit of K, misaligned and strided inputs, more rows than one launch takes,
deterministic; the reference path past that K; errors; opcheck. Runs on the GPU machine; skipped
elsewhere."""

import pytest
import torch
import torch.nn.functional as F
from torch.library import opcheck

import pt2q  # noqa: F401
from pt2q import _C
from tests.kernels.test_linear_static import CONV_SHAPES, GROUPED_SHAPES, check_codes, conv_case, exact, make, pack_conv
from tests.cuda_support import cuda_kernel_names, needs_cuda_kernel

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


@pytest.mark.parametrize("m", [256, 300, 2048])
@pytest.mark.parametrize("n,k", [(67, 256), (130, 1000), (257, 4096)])
def test_linear_wgmma_gemm_matches_the_mma_sync_gemm(m, n, k, monkeypatch):
    """From 256 rows on Hopper, linear_q8 runs the wgmma GEMM: the same exact sums and
    requantization as the mma.sync GEMM (PT2Q_CUDA_Q8_WGMMA=0), so the same codes bit for bit,
    with partial tiles of x, of the weight and of K (K padded to 16)."""
    x, sx, zx, w, sw, b, so, zo = make(n, k, (m,), seed=m + n + k)
    packed = P.pack_weight_int8(w).cuda()

    def run():
        return P.linear_q8(x.cuda(), sx, zx, packed, sw.cuda(), b.cuda(), so, zo, -128, 127)
    got = run()
    v, want = exact(F.linear(x.double() - zx, w.double()), sx, sw, b, so, zo, -128, 127, -1)
    check_codes(got.cpu(), v, want, zo, -128, 127)
    monkeypatch.setenv("PT2Q_CUDA_Q8_WGMMA", "0")
    assert torch.equal(got, run())
    assert not any("dynWgmma" in n for n in cuda_kernel_names(run))
    monkeypatch.setenv("PT2Q_CUDA_Q8_WGMMA", "1")
    assert any("dynWgmma" in n for n in cuda_kernel_names(run))


@pytest.mark.parametrize("m,wgmma", [(256, False), (511, False), (512, True)])
def test_linear_over_4096_outputs_takes_the_wgmma_gemm_from_512_rows(m, wgmma):
    x, sx, zx, w, sw, b, so, zo = make(4100, 64, (m,), seed=m)
    packed = P.pack_weight_int8(w).cuda()

    def run():
        return P.linear_q8(x.cuda(), sx, zx, packed, sw.cuda(), b.cuda(), so, zo, -128, 127)
    v, want = exact(F.linear(x.double() - zx, w.double()), sx, sw, b, so, zo, -128, 127, -1)
    check_codes(run().cpu(), v, want, zo, -128, 127)
    assert any("dynWgmma" in n for n in cuda_kernel_names(run)) == wgmma


def test_conv2d_many_rows_on_the_wgmma_gemm(monkeypatch):
    shape = (8, 24, 16, 16, 40, (3, 3), (1, 1), (1, 1), (1, 1))  # 2048 rows of k = 216
    x, sx, zx, w, sw, b, so, zo, acc = conv_case(*shape, seed=12)
    args = (sx, zx, pack_conv(w).cuda(), sw.cuda(), b.cuda(), [3, 3], [1, 1], [1, 1], [1, 1], so, zo)

    def run():
        return P.conv2d_q8(x.cuda(), *args)
    got = run()
    check_codes(got.cpu(), *exact(acc, sx, sw, b, so, zo, -128, 127, 1), zo, -128, 127)
    monkeypatch.setenv("PT2Q_CUDA_Q8_WGMMA", "0")
    assert torch.equal(got, run())
    monkeypatch.setenv("PT2Q_CUDA_Q8_WGMMA", "1")
    assert any("dynWgmma" in n for n in cuda_kernel_names(run))


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


def ran_grouped_kernel(fn):
    """Whether fn() ran the direct grouped kernel (conv2d_q8_grouped_kernels.cu)."""
    return any("groupedConvQ8Kernel" in n for n in cuda_kernel_names(fn))


GROUPED_CUDA_SHAPES = GROUPED_SHAPES + [  # n, c, h, w, out channels, kernel_size, stride, padding, dilation, groups
    (2, 32, 9, 9, 48, (3, 3), (1, 1), (1, 1), (1, 1), 16),  # 16 groups of 2 in / 3 out (ResNeXt-like)
    (1, 24, 7, 6, 40, (3, 1), (2, 1), (1, 0), (1, 1), 8),  # 8 groups of 3 in / 5 out
    (1, 128, 6, 5, 8, (3, 3), (1, 1), (1, 1), (1, 1), 2),  # 64 channels a group: k = 576
    (3, 12, 6, 6, 12, (1, 1), (1, 1), (0, 0), (1, 1), 2),  # 1x1, 2 groups
    (1, 4, 3, 2, 4, (5, 5), (1, 1), (2, 2), (1, 1), 4),  # kernel larger than the input: most taps padded
    (1, 6, 11, 13, 18, (3, 2), (3, 4), (0, 3), (3, 2), 6),  # depthwise, multiplier 3, padding wider than a stride
    (2, 64, 5, 5, 64, (3, 3), (2, 2), (1, 1), (1, 1), 64),  # depthwise to a 3x3 output
    # rows of at least 8 outputs take 4 a thread, the last group partial: strided, dilated, 1x5
    (1, 8, 10, 37, 16, (3, 3), (1, 3), (1, 2), (1, 2), 8),  # depthwise, 13 outputs a row
    (1, 12, 6, 22, 12, (1, 5), (1, 1), (0, 2), (1, 1), 3),  # 4 channels a group, 22 a row
    (2, 10, 5, 8, 20, (2, 2), (1, 1), (0, 0), (1, 1), 5),  # 2 channels a group, 7 a row (one a thread)
]


@pytest.mark.parametrize("shape", GROUPED_CUDA_SHAPES)
def test_grouped_and_depthwise_conv2d_match_fp64_and_cpu(shape):
    """The direct kernel gives the CPU kernel's codes bit for bit (the same fp32 requantization of
    the same exact sums) and the fp64 reference's away from rounding ties, with and without bias
    and with a narrow output range."""
    n, c, h, w_, oc, ks, st, pad, dil, groups = shape
    x, sx, zx, w, sw, b, so, zo, acc = conv_case(*shape[:-1], seed=c + groups + oc, groups=groups)
    packed = pack_conv(w)
    for qmin, qmax, bias in ((-128, 127, b), (zo, 127, None), (-5, 6, b)):
        def run():
            return P.conv2d_q8(x.cuda(), sx, zx, packed.cuda(), sw.cuda(), dev(bias), ks, st, pad, dil, so, zo,
                               qmin, qmax, groups)
        got = run()
        assert got.is_cuda and got.shape == acc.shape and got.is_contiguous()
        assert torch.equal(got, run())
        v, want = exact(acc, sx, sw, bias, so, zo, qmin, qmax, 1)
        check_codes(got.cpu(), v, want, zo, qmin, qmax)
        cpu = P.conv2d_q8(x, sx, zx, packed, sw, bias, ks, st, pad, dil, so, zo, qmin, qmax, groups)
        assert torch.equal(got.cpu(), cpu)
    assert ran_grouped_kernel(run)


def test_grouped_conv2d_channels_last_sliced_and_extreme_zero_points():
    shape = (2, 16, 7, 8, 32, (3, 3), (1, 2), (1, 1), (1, 1))
    for groups, zx in ((16, 127), (4, -128), (16, -128)):
        x, sx, _, w, sw, b, so, zo, _ = conv_case(*shape, seed=groups, groups=groups)
        x[0, :, 0, :] = -128
        x[1, :, :, 0] = 127
        acc = F.conv2d(x.double() - zx, w.double(), None, shape[6], shape[7], shape[8], groups)
        so = float((acc * sx * sw.double()[None, :, None, None]).abs().max()) / 100
        packed = pack_conv(w)
        v, want = exact(acc, sx, sw, b, so, zo, -128, 127, 1)
        cpu = P.conv2d_q8(x, sx, zx, packed, sw, b, *shape[5:], so, zo, -128, 127, groups)
        for xc in (x.cuda().contiguous(memory_format=torch.channels_last), torch.cat([x, x]).cuda()[2:]):
            got = P.conv2d_q8(xc, sx, zx, packed.cuda(), sw.cuda(), b.cuda(), *shape[5:], so, zo, -128, 127, groups)
            check_codes(got.cpu(), v, want, zo, -128, 127)
            assert torch.equal(got.cpu(), cpu)


@pytest.mark.parametrize("zx,xv,wv", [(127, -128, -128), (-128, 127, 127), (127, -128, 127)])
def test_grouped_conv2d_extreme_codes_at_the_int32_limit(zx, xv, wv):
    # 2 groups of 4096 channels under a 4x4 kernel: k = 65536 per output, |q - zx| w = 255 * 128 at
    # every tap; the sums reach 2^31 - 2^22, still exact in int32.
    c, oc, groups = 8192, 4, 2
    x = torch.full((1, c, 4, 4), xv, dtype=torch.int8)
    w = torch.full((oc, c // groups, 4, 4), wv, dtype=torch.int8)
    w[1] = -w[1].clamp(-127, 127)
    sw, b = torch.full((oc,), 1e-6), torch.linspace(-3, 3, oc)
    acc = F.conv2d(x.double() - zx, w.double(), None, 1, 0, 1, groups)
    so = float((acc * 0.01 * 1e-6).abs().max()) / 100
    packed = pack_conv(w)
    args = (packed, sw, b, [4, 4], [1, 1], [0, 0], [1, 1], so, 0, -128, 127, groups)
    got = P.conv2d_q8(x.cuda(), 0.01, zx, *(a.cuda() if torch.is_tensor(a) else a for a in args))
    check_codes(got.cpu(), *exact(acc, 0.01, sw, b, so, 0, -128, 127, 1), 0, -128, 127)
    assert torch.equal(got.cpu(), P.conv2d_q8(x, 0.01, zx, *args))


def test_grouped_conv2d_past_the_int32_limit_takes_the_reference():
    # k = 4097 * 16 per output: over 65536, so the fp64 reference runs (and agrees with the CPU's).
    c, oc, groups = 2 * 4097, 2, 2
    x, sx, zx, w, sw, b, so, zo, acc = conv_case(1, c, 4, 4, oc, (4, 4), (1, 1), (0, 0), (1, 1), seed=5,
                                                 groups=groups)
    args = (pack_conv(w), sw, b, [4, 4], [1, 1], [0, 0], [1, 1], so, zo, -128, 127, groups)
    cargs = [a.cuda() if torch.is_tensor(a) else a for a in args]

    def run():
        return P.conv2d_q8(x.cuda(), sx, zx, *cargs)
    got = run()
    assert torch.equal(got.cpu(), REF.conv2d_q8(x, sx, zx, *args))
    assert not ran_grouped_kernel(run)


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
    x, sx, zx, w, sw, b, so, zo, _ = conv_case(1, 8, 6, 6, 16, (3, 3), (2, 2), (1, 1), (1, 1), groups=8)
    opcheck(P.conv2d_q8, (x.cuda(), sx, zx, pack_conv(w).cuda(), sw.cuda(), b.cuda(), [3, 3], [2, 2], [1, 1],
                          [1, 1], so, zo, -128, 127, 8))
