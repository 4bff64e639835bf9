"""linear_q8 / conv2d_q8 (static int8 in, int8 out) on CPU against an independent fp64
computation from the codes (torch's F.linear / F.conv2d in fp64, quantize_per_tensor's rounding)
and against the quantize/dequantize chain they replace (torch's quantized_decomposed ops around
an fp32 F.linear / F.conv2d): codes equal to the fp64 ones except within fp32 rounding of a .5
tie (there at most one apart); fused relu; every ISA's kernels; opcheck, export, compile; errors."""

import pytest
import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401
import torch.nn.functional as F
from torch.library import opcheck

import pt2q  # noqa: F401
from pt2q import _C
from tests.kernels.test_linear_weight_only import ISA_CASES, run_under_isa

P = torch.ops.pt2q
QD = torch.ops.quantized_decomposed
REF = _C.reference


def make(n, k, m_shape, seed=0, bias=True):
    g = torch.Generator().manual_seed(seed)
    w = torch.randint(-127, 128, (n, k), dtype=torch.int8, generator=g)
    sw = torch.rand(n, generator=g) * 0.01 + 1e-3
    x = torch.randint(-128, 128, (*m_shape, k), dtype=torch.int8, generator=g)
    b = torch.randn(n, generator=g) if bias else None
    sx, zx = 0.02 + 0.01 * torch.rand((), generator=g).item(), int(torch.randint(-20, 20, (), generator=g))
    # an output scale that spreads y over most of the int8 range
    y = F.linear((x.double() - zx) * sx, w.double() * sw.double()[:, None], None if b is None else b.double())
    so, zo = float(y.abs().max()) / 100, int(torch.randint(-10, 10, (), generator=g))
    return x, sx, zx, w, sw, b, so, zo


def exact(acc, sx, sw, b, so, zo, qmin, qmax, channel_dim):
    """The fp64 value before rounding and its codes."""
    shape = [1] * acc.dim()
    shape[channel_dim] = -1
    y = acc * sx * sw.double().reshape(shape) + (0 if b is None else b.double().reshape(shape))
    v = y * (1.0 / so)
    return v, (v.round() + zo).clamp(qmin, qmax).to(torch.int8)


def check_codes(got, v, want, zo, qmin, qmax):
    assert got.dtype == torch.int8 and got.shape == want.shape
    diff = (got.int() - want.int()).abs()
    near_tie = ((v - v.floor() - 0.5).abs() < 1e-4) | ((v + zo) < qmin - 1) | ((v + zo) > qmax + 1)
    assert bool((diff <= 1).all()), diff.max()
    assert bool((diff[~near_tie] == 0).all()), "codes differ away from a rounding tie"


def check_linear(x, sx, zx, w, sw, b, so, zo, qmin=-128, qmax=127):
    packed = P.pack_weight_int8(w)
    got = P.linear_q8(x, sx, zx, packed, sw, b, so, zo, qmin, qmax)
    acc = F.linear(x.double() - zx, w.double())
    v, want = exact(acc, sx, sw, b, so, zo, qmin, qmax, -1)
    check_codes(got, v, want, zo, qmin, qmax)
    ref = REF.linear_q8(x, sx, zx, packed, sw, b, so, zo, qmin, qmax)
    assert torch.equal(ref, want)
    return got


@pytest.mark.parametrize("m_shape", [(1,), (2,), (7,), (16,), (33,), (128,), (3, 5)])
@pytest.mark.parametrize("n,k", [(5, 33), (67, 256), (130, 512), (64, 1000)])
def test_linear_matches_fp64(m_shape, n, k):
    check_linear(*make(n, k, m_shape, seed=n + k + len(m_shape)))


def test_linear_fused_relu_and_no_bias():
    x, sx, zx, w, sw, b, so, zo = make(40, 96, (9,), seed=3, bias=False)
    got = check_linear(x, sx, zx, w, sw, None, so, zo, qmin=zo)
    assert bool((got >= zo).all())


def test_linear_against_the_qdq_chain():
    """The graph it replaces: dq(x) -> F.linear(fp32) with dq(w) -> quantize_per_tensor."""
    x, sx, zx, w, sw, b, so, zo = make(300, 512, (64,), seed=7)
    got = P.linear_q8(x, sx, zx, P.pack_weight_int8(w), sw, b, so, zo)
    xd = QD.dequantize_per_tensor(x, sx, zx, -128, 127, torch.int8)
    wd = QD.dequantize_per_channel(w, sw, torch.zeros(300, dtype=torch.int64), 0, -127, 127, torch.int8)
    want = QD.quantize_per_tensor(F.linear(xd, wd, b), so, zo, -128, 127, torch.int8)
    diff = (got.int() - want.int()).abs()
    assert bool((diff <= 1).all()) and diff.float().mean() < 0.01


def pack_conv(w):
    """conv2d_q8's weight: channels last, (out, kh, kw, in), then packed."""
    return P.pack_weight_int8(w.permute(0, 2, 3, 1).reshape(w.shape[0], -1).contiguous())


def conv_case(n, c, h, w_, oc, ks, st, pad, dil, seed=0, groups=1):
    g = torch.Generator().manual_seed(seed)
    w = torch.randint(-127, 128, (oc, c // groups, *ks), dtype=torch.int8, generator=g)
    sw = torch.rand(oc, generator=g) * 0.01 + 1e-3
    x = torch.randint(-128, 128, (n, c, h, w_), dtype=torch.int8, generator=g)
    b = torch.randn(oc, generator=g)
    sx, zx = 0.03, int(torch.randint(-20, 20, (), generator=g))
    acc = F.conv2d(x.double() - zx, w.double(), None, st, pad, dil, groups)
    y = acc * sx * sw.double()[None, :, None, None] + b.double()[None, :, None, None]
    so, zo = float(y.abs().max()) / 100, 3
    return x, sx, zx, w, sw, b, so, zo, acc


CONV_SHAPES = [  # n, c, h, w, out channels, kernel_size, stride, padding, dilation
    (1, 3, 8, 8, 16, (3, 3), (1, 1), (1, 1), (1, 1)),
    (2, 16, 9, 7, 32, (3, 3), (2, 2), (1, 1), (1, 1)),
    (1, 8, 12, 12, 5, (5, 3), (1, 2), (2, 0), (2, 1)),
    (3, 32, 4, 4, 64, (1, 1), (1, 1), (0, 0), (1, 1)),
]


@pytest.mark.parametrize("shape", CONV_SHAPES)
def test_conv2d_matches_fp64(shape):
    n, c, h, w_, oc, ks, st, pad, dil = shape
    x, sx, zx, w, sw, b, so, zo, acc = conv_case(*shape, seed=c)
    packed = pack_conv(w)
    for qmin in (-128, zo):
        got = P.conv2d_q8(x, sx, zx, packed, sw, b, ks, st, pad, dil, so, zo, qmin, 127)
        v, want = exact(acc, sx, sw, b, so, zo, qmin, 127, 1)
        check_codes(got, v, want, zo, qmin, 127)
        assert torch.equal(REF.conv2d_q8(x, sx, zx, packed, sw, b, ks, st, pad, dil, so, zo, qmin, 127), want)


GROUPED_SHAPES = [  # n, c, h, w, out channels, kernel_size, stride, padding, dilation, groups
    (2, 16, 9, 9, 16, (3, 3), (1, 1), (1, 1), (1, 1), 16),  # depthwise
    (1, 32, 12, 10, 32, (3, 3), (2, 2), (1, 1), (1, 1), 32),  # depthwise, stride 2 (MobileNet)
    (1, 8, 7, 7, 16, (5, 3), (1, 2), (2, 0), (2, 1), 8),  # depthwise, multiplier 2, dilated
    (2, 16, 8, 8, 32, (3, 3), (1, 1), (1, 1), (1, 1), 4),  # grouped, 8 rows per group
    (1, 6, 9, 5, 9, (3, 3), (1, 1), (0, 1), (1, 1), 3),  # grouped, 3 rows per group (not a block of 4)
    # With VNNI, groups of a multiple of 4 input channels whose 16 output channels read at most 64
    # bytes run the direct kernel (grouped_q8_impl.h); the others above and below, the per-group GEMMs.
    (1, 64, 10, 9, 64, (3, 3), (1, 1), (1, 1), (1, 1), 16),  # 4 in / 4 out (ResNeXt's first stage)
    (2, 32, 7, 8, 64, (3, 3), (2, 2), (1, 1), (1, 1), 4),  # 8 in / 16 out, stride 2
    (1, 64, 6, 6, 64, (3, 3), (2, 1), (1, 1), (1, 1), 2),  # 32 in / 32 out
    (1, 64, 9, 6, 32, (5, 3), (1, 2), (2, 0), (2, 1), 4),  # 16 in / 8 out, dilated, 2 groups per vector
    (1, 12, 7, 7, 15, (3, 3), (1, 1), (1, 1), (1, 1), 3),  # 4 in / 5 out, 15 channels (a partial vector)
    (1, 32, 5, 5, 8, (1, 1), (1, 1), (0, 0), (1, 1), 8),  # 4 in / 1 out
    (1, 68, 5, 5, 48, (3, 3), (1, 1), (1, 1), (1, 1), 4),  # 17 in: not a multiple of 4 (GEMMs)
    (1, 128, 5, 5, 16, (3, 3), (1, 1), (1, 1), (1, 1), 16),  # 8 in / 1 out: 128 bytes a vector (GEMMs)
]


@pytest.mark.parametrize("shape", GROUPED_SHAPES)
def test_grouped_and_depthwise_conv2d_match_fp64(shape):
    n, c, h, w_, oc, ks, st, pad, dil, groups = shape
    x, sx, zx, w, sw, b, so, zo, acc = conv_case(*shape[:-1], seed=c + groups, groups=groups)
    packed = pack_conv(w)
    for qmin, bias in ((-128, b), (zo, None)):
        got = P.conv2d_q8(x, sx, zx, packed, sw, bias, ks, st, pad, dil, so, zo, qmin, 127, groups)
        v, want = exact(acc, sx, sw, bias, so, zo, qmin, 127, 1)
        check_codes(got, v, want, zo, qmin, 127)
        assert torch.equal(REF.conv2d_q8(x, sx, zx, packed, sw, bias, ks, st, pad, dil, so, zo, qmin, 127, groups),
                           want)


@pytest.mark.parametrize("shape", [
    (2, 35, 7, 9, 20, (3, 3), (1, 1), (1, 1), (1, 1), 1),  # plain: 35 channels, 63 pixels (ragged 16 x 16 tiles)
    (1, 48, 17, 5, 48, (3, 3), (2, 1), (1, 1), (1, 1), 48),  # depthwise (signed codes)
    (2, 64, 6, 11, 64, (3, 3), (1, 1), (1, 1), (1, 1), 16),  # grouped, the direct kernel
    (1, 18, 5, 6, 12, (3, 3), (1, 1), (1, 1), (1, 1), 3),  # grouped, a GEMM per group
    # few channels, many pixels: the input transposed in spans of 256 pixels (ragged rows and spans)
    (1, 20, 19, 19, 20, (3, 3), (1, 1), (1, 1), (1, 1), 20),  # depthwise
    (2, 24, 17, 18, 8, (3, 3), (1, 1), (1, 1), (1, 1), 1),  # plain
])
def test_conv2d_input_layouts_give_the_same_codes(shape):
    """x contiguous (transposed to channels last in 16 x 16 tiles, the output back the same way),
    channels last (no transpose), and strided (ATen's copy): the same codes, the fp64 result's."""
    n, c, h, w_, oc, ks, st, pad, dil, groups = shape
    x, sx, zx, w, sw, b, so, zo, acc = conv_case(*shape[:-1], seed=c + oc, groups=groups)
    packed = pack_conv(w)
    v, want = exact(acc, sx, sw, b, so, zo, -128, 127, 1)
    wide = torch.zeros(n, c, h, w_ + 3, dtype=torch.int8)
    wide[..., 1:w_ + 1] = x
    layouts = [x, x.contiguous(memory_format=torch.channels_last), wide[..., 1:w_ + 1]]
    outs = [P.conv2d_q8(xi, sx, zx, packed, sw, b, ks, st, pad, dil, so, zo, -128, 127, groups) for xi in layouts]
    check_codes(outs[0], v, want, zo, -128, 127)
    assert outs[0].is_contiguous()
    for o in outs[1:]:
        assert torch.equal(o, outs[0])


@pytest.mark.parametrize("threads", [1, 8])
@pytest.mark.parametrize("shape", [
    (2, 32, 9, 9, 48, (3, 3), (1, 1), (1, 1), (1, 1), 16),  # 16 groups of 2 in / 3 out (ResNeXt-like, tiny)
    (1, 24, 7, 6, 40, (3, 1), (2, 1), (1, 0), (1, 1), 8),  # 8 groups of 3 in / 5 out
    (1, 12, 6, 6, 12, (1, 1), (1, 1), (0, 0), (1, 1), 2),  # 2 groups: the rows-in-parallel path
    (1, 128, 9, 9, 128, (3, 3), (1, 1), (1, 1), (1, 1), 32),  # 4 in / 4 out: the direct kernel
])
def test_grouped_conv2d_matches_fp64_on_both_schedules(shape, threads):
    """Many groups run one group per task, few one after another with rows in parallel (the
    choice depends on the thread count): both give the fp64 reference's codes."""
    n, c, h, w_, oc, ks, st, pad, dil, groups = shape
    x, sx, zx, w, sw, b, so, zo, acc = conv_case(*shape[:-1], seed=oc + threads, groups=groups)
    packed = pack_conv(w)
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        got = P.conv2d_q8(x, sx, zx, packed, sw, b, ks, st, pad, dil, so, zo, -128, 127, groups)
    finally:
        torch.set_num_threads(old)
    v, want = exact(acc, sx, sw, b, so, zo, -128, 127, 1)
    check_codes(got, v, want, zo, -128, 127)


def test_grouped_conv2d_of_long_rows_stays_exact():
    # 8192 channels a group x 9 taps: the extreme sum 255 * 127 * 73728 passes int32, so no direct
    # kernel may take it (the AVX2 one would for the channels alone); all-extreme codes give the
    # largest sums, which must match the reference (exact in fp64).
    c, oc, groups = 16384, 16, 2
    x = torch.full((1, c, 3, 3), 127, dtype=torch.int8)
    w = torch.full((oc, c // groups, 3, 3), 127, dtype=torch.int8)
    w[oc // 2:] = -128
    sw = torch.full((oc,), 2e-5)  # the centre pixel's sums (+-2.4e9) give codes near +-48
    packed = pack_conv(w)
    args = (x, 1e-3, -128, packed, sw, None, [3, 3], [1, 1], [1, 1], [1, 1], 1.0, 0, -128, 127, groups)
    got = P.conv2d_q8(*args)
    assert torch.equal(got, REF.conv2d_q8(*args))
    assert int(got[0, 0, 1, 1]) > 40 and int(got[0, -1, 1, 1]) < -40


def test_grouped_conv2d_errors():
    x, sx, zx, w, sw, b, so, zo, _ = conv_case(1, 8, 6, 6, 8, (3, 3), (1, 1), (1, 1), (1, 1), groups=8)
    with pytest.raises(ValueError, match=r"conv2d_q8: groups \(3\) must be positive and divide both the input "
                                         r"channels \(8\) and the output channels \(8, from weight_scales\)"):
        P.conv2d_q8(x, sx, zx, pack_conv(w), sw, b, [3, 3], [1, 1], [1, 1], [1, 1], so, zo, -128, 127, 3)
    with pytest.raises(ValueError, match=r"packed \[8, 18\] weight .* in_features from input channels / groups"):
        P.conv2d_q8(x, sx, zx, pack_conv(w), sw, b, [3, 3], [1, 1], [1, 1], [1, 1], so, zo, -128, 127, 4)


def test_conv2d_against_the_qdq_chain():
    x, sx, zx, w, sw, b, so, zo, _ = conv_case(2, 16, 10, 10, 32, (3, 3), (1, 1), (1, 1), (1, 1), seed=9)
    got = P.conv2d_q8(x, sx, zx, pack_conv(w), sw, b, [3, 3], [1, 1], [1, 1], [1, 1], so, zo)
    xd = QD.dequantize_per_tensor(x, sx, zx, -128, 127, torch.int8)
    wd = QD.dequantize_per_channel(w, sw, torch.zeros(32, dtype=torch.int64), 0, -127, 127, torch.int8)
    want = QD.quantize_per_tensor(F.conv2d(xd, wd, b, 1, 1), so, zo, -128, 127, torch.int8)
    diff = (got.int() - want.int()).abs()
    assert bool((diff <= 1).all()) and diff.float().mean() < 0.01


def isa_check():
    for m in (1, 3, 6, 40):
        check_linear(*make(37, 130, (m,), seed=m))
    check_linear(*make(37, 130, (6,), seed=1), qmin=0)
    # the epilogue's vectors with and without a bias, over panels of several vectors (many columns)
    check_linear(*make(250, 20, (9,), seed=4))
    check_linear(*make(250, 20, (9,), seed=5, bias=False), qmin=3)
    # first layers: 1 and 3 input channels (whole kernel rows copied where they lie inside; the
    # dilated one tap by tap), without a bias and with a relu clamp
    # (a kernel row of kw x c bytes takes each of the short-copy sizes: 21, 3, 9, 5, 48 and 2 x 3)
    for c, ks, st, pad, dil in ((3, (7, 7), (2, 2), (3, 3), (1, 1)), (1, (3, 3), (1, 1), (1, 1), (1, 1)),
                                (3, (3, 3), (2, 2), (2, 2), (2, 2)), (3, (3, 3), (2, 2), (1, 1), (1, 1)),
                                (1, (5, 5), (1, 2), (2, 2), (1, 1)), (16, (3, 3), (1, 1), (1, 1), (1, 1)),
                                (2, (3, 3), (1, 1), (0, 0), (1, 1))):
        x, sx, zx, w, sw, b, so, zo, acc = conv_case(2, c, 11, 9, 20, ks, st, pad, dil, seed=6)
        for qmin, bias in ((-128, b), (zo, None)):
            got = P.conv2d_q8(x, sx, zx, pack_conv(w), sw, bias, list(ks), list(st), list(pad), list(dil), so, zo,
                              qmin, 127)
            check_codes(got, *exact(acc, sx, sw, bias, so, zo, qmin, 127, 1), zo, qmin, 127)
    x, sx, zx, w, sw, b, so, zo, acc = conv_case(2, 5, 7, 7, 9, (3, 3), (2, 1), (1, 1), (1, 1), seed=2)
    got = P.conv2d_q8(x, sx, zx, pack_conv(w), sw, b, [3, 3], [2, 1], [1, 1], [1, 1], so, zo)
    check_codes(got, *exact(acc, sx, sw, b, so, zo, -128, 127, 1), zo, -128, 127)
    for groups, oc in ((4, 12), (8, 8)):  # grouped (the panels per group) and depthwise
        x, sx, zx, w, sw, b, so, zo, acc = conv_case(1, 8, 6, 6, oc, (3, 3), (1, 1), (1, 1), (1, 1), 3, groups)
        got = P.conv2d_q8(x, sx, zx, pack_conv(w), sw, b, [3, 3], [1, 1], [1, 1], [1, 1], so, zo, -128, 127, groups)
        check_codes(got, *exact(acc, sx, sw, b, so, zo, -128, 127, 1), zo, -128, 127)
    # grouped, the direct kernels: AVX2's permuted kind (4 in / 4 out; 4 in / 5 out, a partial
    # vector) and its single-group kind (8 in / 16 out), padded borders and both clamps
    for c, oc, groups in ((64, 64, 16), (12, 15, 3), (32, 64, 4)):
        x, sx, zx, w, sw, b, so, zo, acc = conv_case(1, c, 5, 6, oc, (3, 3), (1, 2), (1, 1), (1, 1), 5, groups)
        for qmin, bias in ((-128, b), (zo, None)):
            got = P.conv2d_q8(x, sx, zx, pack_conv(w), sw, bias, [3, 3], [1, 2], [1, 1], [1, 1], so, zo, qmin, 127,
                              groups)
            check_codes(got, *exact(acc, sx, sw, bias, so, zo, qmin, 127, 1), zo, qmin, 127)
    # depthwise over more than one pass of the vector kernels (64 channels), both epilogue clamps
    x, sx, zx, w, sw, b, so, zo, acc = conv_case(1, 72, 5, 6, 72, (3, 3), (2, 1), (1, 1), (1, 1), 4, 72)
    for qmin, bias in ((-128, b), (zo, None)):
        got = P.conv2d_q8(x, sx, zx, pack_conv(w), sw, bias, [3, 3], [2, 1], [1, 1], [1, 1], so, zo, qmin, 127, 72)
        check_codes(got, *exact(acc, sx, sw, bias, so, zo, qmin, 127, 1), zo, qmin, 127)


@pytest.mark.parametrize("cap,kernels", ISA_CASES)
def test_every_isa_kernel(cap, kernels):
    run_under_isa("tests.kernels.test_linear_static", cap, kernels)


def test_opcheck():
    x, sx, zx, w, sw, b, so, zo = make(12, 64, (3,))
    opcheck(P.linear_q8.default, (x, sx, zx, P.pack_weight_int8(w), sw, b, so, zo, zo, 127))
    xc, sx, zx, wc, sw, b, so, zo, _ = conv_case(1, 4, 6, 6, 8, (3, 3), (1, 1), (1, 1), (1, 1))
    opcheck(P.conv2d_q8.default, (xc, sx, zx, pack_conv(wc), sw, b, [3, 3], [1, 1], [1, 1],
                                  [1, 1], so, zo, -128, 127))
    xc, sx, zx, wc, sw, b, so, zo, _ = conv_case(1, 4, 6, 6, 4, (3, 3), (1, 1), (1, 1), (1, 1), groups=4)
    opcheck(P.conv2d_q8.default, (xc, sx, zx, pack_conv(wc), sw, b, [3, 3], [1, 1], [1, 1],
                                  [1, 1], so, zo, -128, 127, 4))


class StaticConv(torch.nn.Module):
    def __init__(self, w, sw, b):
        super().__init__()
        self.register_buffer("packed", pack_conv(w))
        self.register_buffer("sw", sw)
        self.register_buffer("b", b)

    def forward(self, x):
        return P.conv2d_q8(x, 0.03, 2, self.packed, self.sw, self.b, [3, 3], [1, 1], [1, 1], [1, 1], 0.5, 0)


def export_and_compile_match_eager(m, args, target):
    """m exported (keeping `target` in its graph) and compiled gives eager's output exactly."""
    ep = torch.export.export(m, args)
    assert target in {str(n.target) for n in ep.graph.nodes}
    want = m(*args)
    assert torch.equal(ep.module()(*args), want)
    assert torch.equal(torch.compile(m, fullgraph=True)(*args), want)


def test_export_and_compile_match_eager():
    x, _, _, w, sw, b, _, _, _ = conv_case(2, 4, 6, 6, 8, (3, 3), (1, 1), (1, 1), (1, 1))
    export_and_compile_match_eager(StaticConv(w, sw, b), (x,), "pt2q.conv2d_q8.default")


def test_errors_name_the_argument():
    x, sx, zx, w, sw, b, so, zo = make(12, 64, (3,))
    packed = P.pack_weight_int8(w)
    with pytest.raises(ValueError, match="linear_q8: input must be int8 codes"):
        P.linear_q8(x.float(), sx, zx, packed, sw, b, so, zo)
    with pytest.raises(ValueError, match=r"linear_q8: packed_weight has shape \[3, 256\] but a packed \[12, 48\]"):
        P.linear_q8(x[:, :48], sx, zx, packed, sw, b, so, zo)
    with pytest.raises(ValueError, match="linear_q8: output_scale must be positive and finite, got 0"):
        P.linear_q8(x, sx, zx, packed, sw, b, 0.0, zo)
    with pytest.raises(ValueError, match="linear_q8: input_zero_point must be in"):
        P.linear_q8(x, sx, 300, packed, sw, b, so, zo)
    with pytest.raises(ValueError, match=r"linear_q8: need -128 <= output_quant_min <= output_quant_max <= 127"):
        P.linear_q8(x, sx, zx, packed, sw, b, so, zo, 5, 4)
    with pytest.raises(ValueError, match=r"linear_q8: bias must be a float \[12\]"):
        P.linear_q8(x, sx, zx, packed, sw, b[:3], so, zo)
    xc = torch.zeros(1, 4, 2, 2, dtype=torch.int8)
    with pytest.raises(ValueError, match="conv2d_q8: the output would be empty"):
        P.conv2d_q8(xc, sx, zx, P.pack_weight_int8(torch.zeros(8, 36, dtype=torch.int8)), torch.ones(8), None,
                    [3, 3], [1, 1], [0, 0], [1, 1], so, zo)
    with pytest.raises(ValueError, match=r"conv2d_q8: packed_weight has shape .* in_features from input channels"):
        P.conv2d_q8(xc, sx, zx, packed, torch.ones(8), None, [1, 1], [1, 1], [0, 0], [1, 1], so, zo)
