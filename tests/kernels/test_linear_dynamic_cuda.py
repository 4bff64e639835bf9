"""quantize_per_token_int8 and linear_w8a8 / linear_w4a8 on CUDA. The per-token codes, scales and
zero points bit for bit against the CPU kernel and torch's quantized_decomposed pair on random and
adversarial rows; the linears (the int8 tensor-core GEMV; the reference path for what it does not take)
against an fp64 product of the CPU's codes and the dequantized weight, within the bound of fp32
scaling per span, and against the CPU kernel; per-channel and grouped scales, zero points, bias,
fp32 / bf16 / fp16 x, odd N, K with a partial span, more than 16 rows (grid slices), the
GEMM from 96 rows on (both weight tile widths, partial 128-row tiles, N past its weight tiles, K past its 128-value
stages, 2048 rows with adversarial ones), the per-tensor mode on torch's codes,
deterministic; a non-finite row; opcheck.
Runs on the GPU machine; skipped elsewhere."""

import pytest
import torch
from torch.library import opcheck

import pt2q  # noqa: F401
from tests.kernels.test_linear_dynamic import adversarial_rows, torch_per_tensor_chain, torch_per_token
from tests.kernels.test_linear_woq_cuda import make
from tests.cuda_support import cuda_kernel_names, needs_cuda_kernel

pytestmark = [pytest.mark.cuda, needs_cuda_kernel("pt2q::linear_w8a8")]
P = torch.ops.pt2q
EPS32 = 2.0 ** -24
ULP = {torch.float32: 0.0, torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11}


@pytest.mark.parametrize("k", [1, 7, 16, 100, 808, 4096, 4099])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("aligned", [True, False])
def test_per_token_codes_bit_exact(k, dtype, aligned):
    """k a multiple of 8 with x 16-byte aligned takes the 8-values-per-load kernel, the rest
    (and x one element past an aligned address) the one-value kernel."""
    g = torch.Generator().manual_seed(k)
    x = torch.cat([torch.randn(40, k, generator=g) * torch.logspace(-3, 3, 40).unsqueeze(1), adversarial_rows(k, g)])
    if dtype != torch.float32:
        x = x.clamp(-6e4, 6e4).to(dtype)
    xc = x.cuda()
    if not aligned:
        xc = torch.empty(x.numel() + 1, dtype=dtype, device="cuda")[1:].view(x.shape).copy_(x)
    got = P.quantize_per_token_int8(xc)
    cpu = P.quantize_per_token_int8(x)
    want = torch_per_token(x.float())
    for a, b, c in zip(got, cpu, want):
        assert a.is_cuda and a.dtype == b.dtype and a.shape == b.shape
        assert torch.equal(a.cpu(), b) and torch.equal(b, c)


def test_per_token_non_finite_row_is_an_error_naming_it():
    x = torch.randn(5, 64, device="cuda")
    x[3, 7] = float("inf")
    with pytest.raises(ValueError, match="row 3"):
        P.quantize_per_token_int8(x)


def check(bits, x, w, s, z, bias, eps=None):
    """With eps: the per-tensor mode, against torch's choose_qparams.tensor -> quantize_per_tensor
    codes of x in its own dtype."""
    op = P.linear_w8a8 if bits == 8 else P.linear_w4a8
    pack = P.pack_weight_int8 if bits == 8 else P.pack_weight_int4
    packed = pack(w.cuda())
    dev = lambda t: None if t is None else t.cuda()  # noqa: E731
    xc = x.cuda()
    got = op(xc, packed, s.cuda(), dev(z), dev(bias), eps)
    assert torch.equal(got, op(xc, packed, s.cuda(), dev(z), dev(bias), eps))  # no atomics
    n, k = w.shape
    groups = s.numel() // n
    wd = w.double().reshape(n, groups, -1)
    if z is not None:
        wd = wd - z.double().reshape(n, groups, 1)
    wd = (wd * s.double().reshape(n, groups, 1)).reshape(n, k)
    if eps is None:
        q, sx, zx = P.quantize_per_token_int8(x.reshape(-1, k))  # the CPU's codes
        xd = (q.double() - zx.double()) * sx
    else:
        xd = torch_per_tensor_chain(x.reshape(-1, k), eps)
    want = xd @ wd.t() + (0 if bias is None else bias.double())
    terms = xd.abs() @ wd.abs().t() + (0 if bias is None else bias.double().abs())
    lim = 2 * (k + 8) * EPS32 * terms + 2 * ULP[x.dtype] * want.abs() + 1e-30
    assert got.dtype == x.dtype and got.shape == (*x.shape[:-1], n)
    err = (got.cpu().double().reshape(want.shape) - want).abs()
    assert bool((err <= lim).all()), float((err - lim).max())
    cpu = op(x, pack(w), s, z, bias, eps).double().reshape(want.shape)
    assert bool(((got.cpu().double().reshape(want.shape) - cpu).abs() <= 2 * lim).all())


@pytest.mark.parametrize("bits", [8, 4])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("m", [1, 2, 7, 8, 9, 16, 33, 63, 64, 100, 130])
def test_rows_and_dtypes(bits, dtype, m):
    w, s, z = make(bits, 37, 512, 64 if bits == 4 else None, zp=False, seed=m)
    check(bits, (torch.randn(m, 512) * 3).to(dtype), w, s, z, torch.randn(37))


@pytest.mark.parametrize("bits,group", [(8, None), (8, 32), (8, 64), (8, 96), (8, 256), (4, None), (4, 32),
                                        (4, 64), (4, 96), (4, 128), (4, 256)])
@pytest.mark.parametrize("zp", [False, True])
def test_groups_and_zero_points(bits, group, zp):
    k = 768 if group in (96, 256) else 1024
    w, s, z = make(bits, 4100, k, group, zp, seed=7)
    for m in (1, 5, 16):
        check(bits, torch.randn(m, k).to(torch.bfloat16), w, s, z, None)


@pytest.mark.parametrize("bits,k", [(8, 80), (8, 16), (4, 96), (4, 32)])
@pytest.mark.parametrize("zp", [False, True])
def test_k_not_a_whole_number_of_spans(bits, k, zp):
    w, s, z = make(bits, 29, k, None, zp, seed=k)
    for m in (1, 3, 16):
        check(bits, torch.randn(m, k), w, s, z, torch.randn(29))


@pytest.mark.parametrize("bits", [8, 4])
def test_long_k_several_splits_leading_dims_and_extreme_rows(bits):
    w, s, z = make(bits, 64, 11008, 128, zp=True, seed=3)
    check(bits, torch.randn(2, 3, 11008), w, s, z, torch.randn(64))
    w, s, z = make(bits, 4096, 4096, None, zp=False, seed=4)
    g = torch.Generator().manual_seed(5)
    check(bits, adversarial_rows(4096, g)[:12], w, s, z, None)


# K per layout for the GEMM tests: a partial 128-value stage wherever the groups allow one.
GEMM_K = {None: {8: 1040, 4: 1056}, 32: 1056, 64: 1088, 96: 1056, 128: 1024, 256: 768}


@pytest.mark.parametrize("bits,group", [(8, None), (8, 32), (8, 64), (8, 96), (8, 256), (4, None), (4, 32),
                                        (4, 64), (4, 96), (4, 128), (4, 256)])
@pytest.mark.parametrize("zp", [False, True])
def test_gemm_groups_zero_points_and_tile_edges(bits, group, zp):
    """From 96 rows on, the GEMM: 128 rows of x and 128 or 256 weight rows per block, so m = 129
    and 300 end in partial tiles, n = 300 ends inside a weight tile, and K ends inside a stage."""
    k = GEMM_K[group][bits] if group is None else GEMM_K[group]
    w, s, z = make(bits, 300, k, group, zp, seed=11)
    for m in (96, 129, 300):
        check(bits, torch.randn(m, k).to(torch.bfloat16), w, s, z, torch.randn(300) if m == 129 else None)


@pytest.mark.parametrize("bits,group,zp", [(8, None, False), (8, 64, True), (4, 128, False), (4, None, True)])
def test_gemm_2048_rows_with_adversarial_rows(bits, group, zp):
    w, s, z = make(bits, 520, 4096, group, zp, seed=12)
    g = torch.Generator().manual_seed(13)
    x = torch.randn(2048, 4096, generator=g) * torch.logspace(-2, 2, 2048).unsqueeze(1)
    adv = adversarial_rows(4096, g)
    x[1000:1000 + adv.shape[0]] = adv
    check(bits, x, w, s, z, torch.randn(520))


@pytest.mark.parametrize("bits,group,zp", [(8, None, False), (8, None, True), (8, 32, True), (4, 128, True),
                                           (4, 64, False)])
def test_gemm_wide_weight_tiles(bits, group, zp):
    """A block for every multiprocessor at 256 weight rows per block selects those (two 16-row tiles
    per warp); m and n end inside their tiles."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    m = 128 * -(-sms // 16) + 6  # 16 tiles of 256 weight rows times ceil(sms / 16) + 1 row tiles
    k = 1024 if group is not None else GEMM_K[None][bits]
    w, s, z = make(bits, 3850, k, group, zp, seed=14)
    check(bits, torch.randn(m, k).to(torch.float16), w, s, z, torch.randn(3850))


@pytest.mark.parametrize("m,n,wgmma", [(256, 4096, True), (256, 4100, False), (511, 4100, False),
                                       (512, 4100, True)])
def test_w8a8_takes_the_wgmma_gemm_from_256_rows_or_512_past_4096_outputs(m, n, wgmma):
    """Hopper's wgmma GEMM (int8 per channel, no zero points) from 256 rows of x, or 512 where the
    weight has more than 4096 rows (its unpacking pass weighs more there); the results pass the
    same bound either way (the GEMMs agree bit for bit: tools/gpu/wgmma_probe.cu)."""
    w, s, _ = make(8, n, 64, None, zp=False, seed=m + n)
    x = torch.randn(m, 64)
    check(8, x, w, s, None, torch.randn(n))
    packed = P.pack_weight_int8(w.cuda())
    names = cuda_kernel_names(lambda: P.linear_w8a8(x.cuda(), packed, s.cuda()))
    assert any("dynWgmma" in name for name in names) == wgmma


def test_reference_path_for_int8_groups_of_16():
    w, s, z = make(8, 20, 64, 16, zp=True, seed=5)
    check(8, torch.randn(3, 64), w, s, z, None)
    check(8, torch.randn(3, 64), w, s, z, None, eps=2.0 ** -12)


@pytest.mark.parametrize("bits,group", [(8, None), (4, 64)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("m", [1, 7, 33])
def test_per_tensor_mode_runs_the_gemv_on_torchs_codes(bits, group, dtype, m):
    """XNNPACK's dynamic chain (per_tensor_eps): the scale chosen in x's dtype as torch does, one
    code off moves the output past the bound; zero points, bias, a constant and a one-signed x."""
    w, s, z = make(bits, 37, 512, group, zp=bits == 4, seed=m)
    for x in (torch.randn(m, 512) * 3, torch.randn(m, 512).abs() + 1, torch.full((m, 512), -0.5)):
        for eps in (2.0 ** -12, torch.finfo(torch.float32).eps):
            check(bits, x.to(dtype), w, s, z, torch.randn(37), eps=eps)


def test_per_tensor_mode_non_finite_input_is_an_error():
    w, s, _ = make(8, 40, 256, None, zp=False, seed=8)
    x = torch.randn(4, 256, device="cuda")
    x[2, 5] = float("inf")
    with pytest.raises(ValueError, match=r"linear_w8a8: input row 2 .* holds NaN or Inf"):
        P.linear_w8a8(x, P.pack_weight_int8(w.cuda()), s.cuda(), None, None, 2.0 ** -12)


@pytest.mark.parametrize("m", [4, 200])
def test_non_finite_row_gives_nan_outputs_without_a_host_sync(m):
    # On CUDA the GEMV and GEMM paths do not raise (that would need a sync per call): the row is NaN.
    w, s, _ = make(8, 40, 256, None, zp=False, seed=8)
    x = torch.randn(m, 256, device="cuda")
    x[2, 5] = float("nan")
    y = P.linear_w8a8(x, P.pack_weight_int8(w.cuda()), s.cuda())
    others = [i for i in range(m) if i != 2]
    assert bool(y[2].isnan().all()) and bool(y[others].isfinite().all())


@pytest.mark.parametrize("bits", [8, 4])
def test_opcheck(bits):
    w, s, z = make(bits, 24, 256, 64, zp=True, seed=9)
    pack = P.pack_weight_int8 if bits == 8 else P.pack_weight_int4
    op = P.linear_w8a8 if bits == 8 else P.linear_w4a8
    for m in (3, 130):
        args = (torch.randn(m, 256, device="cuda", dtype=torch.bfloat16), pack(w.cuda()), s.cuda(), z.cuda(),
                torch.randn(24, device="cuda"))
        opcheck(op.default, args)
    opcheck(P.quantize_per_token_int8.default, (torch.randn(3, 256, device="cuda"),))
