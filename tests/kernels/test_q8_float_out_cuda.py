"""linear_q8_float / conv2d_q8_float on CUDA: (conv: im2col rows, then) the int8 GEMV / GEMMs in
their dynamic mode (every row's scale s_x and zero point z_x) writing fp32. Against the fp64
computation within the CPU test's bound and against the CPU kernel within twice it (the CPU sums
partial products in fp32, CUDA's sums are exact int32); Hopper's wgmma GEMM bit for bit the
mma.sync one; more rows than one launch; grouped convolutions through the reference; opcheck. Runs
on the GPU machine; skipped elsewhere."""

import pytest
import torch
from torch.library import opcheck

import pt2q  # noqa: F401
from tests.cuda_support import cuda_kernel_names, needs_cuda_kernel
from tests.kernels.test_q8_float_out import LINEAR_SHAPES, SHAPES, fp64, fp64_linear
from tests.kernels.test_linear_static import conv_case, make, pack_conv

pytestmark = [pytest.mark.cuda, needs_cuda_kernel("pt2q::conv2d_q8_float"), needs_cuda_kernel("pt2q::linear_q8_float")]
P = torch.ops.pt2q


def check(shape, seed=0, bias=True):
    n, c, h, w_, oc, ks, st, pad, dil, groups = shape
    x, sx, zx, w, sw, b, _, _, _ = conv_case(*shape[:-1], seed=seed, groups=groups)
    b = b if bias else None
    packed = pack_conv(w)
    geo = (list(ks), list(st), list(pad), list(dil))

    def run():
        return P.conv2d_q8_float(x.cuda(), sx, zx, packed.cuda(), sw.cuda(), None if b is None else b.cuda(), *geo,
                                 groups)
    got = run()
    assert got.is_cuda and got.dtype == torch.float32 and got.is_contiguous()
    assert torch.equal(got, run())
    y, bound = fp64(x, zx, w, sw, sx, b, shape)
    assert bool(((got.cpu().double() - y).abs() <= bound).all())
    cpu = P.conv2d_q8_float(x, sx, zx, packed, sw, b, *geo, groups)
    assert bool(((got.cpu().double() - cpu.double()).abs() <= 2 * bound).all())
    return run


@pytest.mark.parametrize("shape", SHAPES + [(2, 16, 30, 30, 24, (3, 3), (1, 1), (1, 1), (1, 1), 1)])  # 1800 rows
@pytest.mark.parametrize("bias", [True, False])
def test_matches_fp64_and_cpu(shape, bias):
    check(shape, seed=shape[1] + shape[4], bias=bias)


def test_wgmma_gemm_matches_mma_sync(monkeypatch):
    run = check((8, 24, 16, 16, 40, (3, 3), (1, 1), (1, 1), (1, 1), 1), seed=12)  # 2048 rows of k = 216
    got = run()
    assert any("dynWgmma" in n for n in cuda_kernel_names(run))
    monkeypatch.setenv("PT2Q_CUDA_Q8_WGMMA", "0")
    assert torch.equal(got, run())


def test_more_rows_than_one_launch():
    # 1100 x 1000 output pixels: more than the GEMV's 16 x 65535 rows a launch.
    shape = (1, 4, 1100, 1000, 8, (1, 1), (1, 1), (0, 0), (1, 1), 1)
    x, sx, zx, w, sw, b, _, _, _ = conv_case(*shape[:-1], seed=11)
    got = P.conv2d_q8_float(x.cuda(), sx, zx, pack_conv(w).cuda(), sw.cuda(), b.cuda(), [1, 1], [1, 1], [0, 0],
                            [1, 1])
    y, bound = fp64(x, zx, w, sw, sx, b, shape)
    assert bool(((got.cpu().double() - y).abs() <= bound).all())


def test_opcheck():
    x, sx, zx, w, sw, b, _, _, _ = conv_case(2, 8, 6, 6, 8, (3, 3), (1, 1), (1, 1), (1, 1))
    opcheck(P.conv2d_q8_float, (x.cuda(), sx, zx, pack_conv(w).cuda(), sw.cuda(), b.cuda(), [3, 3], [1, 1], [1, 1],
                                [1, 1]))


@pytest.mark.parametrize("n,k,m_shape", LINEAR_SHAPES + [(257, 4096, (2048,)), (48, 64, (11,))])
def test_linear_matches_fp64_and_cpu(n, k, m_shape, monkeypatch):
    x, sx, zx, w, sw, b, _, _ = make(n, k, m_shape, seed=n + k)
    packed = P.pack_weight_int8(w)

    def run():
        return P.linear_q8_float(x.cuda(), sx, zx, packed.cuda(), sw.cuda(), b.cuda())
    got = run()
    assert got.is_cuda and got.dtype == torch.float32 and got.shape == (*m_shape, n)
    y, bound = fp64_linear(x, zx, w, sw, sx, b)
    assert bool(((got.cpu().double() - y).abs() <= bound).all())
    cpu = P.linear_q8_float(x, sx, zx, packed, sw, b)
    assert bool(((got.cpu().double() - cpu.double()).abs() <= 2 * bound).all())
    if m_shape[0] >= 256:  # Hopper's wgmma GEMM, bit for bit the mma.sync one
        assert any("dynWgmma" in n for n in cuda_kernel_names(run))
        monkeypatch.setenv("PT2Q_CUDA_Q8_WGMMA", "0")
        assert torch.equal(got, run())


def test_linear_misaligned_input_and_opcheck():
    x, sx, zx, w, sw, b, _, _ = make(48, 64, (11,), seed=7)
    base = torch.zeros(11 * 64 + 3, dtype=torch.int8, device="cuda")
    xc = base[3:].view(11, 64)  # rows 3 bytes past a 16-byte boundary
    xc.copy_(x.cuda())
    packed = P.pack_weight_int8(w)
    got = P.linear_q8_float(xc, sx, zx, packed.cuda(), sw.cuda(), b.cuda())
    y, bound = fp64_linear(x, zx, w, sw, sx, b)
    assert bool(((got.cpu().double() - y).abs() <= bound).all())
    opcheck(P.linear_q8_float, (x.cuda(), sx, zx, packed.cuda(), sw.cuda(), b.cuda()))

