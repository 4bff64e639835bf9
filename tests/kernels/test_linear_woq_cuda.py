"""linear_w8a16 / linear_w4a16 on CUDA: the GEMV kernels (fp32 x to 16 rows, bf16 / fp16 x to
63), the GEMM that dequantizes in registers (bf16 / fp16 x from 64 rows, Hopper), the dequantize +
cuBLAS path it replaced and the reference path, against an fp64 product of the unpacked weight, within the bound of
fp32 summation in any order plus the output dtype's rounding; per-channel and grouped scales,
zero points, bias, fp32 / bf16 / fp16 x, odd N, K over several splits, deterministic; the pack
ops on CUDA give the CPU's bytes. Runs on the GPU machine; skipped elsewhere."""

import re

import pytest
import torch

import pt2q  # noqa: F401
from tests.cuda_support import cuda_kernel_names, needs_cuda_kernel

pytestmark = [pytest.mark.cuda, needs_cuda_kernel("pt2q::linear_w8a16")]
P = torch.ops.pt2q
EPS32 = 2.0 ** -24
ULP = {torch.float32: 0.0, torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11}


def make(bits, n, k, group, zp, seed):
    g = torch.Generator().manual_seed(seed)
    lo, hi = (-128, 128) if bits == 8 else (-8, 8)
    w = torch.randint(lo, hi, (n, k), generator=g, dtype=torch.int8)
    groups = 1 if group is None else k // group
    s = torch.rand(n, groups, generator=g) * 0.02 + 1e-3
    z = torch.randint(lo // 2, hi // 2, (n, groups), generator=g, dtype=torch.int32) if zp else None
    if group is None:
        s = s.reshape(n)
        z = None if z is None else z.reshape(n)
    return w, s, z


def check(bits, x, w, s, z, bias):
    op = P.linear_w8a16 if bits == 8 else P.linear_w4a16
    pack = P.pack_weight_int8 if bits == 8 else P.pack_weight_int4
    packed = pack(w.cuda())
    assert torch.equal(packed.cpu(), pack(w))  # the CPU's layout
    dev = lambda t: None if t is None else t.cuda()  # noqa: E731
    xc = x if x.is_cuda else x.cuda()
    got = op(xc, packed, s.cuda(), dev(z), dev(bias))
    again = op(xc, packed, s.cuda(), dev(z), dev(bias))
    x = x.cpu()
    assert torch.equal(got, again)  # no atomics: the same bits every call
    n, k = w.shape
    groups = s.numel() // n
    wd = w.double().reshape(n, groups, -1)
    if z is not None:
        wd = wd - z.double().reshape(n, groups, 1)
    wd = (wd * s.double().reshape(n, groups, 1)).reshape(n, k)
    xd = x.double().reshape(-1, k)
    want = xd @ wd.t() + (0 if bias is None else bias.double())
    terms = xd.abs() @ wd.abs().t() + (0 if bias is None else bias.double().abs())
    lim = 2 * (k + 4) * EPS32 * terms + 2 * ULP[x.dtype] * want.abs() + 1e-30
    if x.dtype != torch.float32 and xd.shape[0] >= 64:  # weights rounded to x's dtype, then cuBLAS
        lim = lim + ULP[x.dtype] * terms
    err = (got.cpu().double().reshape(want.shape) - want).abs()
    assert got.dtype == x.dtype and got.shape == (*x.shape[:-1], n)
    assert bool((err <= lim).all()), float((err - lim).max())


@pytest.mark.parametrize("bits", [8, 4])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("m", [1, 2, 3, 7, 16, 33, 63, 64, 100, 256, 257])
def test_rows_and_dtypes(bits, dtype, m):
    # bf16 / fp16: the tensor-core kernel below 64 rows (16 per grid slice); fp32: 16 rows; then
    # the dequantize + cuBLAS path
    w, s, z = make(bits, 37, 512, 64 if bits == 4 else None, zp=False, seed=m)
    x = torch.randn(m, 512).to(dtype)
    check(bits, x, w, s, z, torch.randn(37))


@pytest.mark.parametrize("bits", [8, 4])
@pytest.mark.parametrize("group", [None, 32, 64, 128, 256])
@pytest.mark.parametrize("zp", [False, True])
def test_groups_and_zero_points(bits, group, zp):
    w, s, z = make(bits, 4100, 1024, group, zp, seed=7)
    for m in (1, 5, 16):
        check(bits, torch.randn(m, 1024).to(torch.bfloat16), w, s, z, None)


@pytest.mark.parametrize("bits", [8, 4])
def test_long_k_several_splits_and_leading_dims(bits):
    w, s, z = make(bits, 64, 11008, 128, zp=True, seed=3)
    check(bits, torch.randn(2, 3, 11008), w, s, z, torch.randn(64))
    w, s, z = make(bits, 4096, 4096, None, zp=False, seed=4)
    check(bits, torch.randn(1, 4096).to(torch.bfloat16), w, s, z, None)


def rounded_weight(w, s, z, dtype):
    """The weight as dequantWeight writes it: (code - zp) * scale in fp32, rounded to dtype."""
    n, k = w.shape
    groups = s.numel() // n
    wd = w.float().reshape(n, groups, -1)
    if z is not None:
        wd = wd - z.float().reshape(n, groups, 1)
    return (wd * s.float().reshape(n, groups, 1)).reshape(n, k).to(dtype)


def gemm_on():
    return torch.cuda.get_device_capability()[0] >= 9


@pytest.mark.parametrize("bits,group,zp", [(8, None, False), (8, 64, True), (4, 128, False), (4, 32, True)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_many_rows_dequantize_then_cublas(bits, group, zp, dtype, monkeypatch):
    # Past the GEMVs' rows without the GEMM (fp32 x; bf16 / fp16 before Hopper or with
    # PT2Q_CUDA_WOQ_GEMM_MAX_ROWS=0; past 128 rows by default): the weight dequantized in x's
    # dtype, then F.linear, bit for bit the same as F.linear on the weight dequantized by torch
    # (fp32, rounded to nearest even).
    monkeypatch.setenv("PT2Q_CUDA_WOQ_GEMM_MAX_ROWS", "0")
    n, k = 72, 512
    w, s, z = make(bits, n, k, group, zp, seed=bits + k)
    b = torch.randn(n)
    for shape in ((64, k), (300, k), (2, 1100, k)):
        x = torch.randn(*shape).to(dtype)
        check(bits, x, w, s, z, b)
        op = P.linear_w8a16 if bits == 8 else P.linear_w4a16
        pack = P.pack_weight_int8 if bits == 8 else P.pack_weight_int4
        got = op(x.cuda(), pack(w.cuda()), s.cuda(), None if z is None else z.cuda(), b.cuda())
        wd = rounded_weight(w, s, z, dtype).cuda()
        assert torch.equal(got, torch.nn.functional.linear(x.cuda(), wd, b.to(dtype).cuda()))


def gemm_check(bits, x, w, s, z, bias, splits=None, monkeypatch=None):
    """The GEMM against the fp64 product of x and the rounded weight: fp32 summation in any order
    plus the final rounding (the weight's own rounding is the same on both sides)."""
    if splits is not None:
        monkeypatch.setenv("PT2Q_CUDA_WOQ_SPLITS", str(splits))
    op = P.linear_w8a16 if bits == 8 else P.linear_w4a16
    pack = P.pack_weight_int8 if bits == 8 else P.pack_weight_int4
    dev = lambda t: None if t is None else t.cuda()  # noqa: E731
    got = op(x.cuda(), pack(w.cuda()), s.cuda(), dev(z), dev(bias))
    assert torch.equal(got, op(x.cuda(), pack(w.cuda()), s.cuda(), dev(z), dev(bias)))  # deterministic
    wd = rounded_weight(w, s, z, x.dtype).double()
    xd = x.double().reshape(-1, w.shape[1])
    bd = 0 if bias is None else bias.to(x.dtype).double()
    want = xd @ wd.t() + bd
    terms = xd.abs() @ wd.abs().t() + (0 if bias is None else abs(bd))
    lim = 2 * (w.shape[1] + 4) * EPS32 * terms + ULP[x.dtype] * want.abs() + 1e-30
    err = (got.cpu().double().reshape(want.shape) - want).abs()
    assert got.dtype == x.dtype and got.shape == (*x.shape[:-1], w.shape[0])
    assert bool((err <= lim).all()), float((err - lim).max())
    return got


needs_gemm = pytest.mark.skipif("not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] < 9")


@pytest.fixture(params=["wgmma", "mma.sync"])
def gemm_all_rows(request, monkeypatch):
    """Each GEMM (wgmma, the H100's; mma.sync, other Hopper-class devices') for any number of
    rows (by default they stop at kWoqGemmMaxRows, where cuBLAS overtakes)."""
    monkeypatch.setenv("PT2Q_CUDA_WOQ_GEMM_MAX_ROWS", "1000000")
    monkeypatch.setenv("PT2Q_CUDA_WOQ_WGMMA", "1" if request.param == "wgmma" else "0")
    return monkeypatch


@needs_gemm
@pytest.mark.parametrize("bits,group,zp", [(8, None, False), (8, None, True), (8, 16, True), (8, 48, False),
                                           (4, None, True), (4, 32, False), (4, 96, True), (4, 128, False)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("splits", ["", "3"])
def test_gemm_identity_rows_give_the_rounded_weight_bit_for_bit(bits, group, zp, dtype, splits, gemm_all_rows):
    monkeypatch = gemm_all_rows
    # x = the identity: every output is one exact product, so y must be the weight exactly as
    # dequantWeight rounds it (codes, zero points, scales, nibble order and k renaming all seen).
    n, k = 200, 384
    w, s, z = make(bits, n, k, group, zp, seed=11 + bits)
    w[0], w[1] = -128 if bits == 8 else -8, 127 if bits == 8 else 7
    op = P.linear_w8a16 if bits == 8 else P.linear_w4a16
    pack = P.pack_weight_int8 if bits == 8 else P.pack_weight_int4
    x = torch.eye(k, dtype=dtype, device="cuda")
    monkeypatch.setenv("PT2Q_CUDA_WOQ_SPLITS", splits)  # "": the automatic split
    got = op(x, pack(w.cuda()), s.cuda(), None if z is None else z.cuda(), None)
    assert torch.equal(got.cpu(), rounded_weight(w, s, z, dtype).t().contiguous())


@needs_gemm
@pytest.mark.parametrize("bits,group,zp", [(4, 128, False), (4, 128, True), (4, 32, True), (4, None, False),
                                           (8, 64, True)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_gemm_scales_off_the_fast_decode(bits, group, zp, dtype, gemm_all_rows):
    # The int4 GEMM decodes by an exact fma trick that holds for |scale| <= 2^100 and |zp| <= 2^16;
    # other groups (zero, subnormal, huge, infinite and NaN scales, huge zero points), alone or
    # beside ordinary ones in a warpgroup, must still give dequantWeight's weight. x = the identity:
    # each output is one product, plus 0 * w terms that make a row with a non-finite weight NaN,
    # as in F.linear.
    n, k = 256, 512
    w, s, z = make(bits, n, k, group, zp, seed=5 + bits)
    flat = s.view(-1)
    odd = [0.0, 1e-40, 3e-39, 1e35, 5e31, float("inf"), float("nan"), -0.02, 2e-38]
    for i, v in enumerate(odd):
        flat[7 * i + 3] = v
    flat[100:110] = 1e-41  # whole groups of subnormal scales (rows 100-109 or their groups)
    if z is not None:
        z.view(-1)[::11] = 70000 * torch.tensor([1, -1]).repeat(z.numel())[: z.view(-1)[::11].numel()]
    op = P.linear_w8a16 if bits == 8 else P.linear_w4a16
    pack = P.pack_weight_int8 if bits == 8 else P.pack_weight_int4
    x = torch.eye(k, dtype=dtype)
    got = op(x.cuda(), pack(w.cuda()), s.cuda(), None if z is None else z.cuda(), None).cpu()
    want = torch.nn.functional.linear(x.float(), rounded_weight(w, s, z, dtype).float()).to(dtype)
    torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)


@needs_gemm
@pytest.mark.parametrize("bits,group,zp", [(8, None, False), (8, 64, True), (4, 128, False), (4, 32, True)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("m", [64, 100, 128, 129, 300, 2048])
def test_gemm_rows(bits, group, zp, dtype, m, gemm_all_rows):
    # odd N (a partial tile of 128 weight rows, a partial 4-row block), partial tiles of x
    w, s, z = make(bits, 203, 1024, group, zp, seed=m + bits)
    check(bits, torch.randn(m, 1024).to(dtype), w, s, z, torch.randn(203))
    gemm_check(bits, torch.randn(m, 1024).to(dtype), w, s, z, torch.randn(203))


@needs_gemm
@pytest.mark.parametrize("bits,k", [(8, 16), (8, 80), (8, 1040), (4, 32), (4, 96), (4, 1056)])
@pytest.mark.parametrize("splits", [1, 2, 3, 5, 8])
def test_gemm_splits_of_k_and_partial_spans(bits, k, splits, gemm_all_rows):
    monkeypatch = gemm_all_rows
    # K split over a cluster of 1 to 8 blocks, including splits with no span at all (k = 16)
    w, s, z = make(bits, 130, k, None, zp=True, seed=k + splits)
    x = (torch.randn(96, k) * 3).to(torch.bfloat16)
    gemm_check(bits, x, w, s, z, torch.randn(130), splits=splits, monkeypatch=monkeypatch)


@needs_gemm
def test_gemm_llm_shape_and_leading_dims(gemm_all_rows):
    # the 4096-wide layer at 128 rows, K split automatically
    w, s, z = make(4, 4096, 4096, 128, zp=False, seed=1)
    gemm_check(4, torch.randn(2, 64, 4096).to(torch.bfloat16), w, s, z, None)
    w, s, z = make(8, 1000, 4096, None, zp=False, seed=2)
    gemm_check(8, torch.randn(128, 4096).to(torch.float16) / 8, w, s, z, torch.randn(1000))


@needs_gemm
def test_gemm_against_dequantize_then_cublas(gemm_all_rows):
    monkeypatch = gemm_all_rows
    # The two paths differ only in the order of the fp32 sums.
    w, s, z = make(4, 300, 2048, 64, zp=True, seed=5)
    x = torch.randn(256, 2048).to(torch.bfloat16).cuda()
    args = (P.pack_weight_int4(w.cuda()), s.cuda(), z.cuda(), torch.randn(300).cuda())
    fused = P.linear_w4a16(x, *args).double()
    monkeypatch.setenv("PT2Q_CUDA_WOQ_GEMM_MAX_ROWS", "0")
    ref = P.linear_w4a16(x, *args).double()
    wd = rounded_weight(w, s, z, torch.bfloat16).double().cuda()
    terms = x.double().abs() @ wd.abs().t() + args[3].to(torch.bfloat16).double().abs()
    assert bool(((fused - ref).abs() <= 4 * 2048 * EPS32 * terms + 2 * ULP[torch.bfloat16] * ref.abs()).all())


def test_gemm_splits_setting_is_checked(gemm_all_rows):
    monkeypatch = gemm_all_rows
    w, s, _ = make(8, 8, 64, None, zp=False, seed=1)
    monkeypatch.setenv("PT2Q_CUDA_WOQ_SPLITS", "9")
    x = torch.randn(64, 64, device="cuda", dtype=torch.bfloat16)
    if not gemm_on():
        pytest.skip("the GEMM needs compute capability 9.0")
    with pytest.raises(RuntimeError, match="PT2Q_CUDA_WOQ_SPLITS.*1 to 8, got 9"):
        P.linear_w8a16(x, P.pack_weight_int8(w.cuda()), s.cuda())


def test_reference_path_for_unaligned_or_ragged_inputs():
    w, s, z = make(8, 20, 100, None, zp=False, seed=5)  # K not a multiple of 16
    check(8, torch.randn(3, 100), w, s, z, None)
    w, s, z = make(8, 20, 256, None, zp=False, seed=6)
    x = torch.randn(3 * 256 + 1, device="cuda")[1:].view(3, 256)
    assert x.data_ptr() % 16 != 0  # 4 bytes past a 16-byte boundary: the reference path
    check(8, x, w, s, z, None)


def test_errors_name_the_argument():
    w, s, _ = make(8, 8, 64, None, zp=False, seed=1)
    packed = P.pack_weight_int8(w.cuda())
    with pytest.raises(ValueError, match="scales"):
        P.linear_w8a16(torch.randn(2, 64, device="cuda"), packed, torch.rand(9, device="cuda"))
    with pytest.raises(ValueError, match="device|cuda|cpu"):
        P.linear_w8a16(torch.randn(2, 64, device="cuda"), packed, torch.rand(8))


@pytest.mark.parametrize("bits,group", [(8, 16), (8, 32), (8, 48), (8, 64), (4, 32), (4, 64), (4, 96), (4, 128)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("zp", [False, True])
def test_tensor_core_spans(bits, group, dtype, zp):
    # Each group size picks the widest span (16, 8 or 4 bytes per lane) that divides it.
    w, s, z = make(bits, 53, group * 12, group, zp, seed=group + bits)
    for m in (1, 8, 9, 16):
        check(bits, (torch.randn(m, group * 12) * 4).to(dtype), w, s, z, torch.randn(53))


def assert_launch(bits, x, w, s, z, settings):
    """The tensor-core GEMV ran as woqMma<bits, T, settings, ...> (W, NT, TPW, UNR, MINB), by the
    profiler's kernel names; T is an enum, spelled as the profiler demangles it."""
    op = P.linear_w8a16 if bits == 8 else P.linear_w4a16
    packed = (P.pack_weight_int8 if bits == 8 else P.pack_weight_int4)(w.cuda())
    zc = None if z is None else z.cuda()
    names = cuda_kernel_names(lambda: op(x.cuda(), packed, s.cuda(), zc, None))
    want = rf"woqMma<{bits}, [^,]+, {settings},"
    assert any(re.search(want, name) for name in names), (want, names)


@pytest.mark.parametrize("group,zp", [(None, False), (None, True), (128, False), (256, True)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_tensor_core_two_tiles_per_warp(group, zp, dtype):
    # int4 weights of at least 4 tiles per multiprocessor at 9 to 16 rows of x: a warp owns two
    # 16-row tiles. 20 rows past the 4-per-multiprocessor mark leave the last warp one real tile
    # and a partial one; 33 rows are three 16-row slices of x, the last of one row.
    tiles = 4 * torch.cuda.get_device_properties(0).multi_processor_count
    n, k = 16 * tiles + 20, 512
    w, s, z = make(4, n, k, group, zp, seed=n + (group or 0))
    bias = torch.randn(n)
    for m in (9, 16, 33):
        check(4, torch.randn(m, k).to(dtype), w, s, z, bias)
    assert_launch(4, torch.randn(16, k).to(dtype), w, s, z, "16, 2, 2, 1, 2")  # two x tiles, two weight tiles a warp


@pytest.mark.parametrize("bits,group,m,settings", [
    (4, 128, 1, "16, 1, 1, 1, 4"),  # int4, 16-byte spans, up to 8 rows: 1 span in flight, 4 blocks
    (4, 128, 8, "16, 1, 1, 1, 4"),
    (4, None, 3, "16, 1, 1, 1, 4"),
    (4, 32, 1, "4, 1, 1, 4, 3"),    # 4-byte spans keep 4 spans, 3 blocks
    (8, None, 1, "16, 1, 1, 4, 3"),  # int8: 4 spans, 3 blocks
    (8, 64, 16, "16, 2, 1, 2, 2"),  # two x tiles: 2 spans, 2 blocks
    (4, 128, 16, "16, 2, 1, 2, 2"),  # few tiles: one per warp
])
def test_tensor_core_launch_settings(bits, group, m, settings):
    # woqMma<BITS, T, W, NT, TPW, UNR, MINB, ...>: the settings kept from the H100 measurements
    # (kernels/cuda/linear_woq_mma_kernels.cu, launchMma), after the result's check.
    w, s, z = make(bits, 72, 512, group, zp=False, seed=m + bits)
    x = torch.randn(m, 512).to(torch.bfloat16)
    check(bits, x, w, s, z, None)
    assert_launch(bits, x, w, s, z, settings)


def test_tensor_core_int8_four_blocks_where_they_save_a_wave():
    # int8, one x tile: 3.5 tiles per multiprocessor (one block each, K split over its 8 warps) are
    # 2 waves of blocks at three per multiprocessor and 1 at four: four blocks, 2 spans in flight.
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    n, k = 16 * ((7 * sms + 1) // 2), 2048
    w, s, z = make(8, n, k, None, zp=False, seed=sms)
    x = torch.randn(3, k).to(torch.bfloat16)
    check(8, x, w, s, z, None)
    assert_launch(8, x, w, s, z, "16, 1, 1, 2, 4")


@pytest.mark.parametrize("bits,k", [(8, 80), (8, 16), (4, 96), (4, 32)])
@pytest.mark.parametrize("zp", [False, True])
def test_tensor_core_k_not_a_whole_number_of_spans(bits, k, zp):
    w, s, z = make(bits, 29, k, None, zp, seed=k)
    for m in (1, 3, 16):
        check(bits, torch.randn(m, k).to(torch.bfloat16), w, s, z, None)


def test_tensor_core_extremes():
    # Codes at both ends of the range against x at bf16's large and small binades.
    n, k = 40, 256
    w = torch.full((n, k), -128, dtype=torch.int8)
    w[1::2] = 127
    s = torch.rand(n) + 0.5
    x = torch.randn(16, k) * torch.tensor([2.0 ** e for e in range(-60, 60, 8)] + [1.0]).reshape(16, 1)
    check(8, x.to(torch.bfloat16), w, s, None, None)
    w4 = torch.full((n, k), -8, dtype=torch.int8)
    w4[::3] = 7
    # fp16: rows from 2^-10 to 2^5 and small scales, so that no output leaves fp16's normal range
    x16 = torch.randn(16, k) * torch.tensor([2.0 ** e for e in range(-10, 6)]).reshape(16, 1)
    s16 = (s * 2.0 ** -10).reshape(n, 1).expand(n, 4).contiguous()
    check(4, x16.to(torch.float16), w4, s16, None, None)


@pytest.mark.parametrize("bits", [8, 4])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_opcheck(bits, dtype):
    from torch.library import opcheck

    w, s, z = make(bits, 24, 256, 64, zp=True, seed=9)
    pack = P.pack_weight_int8 if bits == 8 else P.pack_weight_int4
    op = P.linear_w8a16 if bits == 8 else P.linear_w4a16
    args = (torch.randn(3, 256, device="cuda", dtype=dtype), pack(w.cuda()), s.cuda(), z.cuda(),
            torch.randn(24, device="cuda"))
    opcheck(op.default, args)
