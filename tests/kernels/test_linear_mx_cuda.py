"""pt2q.linear_mx on CUDA (the decode GEMVs: CUDA cores for one row, tensor cores for 2 to 16
rows of bf16 / fp16 x, CUDA cores up to 8 rows otherwise; the wgmma GEMM for 17 to 128 rows of
bf16 x (256 for weights of 8192 rows or more); else mx_dequantize's CUDA kernel to bf16 and cuBLAS
with an fp32 result, fp16 / fp32 x as exact bf16 pieces (fp32 matmul for wider codes); x through
mx_fake_quantize's CUDA kernel) against the CPU reference on the same inputs, within the bound of
fp32 summation in any order: every weight format, ragged K, block sizes, input formats, bias,
bf16 / fp16 x, NaN blocks, extreme scales, unaligned storage; deterministic; which path ran;
opcheck. Runs on the GPU machine; skipped elsewhere."""

import re

import pytest
import torch
from torch.library import opcheck

import pt2q  # noqa: F401
from tests.kernels.test_linear_mx import EPS32, FORMATS, REF, ULP, make
from tests.cuda_support import cuda_kernel_names, needs_cuda_kernel

pytestmark = [pytest.mark.cuda, needs_cuda_kernel("pt2q::linear_mx")]
P = torch.ops.pt2q


def check(x, codes, scales, fmt, block, b, x_fmt=None, x_block=32, on_gpu=None):
    """on_gpu: (x, codes) already on the GPU (views), run in place of copies of x and codes."""
    dev = lambda t: None if t is None else t.cuda()  # noqa: E731
    xg, cg = on_gpu if on_gpu is not None else (x.cuda(), codes.cuda())
    args = (cg, scales.cuda(), fmt, block, dev(b), x_fmt, x_block)
    got = P.linear_mx(xg, *args)
    bits = torch.int32 if got.dtype == torch.float32 else torch.int16
    assert torch.equal(got.view(bits), P.linear_mx(xg, *args).view(bits))  # same bits, NaN included
    want = REF.linear_mx(x, codes, scales, fmt, block, b, x_fmt, x_block)
    assert got.is_cuda and got.dtype == x.dtype and got.shape == want.shape
    k = x.shape[-1]
    w = REF.mx_dequantize(codes, scales, fmt, block, -1, k)
    xq = x if x_fmt is None else REF.mx_fake_quantize(x, x_fmt, x_block)
    terms = xq.float().abs().reshape(-1, k) @ w.abs().t() + (0 if b is None else b.abs())
    lim = 2 * (k + 2) * EPS32 * terms + ULP[x.dtype] * 2 * want.float().abs().reshape(terms.shape) + 1e-30
    g = got.cpu().float().reshape(terms.shape)
    ok = ((g - want.float().reshape(terms.shape)).abs() <= lim) | (g.isnan() & want.isnan().reshape(terms.shape))
    assert bool(ok.all())


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("n,k,block", [(37, 256, 32), (9, 100, 32), (16, 128, 16), (5, 64, 0), (13, 96, 96)])
def test_matches_cpu_reference(fmt, n, k, block):
    for m in (1, 5, 33):
        x, c, s, b = make(n, k, (m,), fmt, block, seed=m + n)
        for x_fmt in (None, "int8", "fp4_e2m1"):
            check(x, c, s, fmt, block, b, x_fmt)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_half_inputs_leading_dims_and_nan_blocks(dtype):
    x, c, s, b = make(24, 128, (2, 3), "fp8_e4m3", 32, seed=3, dtype=dtype)
    s[5, 1] = 255  # a NaN block of the weight: NaN in output column 5
    check(x, c, s, "fp8_e4m3", 32, b, "int8")


def test_opcheck():
    x, c, s, b = make(16, 64, (3,), "int8", 32, seed=4)
    opcheck(P.linear_mx.default, (x.cuda(), c.cuda(), s.cuda(), "int8", 32, b.cuda(), "fp4_e2m1", 32))


GEMV_FORMATS = [f for f in FORMATS if f != "int12"]  # codes of at most 8 bits
MMA_FORMATS = ["int8", "fp8_e4m3", "fp8_e5m2", "fp4_e2m1", "int4"]  # byte and 4-bit codes


def path(fn):
    """Which kernel fn() ran, by the profiler's kernel names: "mma" (linear_mx_mma_kernels.cu),
    "gemv" (linear_mx_cuda_kernels.cu), "wgmma" (linear_mx_wgmma_kernels.cu), "pieces" (fp16 / fp32
    x as bf16 pieces for cuBLAS, bf16_pieces_kernels.cu) or "dequantize"
    (skips the test under compute-sanitizer: cuda_kernel_names)."""
    names = cuda_kernel_names(fn)
    if any("bf16PiecesKernel" in n for n in names):
        return "pieces"
    if any("linearMxMmaKernel" in n for n in names):
        return "mma"
    if any("mxWgmma" in n for n in names):
        return "wgmma"
    return "gemv" if any("linearMxGemvKernel" in n for n in names) else "dequantize"


@pytest.mark.parametrize("fmt", GEMV_FORMATS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_gemv_rows_blocks_and_dtypes(fmt, dtype):
    """The decode GEMVs on the layouts they read, against the CPU reference: CUDA cores for one
    row, tensor cores for 2 to 16 rows of bf16 / fp16 x with byte or 4-bit codes (partial row
    tiles, K split over 1 to 8 warps, blocks of 32 to 4096 codes), CUDA cores otherwise up to 8
    rows; more rows take the dequantize path and agree too."""
    for n, k, block in [(300, 512, 64), (37, 256, 0), (1, 128, 128), (9, 4096, 32)]:
        for m in (1, 2, 7, 8, 9, 16, 17):
            x, c, s, b = make(n, k, (m,), fmt, block, seed=m * 7 + n, dtype=dtype)
            check(x, c, s, fmt, block, b if m % 2 else None, "int8" if m == 7 else None)
    # fp8_e5m2's top-binade codes decode past fp16's range: its fp16 table is not exact
    tensor_cores = dtype != torch.float32 and fmt in MMA_FORMATS and (fmt, dtype) != ("fp8_e5m2", torch.float16)
    gemm = dtype == torch.bfloat16 and fmt in MMA_FORMATS
    other = "dequantize" if dtype == torch.bfloat16 else "pieces"  # the bf16 weight for cuBLAS
    for m, want in [(1, "gemv"), (2, "mma" if tensor_cores else "gemv"), (8, "mma" if tensor_cores else "gemv"),
                    (9, "mma" if tensor_cores else other), (16, "mma" if tensor_cores else other),
                    (17, "wgmma" if gemm else other)]:
        x, c, s, b = make(300, 512, (m,), fmt, 64, dtype=dtype)
        assert path(lambda: P.linear_mx(x.cuda(), c.cuda(), s.cuda(), fmt, 64, b.cuda())) == want, m


@pytest.mark.parametrize("fmt", ["fp8_e4m3", "fp4_e2m1", "int8", "fp6_e3m2"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("m", [3, 40])
def test_extreme_scales_and_nan_blocks(fmt, dtype, m):
    """Scale bytes 0 (2^-127: subnormal weights; below bf16's normal range in the GEMM), 1, 200 and
    255 (NaN: the column is NaN), and a weight row of zero codes, through either GEMV (3 rows) or
    the GEMM (40 rows of bf16 x); same bits on a second call."""
    x, c, s, b = make(64, 256, (m,), fmt, 32, seed=11, dtype=dtype)
    s[0, :] = 0
    s[1, 2] = 1
    s[2, :] = 200
    s[3, 5] = 255
    c[4].zero_()
    check(x, c, s, fmt, 32, b)
    y = P.linear_mx(x.cuda(), c.cuda(), s.cuda(), fmt, 32, None).cpu()
    assert bool(y[:, 3].isnan().all()) and not bool(y[:, [0, 1, 2, 4]].isnan().any())
    assert bool((y[:, 4] == 0).all())
    wide = dtype != torch.float32 and fmt in MMA_FORMATS
    want = ("mma" if wide else "gemv") if m == 3 else ("wgmma" if wide else "pieces" if dtype == torch.float32 else
                                                       "dequantize")
    assert path(lambda: P.linear_mx(x.cuda(), c.cuda(), s.cuda(), fmt, 32, b.cuda())) == want


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_gemv_unaligned_storage_takes_the_other_path(dtype):
    """Codes or x that do not start on an aligned boundary (views) are read by the dequantize
    path, with the same result as an aligned copy within fp32 summation."""
    x, c, s, b = make(40, 256, (2,), "fp8_e4m3", 32, seed=5, dtype=dtype)
    cbig = torch.zeros(40 * 256 + 1, dtype=torch.uint8, device="cuda")
    cbig[1:] = c.view(torch.uint8).reshape(-1).cuda()
    cv = cbig[1:].view(c.dtype).view(40, 256)  # 1 byte past an allocation's start
    xbig = torch.zeros(2 * 256 + 1, device="cuda", dtype=dtype)
    xbig[1:] = x.reshape(-1).cuda()
    xv = xbig[1:].view(2, 256)  # one element past
    assert cv.data_ptr() % 4 != 0 and xv.data_ptr() % 16 != 0
    for xg, cg in [(xv, c.cuda()), (x.cuda(), cv)]:
        check(x, c, s, "fp8_e4m3", 32, b, on_gpu=(xg, cg))
    for xg, cg in [(xv, c.cuda()), (x.cuda(), cv)]:
        want = "pieces" if dtype == torch.float32 else "dequantize"  # the bf16 weight for cuBLAS
        assert path(lambda: P.linear_mx(xg, cg, s.cuda(), "fp8_e4m3", 32, b.cuda())) == want


def bf16_mx(n, k, m, fmt, block, seed, scale_lo=100, scale_hi=150):
    """bf16 x [m, k] and an MX weight [n, k] of random codes (every code a format stores) and scale
    bytes in [scale_lo, scale_hi]."""
    g = torch.Generator().manual_seed(seed)
    codes, scales = P.mx_quantize(torch.randn(n, k, generator=g), fmt, block)
    raw = torch.randint(0, 256, codes.view(torch.uint8).shape, generator=g, dtype=torch.uint8)
    if fmt == "fp8_e4m3":
        raw = torch.where((raw & 0x7F) == 0x7F, raw ^ 1, raw)  # no NaN codes
    if fmt == "fp8_e5m2":
        raw = torch.where((raw & 0x7C) == 0x7C, raw & 0xF3, raw)  # no Inf / NaN codes
    codes = raw.view(codes.dtype)
    scales = torch.randint(scale_lo, scale_hi + 1, scales.shape, generator=g, dtype=torch.uint8)
    x = (torch.randn(m, k, generator=g) * 3).to(torch.bfloat16)
    return x, codes, scales


@pytest.mark.parametrize("fmt", MMA_FORMATS)
def test_gemm_decodes_every_weight_value_exactly(monkeypatch, fmt):
    """One-hot rows of x pick single weight columns: y is then the weight value itself (a sum that
    starts at +0 turns -0 into +0), which the GEMM must give bit for bit as a bf16 (every code,
    blocks of 16 to the whole axis, scales of 2^-27 to 2^23, partial tiles of weight rows and x
    rows, a partial last stage of K). Byte codes: the arithmetic decode (MXINT8, MXFP8) and the
    table give the same bits, on one-hot and on random x."""
    monkeypatch.setenv("PT2Q_CUDA_LINEAR_MX_GEMM_MAX_ROWS", "256")  # 200 rows: two tiles of x
    for n, k, block, m in [(130, 96, 16, 96), (300, 512, 32, 128), (64, 256, 0, 200), (200, 1024, 128, 17)]:
        xr, c, s = bf16_mx(n, k, m, fmt, block, seed=n + m)
        cols = torch.randperm(k, generator=torch.Generator().manual_seed(m))[:m] if m <= k else torch.arange(m) % k
        x = torch.zeros(m, k, dtype=torch.bfloat16)
        x[torch.arange(m), cols] = 1
        w = (REF.mx_dequantize(c, s, fmt, block, -1, k) + 0.0).to(torch.bfloat16)
        want = w[:, cols].t().contiguous().view(torch.int16)
        for table in ("0", "1"):
            monkeypatch.setenv("PT2Q_CUDA_LINEAR_MX_TABLE", table)
            got = P.linear_mx(x.cuda(), c.cuda(), s.cuda(), fmt, block, None).cpu()
            assert torch.equal(got.view(torch.int16), want), (n, k, block, m, table)
        assert path(lambda: P.linear_mx(x.cuda(), c.cuda(), s.cuda(), fmt, block, None)) == "wgmma"
        ys = []
        for table in ("0", "1"):
            monkeypatch.setenv("PT2Q_CUDA_LINEAR_MX_TABLE", table)
            ys.append(P.linear_mx(xr.cuda(), c.cuda(), s.cuda(), fmt, block, None).view(torch.int16))
        assert torch.equal(ys[0], ys[1])


@pytest.mark.parametrize("fmt", MMA_FORMATS)
def test_gemm_matches_cpu_reference(fmt):
    """bf16 x of 17 to 128 rows through the wgmma GEMM (256 through it or the dequantize path by
    the weight's rows; 257 and 300 rows through the bf16 dequantize path) against the CPU
    reference, with and without bias, input formats, leading dims."""
    for n, k, block in [(300, 512, 64), (130, 96, 32), (37, 4096, 0), (256, 1024, 16), (129, 2048, 128)]:
        for m in (17, 33, 128, 256):
            x, c, s, b = make(n, k, (m,), fmt, block, seed=m * 3 + n, dtype=torch.bfloat16)
            check(x, c, s, fmt, block, b if m % 2 else None, "int8" if m == 33 else None)
    x, c, s, b = make(200, 256, (3, 40), fmt, 32, seed=9, dtype=torch.bfloat16)
    check(x, c, s, fmt, 32, b)
    for m in (257, 300):
        x, c, s, b = make(100, 256, (m,), fmt, 32, seed=m, dtype=torch.bfloat16)
        check(x, c, s, fmt, 32, b.to(torch.bfloat16))
        check(x, c, s, fmt, 32, None)


@pytest.mark.parametrize("splits", [1, 2, 4, 8])
def test_gemm_splits_of_k(monkeypatch, splits):
    """K split over 1 to 8 blocks of a cluster (forced), including splits left without stages:
    each within the reference's bound, and the same bits on a second call."""
    monkeypatch.setenv("PT2Q_CUDA_LINEAR_MX_SPLITS", str(splits))
    monkeypatch.setenv("PT2Q_CUDA_LINEAR_MX_GEMM_MAX_ROWS", "256")  # 130 rows: two tiles of x
    for fmt in ("fp4_e2m1", "fp8_e4m3"):
        for n, k, m in [(200, 2048, 40), (64, 320, 130)]:  # 320: 5 stages of K over up to 8 blocks
            x, c, s, b = make(n, k, (m,), fmt, 32, seed=splits + k, dtype=torch.bfloat16)
            check(x, c, s, fmt, 32, b)
            assert path(lambda: P.linear_mx(x.cuda(), c.cuda(), s.cuda(), fmt, 32, b.cuda())) == "wgmma"
    monkeypatch.setenv("PT2Q_CUDA_LINEAR_MX_SPLITS", "9")
    x, c, s, b = make(64, 256, (40,), "fp4_e2m1", 32, seed=1, dtype=torch.bfloat16)
    with pytest.raises(RuntimeError, match="PT2Q_CUDA_LINEAR_MX_SPLITS"):
        P.linear_mx(x.cuda(), c.cuda(), s.cuda(), "fp4_e2m1", 32, None)


def test_gemm_paths_by_rows_dtype_and_layout(monkeypatch):
    """Where the GEMM runs: bf16 x from 17 to 128 rows with byte or 4-bit codes (256 for weights of
    8192 rows or more); past that,
    fp16 / fp32 x (as bf16 pieces), 6-bit codes, blocks that are not whole k16 steps, code
    rows that are not whole 16-byte units, and unaligned x take a dequantize path (and agree with
    the reference)."""
    def run(m, fmt="fp4_e2m1", k=256, block=32, dtype=torch.bfloat16, xoff=0, n=72):
        x, c, s, b = make(n, k, (m,), fmt, block, seed=m, dtype=dtype)
        xg = x.cuda()
        if xoff:
            big = torch.zeros(m * k + xoff, dtype=dtype, device="cuda")
            big[xoff:] = xg.reshape(-1)
            xg = big[xoff:].view(m, k)
        check(x, c, s, fmt, block, b, on_gpu=(xg, c.cuda()))
        return path(lambda: P.linear_mx(xg, c.cuda(), s.cuda(), fmt, block, b.cuda()))
    assert run(17) == "wgmma" and run(128) == "wgmma" and run(40, "int8") == "wgmma"
    assert run(129) == "dequantize"
    assert run(256, n=8192, k=64) == "wgmma" and run(257, n=8192, k=64) == "dequantize"
    assert run(40, dtype=torch.float16) == "pieces" and run(40, dtype=torch.float32) == "pieces"
    assert run(40, "fp6_e3m2") == "dequantize" and run(40, "int2") == "dequantize"
    assert run(40, block=8) == "dequantize"
    assert run(40, k=48) == "dequantize"  # 4-bit codes: 24 bytes a row
    assert run(40, xoff=1) == "dequantize"
    monkeypatch.setenv("PT2Q_CUDA_LINEAR_MX_GEMM", "0")
    assert run(40) == "dequantize"
    monkeypatch.setenv("PT2Q_CUDA_LINEAR_MX_GEMM", "1")
    monkeypatch.setenv("PT2Q_CUDA_LINEAR_MX_GEMM_MAX_ROWS", "512")
    assert run(300) == "wgmma"


def dequantized_types(fn):
    """The FloatType (0 fp32, 1 bf16, 2 fp16) of every mx_dequantize kernel fn() ran."""
    names = cuda_kernel_names(fn)
    return {int(t) for n in names for t in re.findall(r"dequantize\w*<\(pt2q::cuda::FloatType\)(\d)", n)}


@pytest.mark.parametrize("fmt", GEMV_FORMATS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32], ids=str)
def test_half_and_fp32_x_as_bf16_pieces(fmt, dtype):
    """fp16 / fp32 x past the GEMVs: the weight dequantized to bf16 once, x split into 2 / 3 bf16
    pieces whose sum is x, cuBLAS GEMMs with fp32 results (one GEMM of the stacked pieces up to 512
    rows of them, one per piece past that), an fp32 bias, one rounding: the CPU's fp32 path within
    summation order, for every format of at most 8 bits; x's values near the bottom of fp16's range
    (subnormals; inf and NaN, which give NaN and inf where the CPU's do) and weights of extreme
    scales. (Outputs past fp16's range are inf on both sides; the bound cannot compare those.)"""
    for n, k, block, m in [(72, 256, 32, 17), (300, 512, 64, 40), (37, 96, 0, 129), (40, 128, 32, 300)]:
        x, c, s, b = make(n, k, (m,), fmt, block, seed=m + n, dtype=dtype)
        check(x, c, s, fmt, block, b)
        check(x, c, s, fmt, block, None)
        check(x, c, s, fmt, block, b.to(torch.float16))
    x, c, s, b = make(64, 256, (3, 7), fmt, 32, seed=2, dtype=dtype)
    x[0, 0, :8] = torch.tensor([2.0 ** -24, -(2.0 ** -20), 8.0, -1.0009765625, 0.0, -0.0, 3.0e-5, 0.333])
    s[0, :] = 0  # 2^-127 per code: below bf16's normal range
    s[1, :] = 120
    s[2, 3] = 255  # NaN block: NaN column
    check(x, c, s, fmt, 32, b)
    x[1, 2, 5] = float("inf")
    x[2, 4, 9] = float("nan")
    got = P.linear_mx(x.cuda(), c.cuda(), s.cuda(), fmt, 32, None).cpu()
    want = REF.linear_mx(x, c, s, fmt, 32, None)
    assert torch.equal(got.isnan(), want.isnan()) and torch.equal(got.isinf(), want.isinf())
    xs = x.reshape(-1, 256)
    assert path(lambda: P.linear_mx(xs.cuda(), c.cuda(), s.cuda(), fmt, 32, b.cuda())) == "pieces"
    assert dequantized_types(lambda: P.linear_mx(xs.cuda(), c.cuda(), s.cuda(), fmt, 32, b.cuda())) == {1}


def identity_mx():
    """An MXINT8 weight [16, 32] that is 1 on the diagonal of its first 16 columns, 0 elsewhere."""
    codes = torch.zeros(16, 32, dtype=torch.int8)
    codes[torch.arange(16), torch.arange(16)] = 1
    return codes, torch.full((16, 1), 133, dtype=torch.uint8)  # code 1 at 2^(133 - 127 - 6) = 1


def test_half_pieces_are_exact():
    """The fp16 pieces, on all 65536 bit patterns through the identity weight: every finite x
    comes back exactly, so the two pieces are exact bf16 values summing to x; rows holding inf
    or NaN give NaN as the CPU's fp32 path does (inf * 0)."""
    x = torch.arange(0, 1 << 16, dtype=torch.int32).to(torch.int16).view(torch.float16).reshape(-1, 16)
    xs = torch.cat([x, torch.zeros(x.shape[0], 16, dtype=torch.float16)], dim=1)  # k = 32: one block
    codes, scales = identity_mx()
    got = P.linear_mx(xs.cuda(), codes.cuda(), scales.cuda(), "int8", 32, None).cpu()
    want = REF.linear_mx(xs, codes, scales, "int8", 32, None)
    finite = x.isfinite().all(1)  # the non-finite patterns fill whole rows of 16
    assert int(finite.sum()) == 3968
    assert torch.equal(got[finite], x[finite])  # values: -0.0 sums to +0.0 on both sides
    assert torch.equal(want[finite], x[finite])
    assert bool(got[~finite].isnan().all()) and bool(want[~finite].isnan().all())
    assert path(lambda: P.linear_mx(xs.cuda(), codes.cuda(), scales.cuda(), "int8", 32, None)) == "pieces"


@pytest.mark.parametrize("m", [9, 200])  # 27 rows of pieces stacked in one GEMM; 600: a GEMM per piece
def test_fp32_pieces_are_exact(m):
    """The fp32 pieces: random full 24-bit significands from 2^-100 to 2^100 (and 0, +-inf) through
    the identity weight come back bit for bit, so the three pieces are exact bf16 values summing to
    x; the fp32 output is not rounded again."""
    g = torch.Generator().manual_seed(m)
    mant = torch.randint(1 << 23, 1 << 24, (m, 16), generator=g).double()
    exp = torch.randint(-100, 100, (m, 16), generator=g).double()
    sign = torch.where(torch.rand(m, 16, generator=g) < 0.5, -1.0, 1.0).double()
    x = (sign * mant * torch.exp2(exp - 23)).float()
    x[0, :3] = torch.tensor([0.0, float("inf"), -float("inf")])
    xs = torch.cat([x, torch.zeros(m, 16)], dim=1)
    codes, scales = identity_mx()
    got = P.linear_mx(xs.cuda(), codes.cuda(), scales.cuda(), "int8", 32, None).cpu()
    assert torch.equal(got[1:].view(torch.int32), x[1:].view(torch.int32))
    assert bool(got[0].isnan().all())  # inf * 0 in that row, as the CPU's fp32 matmul gives
    assert path(lambda: P.linear_mx(xs.cuda(), codes.cuda(), scales.cuda(), "int8", 32, None)) == "pieces"
