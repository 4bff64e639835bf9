"""The float formats and MX integers on 16-bit words, as the AVX-512 kernels work on bf16 input and on fp32
input of mx_quantize (its top 16 bits, cpu/mx_words_avx512.h), with fp4_e2m1's code table:
every finite bf16 value of either sign, below a block maximum of every kind, against the ATen
reference path bit for bit, in every loop that takes the word kernels (16 blocks of 32 at once,
longer and ragged blocks, strided columns), for each deterministic rounding and scale mode. The
block maxima put each value in the normal range of its block, in its subnormal range (where the
word kernels take their second form), below it (rounding to 0), on the boundaries between, and at
the scales where blocks stop being fast (their 2^(emin + s) an fp32 subnormal) or become NaN.
fp32 input takes the same values with low 16 bits that a cut to 16 bits loses: 0, 1, 0x7FFF,
0x8000, 0xFFFF or random (a tie of the fp32 value that its top bits do not show, and values a
hair above or below every boundary)."""

import numpy as np
import pytest
import torch

import pt2q

P = torch.ops.pt2q
REF = pt2q._C.reference
FORMATS = ["fp8_e4m3", "fp8_e5m2", "fp6_e3m2", "fp6_e2m3", "fp4_e2m1", "int8", "int4", "int2"]


def _bf16(bits):
    return torch.from_numpy(np.asarray(bits, np.uint16).view(np.int16).copy()).view(torch.bfloat16)


def _blocks():
    """Blocks of 32: element 0 the block maximum, the other 31 every finite bf16 magnitude not
    above it (in order, so that neighbours are ULPs apart), signs alternating."""
    finite = np.arange(0, 0x7F80, dtype=np.uint32)  # +0 up to the largest finite, subnormals included
    maxima = []
    for e in (-133, -126, -120, -110, -100, -60, -8, -1, 0, 3, 40, 100, 120, 126, 127):
        for mant in (0x00, 0x40, 0x7F):
            if e == -133:
                maxima.append(0x0001 | mant)  # a bf16 subnormal maximum
            else:
                maxima.append(((e + 127) << 7) | mant)
    rows = []
    rng = np.random.default_rng(5)
    for m in maxima:
        below = finite[finite <= m]
        # every magnitude below m once, in order; the sparse top binades again at random
        take = np.concatenate([below, rng.choice(below, (-len(below)) % 31)])
        body = take.reshape(-1, 31).astype(np.uint16)
        signs = (np.arange(body.size).reshape(body.shape) % 2).astype(np.uint16) << 15
        rows.append(np.concatenate([np.full((body.shape[0], 1), m, np.uint16), body | signs], axis=1))
    blocks = np.concatenate(rows)
    # a NaN block and an Inf block among them, so that some groups of 16 blocks are not all fast
    blocks[7, 5] = 0x7FC1
    blocks[300, 9] = 0xFF80
    return blocks  # (n, 32) uint16


BLOCKS = _blocks()


def _same(got, want, what):
    if got.dtype in (torch.bfloat16, torch.float32):
        ng, nw = got.isnan(), want.isnan()
        assert torch.equal(ng, nw), f"{what}: NaN positions differ"
        bits = torch.int16 if got.dtype == torch.bfloat16 else torch.int32
        got, want = got.view(bits)[~ng], want.view(bits)[~nw]
    else:
        got, want = got.view(torch.uint8), want.view(torch.uint8)
    if not torch.equal(got, want):
        i = torch.nonzero(got.reshape(-1) != want.reshape(-1))[:4].reshape(-1)
        raise AssertionError(f"{what}: {int((got != want).sum())} differ, first at {i.tolist()}: got "
                             f"{got.reshape(-1)[i].tolist()} want {want.reshape(-1)[i].tolist()}")


def _fp32(bits16):
    """fp32 values whose top 16 bits are bits16, their low 16 bits drawn per element."""
    rng = np.random.default_rng(9)
    special = np.array([0, 1, 0x7FFF, 0x8000, 0xFFFF], np.uint32)
    pick = rng.integers(0, 6, size=bits16.shape)
    low = np.where(pick < 5, special[np.minimum(pick, 4)], rng.integers(0, 1 << 16, size=bits16.shape, dtype=np.uint32))
    return torch.from_numpy(((bits16.astype(np.uint32) << 16) | low).view(np.float32).copy())


def _layouts(dtype):
    n = BLOCKS.shape[0] // 16 * 16
    x = _bf16(BLOCKS[:n]) if dtype == torch.bfloat16 else _fp32(BLOCKS[:n])  # (n, 32)
    yield "16 blocks of 32 at once", x.reshape(-1, 32 * 32), 32, -1
    yield "blocks of 64", x.reshape(-1, 64 * 8), 64, -1
    yield "ragged rows", x.reshape(-1)[: 4000 * 33].reshape(4000, 33), 32, -1
    yield "blocks of 16 (half chunks)", x.reshape(-1, 512), 16, -1
    yield "strided columns", x.t().contiguous(), 32, 0
    yield "strided columns, ragged tile", x[:, :].reshape(-1)[: 32 * 300].reshape(300, 32).t().contiguous(), 32, 0


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("rounding", ["nearest", "even", "floor"])
def test_every_bf16_value_matches_the_reference(dtype, fmt, rounding):
    for scale_mode in ("floor", "ceil", "even", "rceil"):
        for name, x, block, axis in _layouts(dtype):
            what = f"{fmt} {rounding} {scale_mode} {name}"
            _same(P.mx_fake_quantize(x, fmt, block, axis, rounding, scale_mode),
                  REF.mx_fake_quantize(x, fmt, block, axis, rounding, scale_mode), "fake-quantize " + what)
            codes, scales = P.mx_quantize(x, fmt, block, axis, rounding, scale_mode)
            want_codes, want_scales = REF.mx_quantize(x, fmt, block, axis, rounding, scale_mode)
            _same(scales, want_scales, "scales " + what)
            _same(codes, want_codes, "codes " + what)


def test_the_inputs_reach_both_forms_and_the_edges():
    """The data really puts values below the normal range of fast blocks (the second form), in
    blocks that are not fast, and rounds some to zero: checked on the fp32 reference's view."""
    x = _bf16(BLOCKS).float()
    amax = x.abs().amax(1)
    fin = amax.isfinite()
    e = torch.floor(torch.log2(amax[fin & (amax > 0)]))
    s = e - 8  # fp8_e4m3, floor scale
    assert (s + -6 < -126).any() and (s + -6 >= -126).any()  # blocks past the fast range and within it
    ratio = x[fin].abs() / amax[fin, None]
    assert ((ratio > 0) & (ratio < 2.0 ** -14)).any()  # below e4m3's normal range of the block
    assert ((ratio > 0) & (ratio < 2.0 ** -20)).any()  # rounding to 0
    assert (x.view(torch.int16) == -32768).any()  # -0
