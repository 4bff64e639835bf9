"""The CPU kernels of mx_fake_quantize and mx_quantize against the ATen reference path, bit for
bit, over the whole grid the SIMD code branches on: every element format (MX and BFP widths),
rounding, scale mode and flush setting; fp32, bf16 and fp16 inputs; contiguous blocks, strided
blocks, ragged blocks and columns that are not a multiple of the vector width; with and without
streaming stores."""

import itertools

import pytest
import torch

import pt2q
from tests.mx.inputs import mx_inputs

P = torch.ops.pt2q
REF = pt2q._C.reference
FORMATS = ["int8", "int4", "int2", "int3", "int12", "int16", "fp8_e4m3", "fp8_e5m2", "fp6_e3m2", "fp6_e2m3",
           "fp4_e2m1"]
# (shape, block, axis): strided ragged columns, contiguous, ragged odd blocks, strided with 16-row
# blocks, the whole axis, 64-element blocks, strided columns the kernel packs 2- and 6-bit codes
# across (a multiple of 4, with a partial chunk of 8).
LAYOUTS = [((6, 77, 35), 32, 1), ((5, 200), 32, -1), ((4, 96), 7, -1), ((64, 70), 16, 0), ((3, 130), 0, -1),
           ((9, 64), 64, -1), ((40, 72), 16, 0)]
BASE = torch.from_numpy(mx_inputs(600, 40, seed=11)).reshape(-1)


def _same(got, want):
    if got.dtype in (torch.float32, torch.bfloat16, torch.float16):
        # NaN payloads differ between ATen's arithmetic and the kernel's canonical NaN.
        ng, nw = got.isnan(), want.isnan()
        assert torch.equal(ng, nw), "NaN positions differ"
        iv = {2: torch.int16, 4: torch.int32}[got.element_size()]
        g, w = got.view(iv)[~ng], want.view(iv)[~nw]
    else:
        g = got.view(torch.uint8) if got.element_size() == 1 else got
        w = want.view(torch.uint8) if want.element_size() == 1 else want
    if not torch.equal(g, w):
        i = torch.nonzero(g.reshape(-1) != w.reshape(-1))[:4].reshape(-1)
        raise AssertionError(f"{int((g != w).sum())} differ, first at {i.tolist()}: got {g.reshape(-1)[i].tolist()} "
                             f"want {w.reshape(-1)[i].tolist()}")


@pytest.mark.parametrize("streaming", ["0", "1"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("fmt", FORMATS)
def test_kernel_grid_matches_reference(fmt, dtype, streaming, monkeypatch):
    monkeypatch.setenv("PT2Q_STREAMING_STORES", streaming)
    for rounding, scale_mode, flush in itertools.product(["nearest", "even", "floor", "stochastic"],
                                                         ["floor", "ceil", "even", "rceil"], [False, True]):
        for shape, block, axis in LAYOUTS:
            x = BASE[: torch.Size(shape).numel()].reshape(shape).to(dtype)
            args = (fmt, block, axis, rounding, scale_mode, flush, 7)
            _same(P.mx_fake_quantize(x, *args), REF.mx_fake_quantize(x, *args))
            codes, scales = P.mx_quantize(x, *args)
            rcodes, rscales = REF.mx_quantize(x, *args)
            _same(scales, rscales)
            _same(codes, rcodes)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_outputs_in_the_subnormal_range(dtype):
    # Blocks whose scale is so small that fake-quantized values are subnormal in fp32 or in the
    # 16-bit output type: the narrowing must round them exactly as the reference does.
    tiny = torch.finfo(dtype).tiny
    x = (torch.randn(64, 64) * tiny * torch.logspace(-8, 4, 64, base=2.0).reshape(64, 1)).to(dtype)
    for fmt in ["int8", "fp8_e4m3", "fp4_e2m1", "int16"]:
        for axis in (0, -1):
            _same(P.mx_fake_quantize(x, fmt, 32, axis), REF.mx_fake_quantize(x, fmt, 32, axis))
