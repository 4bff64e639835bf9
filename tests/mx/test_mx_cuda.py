"""The MX / BFP ops' CUDA kernels give the CPU kernels' bits: mx_fake_quantize, mx_quantize (codes
and scale bytes, packed layouts included) and mx_dequantize, for every element format, rounding
(stochastic with a seed included) and scale mode, on the adversarial block data of tests/mx/inputs.py,
along the last axis (the 16-byte vector kernel, every lane count it has) and others (the per-column
kernel), ragged blocks, misaligned storage, fp32 / bf16 / fp16; plus opcheck, the straight-through
gradient and torch.compile on CUDA. Runs on the GPU machine; skipped elsewhere."""

import pytest
import torch
from torch.library import opcheck

import pt2q  # noqa: F401
from tests.mx.inputs import mx_inputs
from tests.cuda_support import needs_cuda_kernel

pytestmark = [pytest.mark.cuda, needs_cuda_kernel("pt2q::mx_quantize")]
P = torch.ops.pt2q
FORMATS = ["int8", "int4", "int2", "fp8_e4m3", "fp8_e5m2", "fp6_e3m2", "fp6_e2m3", "fp4_e2m1", "int5", "int12"]


def _bits(t):
    t = t.cpu()
    if t.dtype in (torch.float32, torch.int32):
        return t.view(torch.int32)
    if t.element_size() == 2:
        return t.view(torch.int16)
    return t.view(torch.uint8)


def _same(cpu, gpu):
    """Bit for bit, except the payload of NaNs: the CPU's bf16 outputs carry ATen's vectorized
    conversion's NaN (0xFFFF) in mx_dequantize and c10's (0x7FC0) in mx_fake_quantize; a NaN
    must be a NaN in the same places."""
    assert cpu.shape == gpu.shape and cpu.dtype == gpu.dtype
    cpu, gpu = cpu.cpu(), gpu.cpu()
    if cpu.is_floating_point() and cpu.element_size() > 1:
        nan = cpu.isnan()
        assert torch.equal(nan, gpu.isnan())
        cpu, gpu = cpu[~nan], gpu[~nan]
    assert torch.equal(_bits(cpu), _bits(gpu))


def _data(shape, dtype, seed):
    n = 1
    for d in shape:
        n *= d
    x = torch.from_numpy(mx_inputs((n + 31) // 32, 32, seed=seed)).reshape(-1)[:n].reshape(shape)
    return x.to(dtype)  # values beyond bf16 / fp16 become Inf: NaN blocks, also covered


def _all_three(x, fmt, block, axis, rounding, scale_mode, flush=False, seed=3):
    """fake_quantize, quantize and dequantize (codes from both devices) on CPU and CUDA."""
    args = (fmt, block, axis, rounding, scale_mode, flush, seed)
    _same(P.mx_fake_quantize(x, *args), P.mx_fake_quantize(x.cuda(), *args))
    c, s = P.mx_quantize(x, *args)
    gc, gs = P.mx_quantize(x.cuda(), *args)
    _same(s, gs)
    _same(c, gc)
    for out in (torch.float32, torch.bfloat16, torch.float16):
        want = P.mx_dequantize(c, s, fmt, block, axis, x.shape[-1], out)
        _same(want, P.mx_dequantize(gc, gs, fmt, block, axis, x.shape[-1], out))


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("rounding", ["nearest", "even", "floor", "stochastic"])
@pytest.mark.parametrize("scale_mode", ["floor", "ceil", "even", "rceil"])
def test_formats_roundings_scale_modes(fmt, rounding, scale_mode):
    x = _data((256, 256), torch.float32, seed=12)
    for axis in (-1, 0):
        _all_three(x, fmt, 32, axis, rounding, scale_mode)


# (shape, dtype, block, axis): the vector kernel with 1..32 lanes per block, then the column
# kernel for ragged rows, whole-axis blocks, blocks of odd sizes, strided axes and 3-d tensors.
LAYOUTS = [((64, 256), torch.float32, 4, -1), ((64, 256), torch.float32, 16, -1), ((16, 1024), torch.float32, 128, -1),
           ((64, 256), torch.bfloat16, 8, -1), ((64, 256), torch.bfloat16, 32, -1), ((8, 1024), torch.float16, 256, -1),
           ((33, 100), torch.float32, 32, -1), ((5, 300), torch.bfloat16, 0, -1), ((9, 1024), torch.float32, 512, -1),
           ((12, 90), torch.float16, 6, -1), ((96, 40), torch.float32, 32, 0), ((4, 33, 10), torch.bfloat16, 16, 1),
           ((3, 5, 7, 64), torch.float16, 32, 2), ((1,), torch.float32, 32, 0)]


@pytest.mark.parametrize("shape,dtype,block,axis", LAYOUTS, ids=lambda v: str(v).replace("torch.", ""))
@pytest.mark.parametrize("fmt", ["int8", "fp8_e5m2", "fp6_e2m3", "fp4_e2m1", "int2", "int16"])
def test_layouts_and_dtypes(shape, dtype, block, axis, fmt):
    x = _data(shape, dtype, seed=len(shape) * 100 + block)
    _all_three(x, fmt, block, axis, "even", "floor")
    _all_three(x, fmt, block, axis, "stochastic", "rceil", flush=True, seed=11)


def test_flush_subnormal_blocks():
    x = _data((128, 64), torch.float32, seed=5)
    x[::3] *= 1e-39  # whole blocks of fp32 subnormals
    for fmt in ("int8", "fp4_e2m1", "fp8_e4m3"):
        _all_three(x, fmt, 32, -1, "nearest", "floor", flush=True)
        _all_three(x, fmt, 32, 0, "nearest", "floor", flush=True)


def test_misaligned_storage_takes_the_column_kernel():
    base = _data((4 * 1024 + 1,), torch.float32, seed=7)
    x = base[1:].view(4, 1024)
    gx = base.cuda()[1:].view(4, 1024)  # 4 bytes past a 16-byte boundary
    assert gx.data_ptr() % 16 != 0
    for fmt in ("int8", "fp4_e2m1"):
        _same(P.mx_fake_quantize(x, fmt), P.mx_fake_quantize(gx, fmt))


def test_stochastic_rounding_reproducible_and_seeded():
    x = _data((64, 512), torch.float32, seed=9).cuda()
    a = P.mx_fake_quantize(x, "fp4_e2m1", 32, -1, "stochastic", "floor", False, 5)
    b = P.mx_fake_quantize(x, "fp4_e2m1", 32, -1, "stochastic", "floor", False, 5)
    c = P.mx_fake_quantize(x, "fp4_e2m1", 32, -1, "stochastic", "floor", False, 6)
    _same(a, b)
    assert not torch.equal(_bits(a), _bits(c))


def test_empty_and_errors():
    assert P.mx_fake_quantize(torch.empty(0, 32, device="cuda"), "int8").shape == (0, 32)
    c, s = P.mx_quantize(torch.empty(0, 32, device="cuda"), "fp4_e2m1")
    assert c.shape == (0, 16) and s.shape == (0, 1)
    with pytest.raises(ValueError, match="elem_format"):
        P.mx_fake_quantize(torch.ones(4, 32, device="cuda"), "fp7")
    c, s = P.mx_quantize(torch.ones(4, 32, device="cuda"), "int8")
    with pytest.raises(ValueError, match="scales"):
        P.mx_dequantize(c, s.cpu(), "int8")


def test_opcheck_gradient_and_compile():
    x = _data((8, 64), torch.float32, seed=2).clamp(-1e3, 1e3).cuda()
    opcheck(P.mx_fake_quantize.default, (x, "fp8_e4m3", 32, -1, "nearest", "floor", False, None))
    opcheck(P.mx_quantize.default, (x, "fp4_e2m1", 32, -1, "nearest", "floor", False, None))
    c, s = P.mx_quantize(x, "fp4_e2m1")
    opcheck(P.mx_dequantize.default, (c, s, "fp4_e2m1", 32, -1, 64, torch.bfloat16))
    xg = x.clone().requires_grad_()
    P.mx_fake_quantize(xg, "int8").sum().backward()
    assert torch.equal(xg.grad, torch.ones_like(x))

    def f(t):
        return P.mx_fake_quantize(t * 2, "fp6_e3m2") + 1

    torch._dynamo.reset()
    _same(f(x), torch.compile(f)(x))
