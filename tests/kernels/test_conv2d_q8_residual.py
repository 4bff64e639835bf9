"""conv2d_q8's residual (X86InductorQuantizer's conv -> add [-> relu] fusion): int8 codes r of the
output's shape whose dequantized value (r - z_r) * s_r joins y before the rounding. Against an
independent fp64 computation (F.conv2d of the codes in fp64, the residual added in fp64,
quantize_per_tensor's rounding), against the quantize/dequantize chain it replaces (dq -> fp32
F.conv2d -> + dq(r) -> relu -> quantize_per_tensor), every ISA's kernels, residual layouts, opcheck,
export and compile, and its argument errors."""

import pytest
import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401
import torch.nn.functional as F
from torch.library import opcheck

import pt2q  # noqa: F401
from pt2q import _C
from tests.kernels.test_linear_static import StaticConv, check_codes, conv_case, export_and_compile_match_eager, \
    pack_conv
from tests.kernels.test_linear_weight_only import ISA_CASES, run_under_isa

P = torch.ops.pt2q
QD = torch.ops.quantized_decomposed
REF = _C.reference


def residual_case(shape, groups=1, seed=0):
    """A conv2d_q8 case with residual codes spread over the int8 range, their scale comparable to
    the conv's values (so that the sum moves codes), and a non-zero residual zero point."""
    x, sx, zx, w, sw, b, so, zo, acc = conv_case(*shape, seed=seed, groups=groups)
    g = torch.Generator().manual_seed(seed + 100)
    r = torch.randint(-128, 128, tuple(acc.shape), dtype=torch.int8, generator=g)
    sr, zr = so * (0.3 + torch.rand((), generator=g).item()), int(torch.randint(-30, 30, (), generator=g))
    return x, sx, zx, w, sw, b, so, zo, acc, r, sr, zr


def exact(acc, sx, sw, b, so, zo, qmin, qmax, r, sr, zr):
    """The fp64 value before rounding (the residual in) and its codes."""
    y = acc * sx * sw.double()[None, :, None, None]
    if b is not None:
        y = y + b.double()[None, :, None, None]
    v = (y + (r.double() - zr) * sr) * (1.0 / so)
    return v, (v.round() + zo).clamp(qmin, qmax).to(torch.int8)


def check(shape, groups=1, seed=0, relu=False, bias=True):
    n, c, h, w_, oc, ks, st, pad, dil = shape
    x, sx, zx, w, sw, b, so, zo, acc, r, sr, zr = residual_case(shape, groups, seed)
    b = b if bias else None
    packed = pack_conv(w)
    qmin = zo if relu else -128
    args = (x, sx, zx, packed, sw, b, list(ks), list(st), list(pad), list(dil), so, zo, qmin, 127, groups, r, sr, zr)
    got = P.conv2d_q8(*args)
    v, want = exact(acc, sx, sw, b, so, zo, qmin, 127, r, sr, zr)
    check_codes(got, v, want, zo, qmin, 127)
    assert bool((got >= qmin).all())
    assert torch.equal(REF.conv2d_q8(*args), want)
    # the residual moved codes: a kernel that dropped it would fail above, but only if it mattered
    without = P.conv2d_q8(*args[:15])
    assert (without != got).float().mean() > 0.3
    return got


SHAPES = [  # n, c, h, w, out channels, kernel_size, stride, padding, dilation, groups
    (1, 3, 8, 8, 16, (3, 3), (1, 1), (1, 1), (1, 1), 1),  # a first layer
    (2, 16, 9, 7, 32, (3, 3), (2, 2), (1, 1), (1, 1), 1),  # ResNet's strided block
    (3, 32, 4, 4, 64, (1, 1), (1, 1), (0, 0), (1, 1), 1),  # 1x1 (a bottleneck's last conv)
    (2, 35, 7, 9, 20, (3, 3), (1, 1), (1, 1), (1, 1), 1),  # ragged rows and columns
    (1, 8, 12, 12, 5, (5, 3), (1, 2), (2, 0), (2, 1), 1),  # dilated, 5 channels (one partial vector)
    (1, 24, 6, 6, 300, (1, 1), (1, 1), (0, 0), (1, 1), 1),  # several panels of columns
    (2, 16, 9, 9, 16, (3, 3), (1, 1), (1, 1), (1, 1), 16),  # depthwise: the panels per group
    (1, 64, 10, 9, 64, (3, 3), (1, 1), (1, 1), (1, 1), 16),  # a direct-kernel grouped shape: the panels too
    (2, 16, 8, 8, 32, (3, 3), (1, 1), (1, 1), (1, 1), 4),
]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("relu,bias", [(False, True), (True, True), (True, False)])
def test_residual_matches_fp64(shape, relu, bias):
    check(shape[:-1], groups=shape[-1], seed=shape[1] + shape[4], relu=relu, bias=bias)


def test_residual_against_the_qdq_chain():
    """The graph it replaces, X86InductorQuantizer's conv -> add -> relu (uint8 moved to int8)."""
    x, sx, zx, w, sw, b, so, zo, _, r, sr, zr = residual_case((2, 16, 10, 10, 32, (3, 3), (1, 1), (1, 1), (1, 1)),
                                                              seed=9)
    got = P.conv2d_q8(x, sx, zx, pack_conv(w), sw, b, [3, 3], [1, 1], [1, 1], [1, 1], so, zo, zo, 127, 1, r, sr, zr)
    xd = QD.dequantize_per_tensor(x, sx, zx, -128, 127, torch.int8)
    wd = QD.dequantize_per_channel(w, sw, torch.zeros(32, dtype=torch.int64), 0, -127, 127, torch.int8)
    rd = QD.dequantize_per_tensor(r, sr, zr, -128, 127, torch.int8)
    want = QD.quantize_per_tensor(torch.relu(F.conv2d(xd, wd, b, 1, 1) + rd), so, zo, -128, 127, torch.int8)
    diff = (got.int() - want.int()).abs()
    assert bool((diff <= 1).all()) and diff.float().mean() < 0.01


def test_residual_layouts_give_the_same_codes():
    """A contiguous residual (transposed to channels last), a channels-last one (conv2d_q8's own
    output kind after a permute) and a strided one: the same codes."""
    shape = (2, 24, 9, 10, 40, (3, 3), (1, 1), (1, 1), (1, 1))
    x, sx, zx, w, sw, b, so, zo, acc, r, sr, zr = residual_case(shape, seed=4)
    packed = pack_conv(w)
    wide = torch.zeros(*r.shape[:3], r.shape[3] + 5, dtype=torch.int8)
    wide[..., 2:r.shape[3] + 2] = r
    outs = [P.conv2d_q8(x, sx, zx, packed, sw, b, [3, 3], [1, 1], [1, 1], [1, 1], so, zo, -128, 127, 1, ri, sr, zr)
            for ri in (r, r.contiguous(memory_format=torch.channels_last), wide[..., 2:r.shape[3] + 2])]
    check_codes(outs[0], *exact(acc, sx, sw, b, so, zo, -128, 127, r, sr, zr), zo, -128, 127)
    for o in outs[1:]:
        assert torch.equal(o, outs[0])


def test_residual_extremes_clamp():
    """Residuals at the ends of the range push the sums past both clamps."""
    shape = (1, 16, 6, 6, 24, (3, 3), (1, 1), (1, 1), (1, 1))
    x, sx, zx, w, sw, b, so, zo, acc, _, _, _ = residual_case(shape, seed=3)
    r = torch.where(torch.rand(acc.shape) < 0.5, 127, -128).to(torch.int8)
    sr, zr = so * 4, 0
    for qmin in (-128, zo):
        args = (x, sx, zx, pack_conv(w), sw, b, [3, 3], [1, 1], [1, 1], [1, 1], so, zo, qmin, 127, 1, r, sr, zr)
        got = P.conv2d_q8(*args)
        assert torch.equal(got, REF.conv2d_q8(*args))
        assert int((got == 127).sum()) > 100 and int((got == qmin).sum()) > 100


def isa_check():
    for shape in SHAPES:
        for relu, bias in ((False, True), (True, False)):
            check(shape[:-1], groups=shape[-1], seed=shape[4], relu=relu, bias=bias)


@pytest.mark.parametrize("cap,kernels", ISA_CASES)
def test_every_isa_kernel(cap, kernels):
    run_under_isa("tests.kernels.test_conv2d_q8_residual", cap, kernels)


def test_opcheck():
    x, sx, zx, w, sw, b, so, zo, _, r, sr, zr = residual_case((1, 4, 6, 6, 8, (3, 3), (1, 1), (1, 1), (1, 1)))
    opcheck(P.conv2d_q8.default, (x, sx, zx, pack_conv(w), sw, b, [3, 3], [1, 1], [1, 1], [1, 1], so, zo, zo, 127, 1,
                                  r, sr, zr))


class ResidualConv(StaticConv):
    def forward(self, x, r):
        return P.conv2d_q8(x, 0.03, 2, self.packed, self.sw, self.b, [3, 3], [1, 1], [1, 1], [1, 1], 0.5, 0, 0, 127,
                           1, r, 0.25, -3)


def test_export_and_compile_match_eager():
    x, _, _, w, sw, b, _, _, acc, r, _, _ = residual_case((2, 4, 6, 6, 8, (3, 3), (1, 1), (1, 1), (1, 1)))
    export_and_compile_match_eager(ResidualConv(w, sw, b), (x, r), "pt2q.conv2d_q8.default")


def test_errors_name_the_residual_and_change_nothing():
    x, sx, zx, w, sw, b, so, zo, _, r, sr, zr = residual_case((1, 4, 6, 6, 8, (3, 3), (1, 1), (1, 1), (1, 1)))
    packed = pack_conv(w)
    before = r.clone()

    def call(res, scale=sr, zp=zr):
        return P.conv2d_q8(x, sx, zx, packed, sw, b, [3, 3], [1, 1], [1, 1], [1, 1], so, zo, -128, 127, 1, res,
                           scale, zp)

    with pytest.raises(ValueError, match="conv2d_q8: residual must be int8 codes, got Float"):
        call(r.float())
    with pytest.raises(ValueError, match=r"conv2d_q8: residual must have the output's shape \[1, 8, 6, 6\], "
                                         r"got \[1, 8, 1, 1\]"):
        call(r[..., :1, :1])  # no broadcasting
    with pytest.raises(ValueError, match="conv2d_q8: residual_scale must be positive and finite, got inf"):
        call(r, float("inf"))
    with pytest.raises(ValueError, match="conv2d_q8: residual_scale must be positive and finite, got -1"):
        call(r, -1.0)
    with pytest.raises(ValueError, match=r"conv2d_q8: residual_zero_point must be in \[-128, 127\], got 128"):
        call(r, sr, 128)
    for fn in (REF.conv2d_q8,):
        with pytest.raises(ValueError, match="conv2d_q8: residual must have the output's shape"):
            fn(x, sx, zx, packed, sw, b, [3, 3], [1, 1], [1, 1], [1, 1], so, zo, -128, 127, 1, r[:, :4], sr, zr)
    assert torch.equal(r, before)
    with torch.device("meta"):
        with pytest.raises(ValueError, match="conv2d_q8: residual must be int8 codes"):
            P.conv2d_q8(x.to("meta"), sx, zx, packed.to("meta"), sw.to("meta"), None, [3, 3], [1, 1], [1, 1],
                        [1, 1], so, zo, -128, 127, 1, r.float().to("meta"), sr, zr)
