"""mx_quantize / mx_dequantize: the stored bits. Round trips equal mx_fake_quantize bit for
bit; FP8 codes equal PyTorch's own float8 conversion of the element values; FP4/FP6 codes
decode to the format tables; packed sizes are what each format promises."""

import math

import numpy as np
import pytest
import torch
from torch.library import opcheck

import pt2q  # noqa: F401
from tests.mx import spec_reference as spec
from tests.mx.inputs import mx_inputs

P = torch.ops.pt2q
FORMATS = list(spec.FORMATS) + ["int5", "int12"]


def _bits(t):
    return t.float().view(torch.int32)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("axis,shape,block", [(-1, (64, 96), 32), (0, (96, 40), 32), (-1, (8, 45), 16),
                                              (1, (3, 50, 7), 0), (-1, (5, 13), 64)])
@pytest.mark.parametrize("rounding", ["nearest", "even", "stochastic"])
def test_round_trip_equals_fake_quantize(fmt, axis, shape, block, rounding):
    x = torch.from_numpy(mx_inputs(int(np.prod(shape)) // 8 + 1, 8, seed=1).reshape(-1)[: int(np.prod(shape))]
                         .reshape(shape))
    codes, scales = P.mx_quantize(x, fmt, block, axis, rounding, "floor", False, 17)
    nblocks = math.ceil(shape[axis] / (block or shape[axis]))
    assert scales.dtype == torch.uint8 and scales.shape[axis] == nblocks
    y = P.mx_dequantize(codes, scales, fmt, block, axis, shape[-1])
    want = P.mx_fake_quantize(x, fmt, block, axis, rounding, "floor", False, 17)
    nan = torch.isnan(want)
    assert torch.equal(torch.isnan(y), nan)
    assert torch.equal(_bits(y)[~nan], _bits(want)[~nan])


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("in_dtype", [torch.float32, torch.bfloat16])
def test_cpu_kernel_matches_reference_codes(fmt, in_dtype):
    x = torch.from_numpy(mx_inputs(1024, 24, seed=6)).reshape(96, 256).to(in_dtype)
    for axis, block in ((-1, 32), (0, 32), (-1, 7), (0, 0)):
        for rounding in ("nearest", "even", "floor", "stochastic"):
            for scale_mode in ("floor", "ceil", "even", "rceil"):
                c, s = P.mx_quantize(x, fmt, block, axis, rounding, scale_mode, False, 4)
                rc, rs = pt2q._C.reference.mx_quantize(x, fmt, block, axis, rounding, scale_mode, False, 4)
                assert torch.equal(s, rs), (axis, block, rounding, scale_mode)
                assert c.dtype == rc.dtype
                assert torch.equal(c.view(torch.uint8) if c.element_size() == 1 else c,
                                   rc.view(torch.uint8) if rc.element_size() == 1 else rc), (axis, block, rounding)
                for out in (torch.float32, torch.bfloat16):
                    d = P.mx_dequantize(c, s, fmt, block, axis, x.shape[-1], out)
                    rd = pt2q._C.reference.mx_dequantize(c, s, fmt, block, axis, x.shape[-1], out)
                    view = torch.int32 if out == torch.float32 else torch.int16
                    nan = torch.isnan(rd)
                    assert torch.equal(torch.isnan(d), nan)
                    assert torch.equal(d[~nan].view(view), rd[~nan].view(view)), (fmt, axis, block, out)


@pytest.mark.parametrize("fmt,dtype", [("fp8_e4m3", torch.float8_e4m3fn), ("fp8_e5m2", torch.float8_e5m2)])
def test_fp8_codes_are_torch_float8_of_the_element_values(fmt, dtype):
    x = torch.from_numpy(mx_inputs(1024, 32, seed=2, specials=False))
    codes, scales = P.mx_quantize(x, fmt)
    assert codes.dtype == dtype
    scale = torch.where(scales == 0, torch.tensor(2.0**-127), torch.exp2(scales.float() - 127))
    elems = P.mx_fake_quantize(x, fmt) / scale.repeat_interleave(32, -1)
    ok = scales != 255
    want = elems.to(dtype).view(torch.uint8)
    got = codes.view(torch.uint8)
    rows = ok.repeat_interleave(32, -1)
    assert torch.equal(got[rows], want[rows])
    # uint8 codes are accepted too
    assert torch.equal(P.mx_dequantize(got, scales, fmt), P.mx_dequantize(codes, scales, fmt))


def test_fp4_codes_decode_to_the_e2m1_table():
    table = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
    codes = torch.arange(256, dtype=torch.uint8).view(1, 256)
    scales = torch.full((1, 16), 127, dtype=torch.uint8)  # scale 1
    y = P.mx_dequantize(codes, scales, "fp4_e2m1", 32, -1).view(-1)
    lo = [table[c & 7] * (-1 if c & 8 else 1) for c in range(256)]
    hi = [table[(c >> 4) & 7] * (-1 if c & 0x80 else 1) for c in range(256)]
    assert y[0::2].tolist() == lo and y[1::2].tolist() == hi


@pytest.mark.parametrize("fmt,ebits,m", [("fp6_e3m2", 3, 2), ("fp6_e2m3", 2, 3)])
def test_fp6_codes_decode_to_the_format(fmt, ebits, m):
    bias = (1 << (ebits - 1)) - 1
    vals = []
    for c in range(64):
        s, e, f = c >> 5, (c >> m) & ((1 << ebits) - 1), c & ((1 << m) - 1)
        v = (f / 2**m) * 2.0 ** (1 - bias) if e == 0 else (1 + f / 2**m) * 2.0 ** (e - bias)
        vals.append(-v if s else v)
    # pack codes 0..63 four per three bytes (c0 | c1 << 6 | c2 << 12 | c3 << 18, little endian)
    packed = []
    for g in range(16):
        w = sum(c << (6 * i) for i, c in enumerate(range(4 * g, 4 * g + 4)))
        packed += [w & 0xFF, (w >> 8) & 0xFF, w >> 16]
    codes = torch.tensor([packed], dtype=torch.uint8)
    y = P.mx_dequantize(codes, torch.full((1, 2), 127, dtype=torch.uint8), fmt, 32, -1)
    assert y.view(-1).tolist() == vals


@pytest.mark.parametrize("fmt,bits_per_element", [("fp4_e2m1", 4.25), ("int4", 4.25), ("fp6_e3m2", 6.25),
                                                  ("fp8_e4m3", 8.25), ("int8", 8.25), ("int2", 2.25)])
def test_packed_sizes(fmt, bits_per_element):
    x = torch.randn(128, 1024)
    codes, scales = P.mx_quantize(x, fmt)
    bits = 8 * (codes.numel() * codes.element_size() + scales.numel())
    assert bits / x.numel() == bits_per_element


def test_int_codes_are_twos_complement_without_the_minimum():
    codes, _ = P.mx_quantize(torch.tensor([[-1.99, -1.0, 0.5, 1.75]]), "int4", 4)
    nib = [(codes[0, 0].item() & 15), codes[0, 0].item() >> 4, codes[0, 1].item() & 15, codes[0, 1].item() >> 4]
    assert nib == [0b1001, 0b1100, 0b0010, 0b0111]  # -7, -4, 2, 7 (never -8)
    codes, _ = P.mx_quantize(torch.tensor([[-1.99, 1.0]]), "int8", 2)
    assert codes.tolist() == [[-127, 64]]


def test_nan_block_has_nan_scale_byte():
    codes, scales = P.mx_quantize(torch.tensor([[float("nan"), 1.0, 2.0, 3.0]]), "fp8_e4m3", 2)
    assert scales.tolist() == [[255, 120]]  # block max 3: 2^(1 - 8) for fp8_e4m3 (emax 8)
    y = P.mx_dequantize(codes, scales, "fp8_e4m3", 2)
    assert torch.isnan(y[0, :2]).all() and y[0, 2:].tolist() == [2.0, 3.0]


def test_opcheck_and_export():
    x = torch.randn(8, 64)
    opcheck(P.mx_quantize.default, (x, "fp4_e2m1"))
    codes, scales = P.mx_quantize(x, "fp6_e2m3", 32, -1)
    opcheck(P.mx_dequantize.default, (codes, scales, "fp6_e2m3", 32, -1, 64))

    class M(torch.nn.Module):
        def forward(self, x):
            c, s = P.mx_quantize(x, "fp4_e2m1")
            return P.mx_dequantize(c, s, "fp4_e2m1")

    ep = torch.export.export(M(), (x,))
    assert torch.equal(ep.module()(x), M()(x))
    assert torch.equal(torch.compile(M(), fullgraph=True)(x), M()(x))


def test_dequantize_errors():
    codes, scales = P.mx_quantize(torch.randn(4, 64), "fp4_e2m1")
    with pytest.raises(ValueError, match="scales has 2 entries along dimension 1 but 64 elements in blocks of 16 need 4"):
        P.mx_dequantize(codes, scales, "fp4_e2m1", 16)
    with pytest.raises(TypeError, match="fp4_e2m1 codes are packed uint8"):
        P.mx_dequantize(codes.to(torch.int8), scales, "fp4_e2m1")
    with pytest.raises(TypeError, match="scales must be uint8"):
        P.mx_dequantize(codes, scales.float(), "fp4_e2m1")
    with pytest.raises(ValueError, match="last_dim 70 does not fit 32 packed bytes"):
        P.mx_dequantize(codes, scales, "fp4_e2m1", 32, -1, 70)


@pytest.mark.parametrize("fmt", ["int8", "fp8_e4m3", "fp8_e5m2", "fp6_e2m3", "fp4_e2m1", "int4", "int2", "int12"])
def test_dequantize_every_axis_and_dtype_matches_reference(fmt):
    """The CPU kernel's vector decoders along the last axis and (each element scaled by its own
    block's byte) along earlier ones, ragged rows, zero and NaN blocks, fp32/bf16/fp16 out: the
    reference's values bit for bit."""
    g = torch.Generator().manual_seed(4)
    for shape, axis, block in (((64, 96), 0, 32), ((3, 40, 70), 1, 16), ((2, 64, 3, 48), 1, 32), ((7, 100), -2, 32),
                               ((40, 40), 0, 0), ((9, 130), -1, 64)):
        x = torch.randn(shape, generator=g) * torch.exp2(torch.randint(-20, 20, shape, generator=g).float())
        x.view(-1)[:50] = 0.0
        x.view(-1)[77] = float("nan")
        codes, scales = P.mx_quantize(x, fmt, block, axis)
        for dt in (torch.float32, torch.bfloat16, torch.float16):
            got = P.mx_dequantize(codes, scales, fmt, block, axis, shape[-1], dt)
            want = pt2q._C.reference.mx_dequantize(codes, scales, fmt, block, axis, shape[-1], dt)
            assert torch.equal(got.isnan(), want.isnan()), (shape, axis, dt)
            assert torch.equal(got.nan_to_num(), want.nan_to_num()), (shape, axis, dt)
