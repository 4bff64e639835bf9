"""pt2q.linear_mx on CUDA (the decode GEMVs: CUDA cores for one row, tensor cores for 2 to 16
rows of bf16 / fp16 x, CUDA cores up to 8 rows otherwise; else mx_dequantize's CUDA kernel and an
fp32 matmul; x through mx_fake_quantize's CUDA kernel) against the CPU reference on the same
inputs, within the bound of fp32 summation in any order: every weight format, ragged K, block
sizes, input formats, bias, bf16 / fp16 x, NaN blocks, extreme scales, unaligned storage;
deterministic; which path ran; opcheck. Runs on the GPU machine; skipped elsewhere."""

import pytest
import torch
from torch.library import opcheck

import pt2q  # noqa: F401
from tests.kernels.test_linear_mx import EPS32, FORMATS, REF, ULP, make
from tests.cuda_support import needs_cuda_kernel

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
    "gemv" (linear_mx_cuda_kernels.cu) or "dequantize". Under compute-sanitizer the profiler sees
    no kernels at all: the test is then skipped at this point (its numeric checks come first)."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    names = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    if not names:
        pytest.skip("the CUDA profiler records no kernels here (compute-sanitizer)")
    if any("linearMxMmaKernel" in n for n in names):
        return "mma"
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
    for m, want in [(1, "gemv"), (2, "mma" if tensor_cores else "gemv"), (8, "mma" if tensor_cores else "gemv"),
                    (9, "mma" if tensor_cores else "dequantize"), (16, "mma" if tensor_cores else "dequantize"),
                    (17, "dequantize")]:
        x, c, s, b = make(300, 512, (m,), fmt, 64, dtype=dtype)
        assert path(lambda: P.linear_mx(x.cuda(), c.cuda(), s.cuda(), fmt, 64, b.cuda())) == want, m


@pytest.mark.parametrize("fmt", ["fp8_e4m3", "fp4_e2m1", "int8", "fp6_e3m2"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_gemv_extreme_scales_and_nan_blocks(fmt, dtype):
    """Scale bytes 0 (2^-127: subnormal weights), 1, 200 and 255 (NaN: the column is NaN), and a
    weight row of zero codes, through either GEMV; same bits on a second call."""
    x, c, s, b = make(64, 256, (3,), fmt, 32, seed=11, dtype=dtype)
    s[0, :] = 0
    s[1, 2] = 1
    s[2, :] = 200
    s[3, 5] = 255
    c[4].zero_()
    check(x, c, s, fmt, 32, b)
    y = P.linear_mx(x.cuda(), c.cuda(), s.cuda(), fmt, 32, None).cpu()
    assert bool(y[:, 3].isnan().all()) and not bool(y[:, [0, 1, 2, 4]].isnan().any())
    want = "mma" if dtype != torch.float32 and fmt in MMA_FORMATS else "gemv"
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
        assert path(lambda: P.linear_mx(xg, cg, s.cuda(), "fp8_e4m3", 32, b.cuda())) == "dequantize"
