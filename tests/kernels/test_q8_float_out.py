"""The float-output static ops, linear_q8_float and conv2d_q8_float: linear_q8 / conv2d_q8's
products with an fp32 output, y = s_x * s_w * sum (q - z_x) w + bias. Against an independent fp64
computation (F.linear / F.conv2d of the codes in fp64) within 8 fp32 ulps of s_x s_w sum |q - z_x|
|w| + |bias|, bit for bit against the y linear_q8 / conv2d_q8 round (their codes are
quantize_per_tensor's of this y), against the chain's fp32 op, every ISA's kernels, input layouts,
opcheck, export, compile and errors."""

import pytest
import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401
import torch.nn.functional as F
from torch.library import opcheck

import pt2q  # noqa: F401
from pt2q import _C
from tests.kernels.test_linear_static import StaticConv, conv_case, export_and_compile_match_eager, make, pack_conv
from tests.kernels.test_linear_weight_only import ISA_CASES, run_under_isa

P = torch.ops.pt2q
QD = torch.ops.quantized_decomposed
REF = _C.reference

SHAPES = [  # n, c, h, w, out channels, kernel_size, stride, padding, dilation, groups
    (1, 3, 8, 8, 16, (3, 3), (1, 1), (1, 1), (1, 1), 1),  # a first layer
    (2, 16, 9, 7, 32, (3, 3), (2, 2), (1, 1), (1, 1), 1),
    (3, 32, 4, 4, 64, (1, 1), (1, 1), (0, 0), (1, 1), 1),
    (2, 35, 7, 9, 20, (3, 3), (1, 1), (1, 1), (1, 1), 1),  # ragged rows and columns
    (1, 8, 12, 12, 5, (5, 3), (1, 2), (2, 0), (2, 1), 1),  # dilated, 5 channels
    (1, 24, 6, 6, 300, (1, 1), (1, 1), (0, 0), (1, 1), 1),  # several column panels
    (2, 16, 9, 9, 16, (3, 3), (1, 1), (1, 1), (1, 1), 16),  # depthwise: a GEMM per group
    (2, 16, 8, 8, 32, (3, 3), (1, 1), (1, 1), (1, 1), 4),  # grouped
]


def fp64(x, zx, w, sw, sx, b, shape):
    """y in fp64 and the fp32 kernels' error bound: the CPU tiles sum partial dot products of
    unsigned codes, each corrected and scaled in fp32 (kernels/cpu/linear_int8_impl.h), so the
    rounding is relative to s_x s_w sum |q - z_x| |w| (here 8 ulps of it), not to y."""
    n, c, h, w_, oc, ks, st, pad, dil, groups = shape
    xd, wd = x.double() - zx, w.double()
    ch = [None, slice(None), None, None]
    y = F.conv2d(xd, wd, None, st, pad, dil, groups) * sx * sw.double()[ch]
    mag = F.conv2d(xd.abs(), wd.abs(), None, st, pad, dil, groups) * sx * sw.double()[ch]
    if b is not None:
        y, mag = y + b.double()[ch], mag + b.double().abs()[ch]
    return y, 2.0 ** -21 * mag


def check(shape, seed=0, bias=True, channels_last=False):
    n, c, h, w_, oc, ks, st, pad, dil, groups = shape
    x, sx, zx, w, sw, b, so, zo, acc = conv_case(*shape[:-1], seed=seed, groups=groups)
    b = b if bias else None
    packed = pack_conv(w)
    xi = x.contiguous(memory_format=torch.channels_last) if channels_last else x
    geo = (list(ks), list(st), list(pad), list(dil))
    got = P.conv2d_q8_float(xi, sx, zx, packed, sw, b, *geo, groups)
    assert got.dtype == torch.float32 and got.shape == acc.shape and got.is_contiguous()
    y, bound = fp64(x, zx, w, sw, sx, b, shape)
    assert bool(((got.double() - y).abs() <= bound).all())
    assert torch.equal(REF.conv2d_q8_float(x, sx, zx, packed, sw, b, *geo, groups), y.float())
    # conv2d_q8 rounds this very y: its codes are quantize_per_tensor's (fp32 steps) of it
    codes = P.conv2d_q8(x, sx, zx, packed, sw, b, *geo, so, zo, -128, 127, groups)
    inv = torch.tensor(1.0 / so, dtype=torch.float32)
    assert torch.equal(codes, ((got * inv).round() + zo).clamp(-128, 127).to(torch.int8))
    return got


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("bias", [True, False])
def test_matches_fp64_and_conv2d_q8(shape, bias):
    check(shape, seed=shape[1] + shape[4], bias=bias)


def test_channels_last_input_gives_the_same_values():
    shape = SHAPES[3]
    assert torch.equal(check(shape, seed=5), check(shape, seed=5, channels_last=True))


def test_against_the_chains_fp32_conv():
    x, sx, zx, w, sw, b, so, zo, _ = conv_case(2, 16, 10, 10, 32, (3, 3), (1, 1), (1, 1), (1, 1), seed=9)
    got = P.conv2d_q8_float(x, sx, zx, pack_conv(w), sw, b, [3, 3], [1, 1], [1, 1], [1, 1])
    xd = QD.dequantize_per_tensor(x, sx, zx, -128, 127, torch.int8)
    wd = QD.dequantize_per_channel(w, sw, torch.zeros(32, dtype=torch.int64), 0, -127, 127, torch.int8)
    want = F.conv2d(xd, wd, b, 1, 1)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5 * float(want.abs().max()))


def fp64_linear(x, zx, w, sw, sx, b):
    """The linear's y in fp64 and the same bound as fp64's."""
    xd, wd = x.double() - zx, w.double()
    y = F.linear(xd, wd) * sx * sw.double()
    mag = F.linear(xd.abs(), wd.abs()) * sx * sw.double()
    if b is not None:
        y, mag = y + b.double(), mag + b.double().abs()
    return y, 2.0 ** -21 * mag


def check_linear(n, k, m_shape, seed=0, bias=True):
    x, sx, zx, w, sw, b, so, zo = make(n, k, m_shape, seed=seed, bias=bias)
    packed = P.pack_weight_int8(w)
    got = P.linear_q8_float(x, sx, zx, packed, sw, b)
    assert got.dtype == torch.float32 and got.shape == (*m_shape, n)
    y, bound = fp64_linear(x, zx, w, sw, sx, b)
    assert bool(((got.double() - y).abs() <= bound).all())
    assert torch.equal(REF.linear_q8_float(x, sx, zx, packed, sw, b), y.float())
    codes = P.linear_q8(x, sx, zx, packed, sw, b, so, zo)
    inv = torch.tensor(1.0 / so, dtype=torch.float32)
    assert torch.equal(codes, ((got * inv).round() + zo).clamp(-128, 127).to(torch.int8))
    return got


LINEAR_SHAPES = [(5, 33, (1,)), (67, 256, (7,)), (130, 512, (33,)), (64, 1000, (128,)), (300, 96, (3, 5))]


@pytest.mark.parametrize("n,k,m_shape", LINEAR_SHAPES)
@pytest.mark.parametrize("bias", [True, False])
def test_linear_matches_fp64_and_linear_q8(n, k, m_shape, bias):
    check_linear(n, k, m_shape, seed=n + k, bias=bias)


def test_linear_against_the_chains_fp32_linear():
    x, sx, zx, w, sw, b, _, _ = make(300, 512, (64,), seed=7)
    got = P.linear_q8_float(x, sx, zx, P.pack_weight_int8(w), sw, b)
    xd = QD.dequantize_per_tensor(x, sx, zx, -128, 127, torch.int8)
    wd = QD.dequantize_per_channel(w, sw, torch.zeros(300, dtype=torch.int64), 0, -127, 127, torch.int8)
    want = F.linear(xd, wd, b)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5 * float(want.abs().max()))


def isa_check():
    for shape in SHAPES:
        check(shape, seed=shape[4])
        check(shape, seed=shape[4] + 1, bias=False)
    for n, k, m_shape in LINEAR_SHAPES:
        check_linear(n, k, m_shape, seed=n)
        check_linear(n, k, m_shape, seed=k, bias=False)


@pytest.mark.parametrize("cap,kernels", ISA_CASES)
def test_every_isa_kernel(cap, kernels):
    run_under_isa("tests.kernels.test_q8_float_out", cap, kernels)


def test_opcheck():
    x, sx, zx, w, sw, b, _, _ = make(12, 64, (3,))
    opcheck(P.linear_q8_float.default, (x, sx, zx, P.pack_weight_int8(w), sw, b))
    x, sx, zx, w, sw, b, _, _, _ = conv_case(1, 4, 6, 6, 8, (3, 3), (1, 1), (1, 1), (1, 1))
    opcheck(P.conv2d_q8_float.default, (x, sx, zx, pack_conv(w), sw, b, [3, 3], [1, 1], [1, 1], [1, 1]))
    x, sx, zx, w, sw, b, _, _, _ = conv_case(1, 8, 6, 6, 8, (3, 3), (2, 2), (1, 1), (1, 1), groups=8)
    opcheck(P.conv2d_q8_float.default, (x, sx, zx, pack_conv(w), sw, b, [3, 3], [2, 2], [1, 1], [1, 1], 8))


class FloatConv(StaticConv):
    def forward(self, x):
        return torch.relu(P.conv2d_q8_float(x, 0.03, 2, self.packed, self.sw, self.b, [3, 3], [1, 1], [1, 1], [1, 1]))


class FloatLinear(torch.nn.Module):
    def __init__(self, w, sw, b):
        super().__init__()
        self.register_buffer("packed", P.pack_weight_int8(w))
        self.register_buffer("sw", sw)
        self.register_buffer("b", b)

    def forward(self, x):
        return P.linear_q8_float(x, 0.03, 2, self.packed, self.sw, self.b)


def test_linear_export_and_compile_match_eager():
    x, _, _, w, sw, b, _, _ = make(40, 96, (2, 9), seed=3)
    export_and_compile_match_eager(FloatLinear(w, sw, b), (x,), "pt2q.linear_q8_float.default")


def test_export_and_compile_match_eager():
    x, _, _, w, sw, b, _, _, _ = conv_case(2, 4, 6, 6, 8, (3, 3), (1, 1), (1, 1), (1, 1))
    export_and_compile_match_eager(FloatConv(w, sw, b), (x,), "pt2q.conv2d_q8_float.default")


def test_linear_errors_name_the_op():
    x, sx, zx, w, sw, b, _, _ = make(12, 64, (3,))
    packed = P.pack_weight_int8(w)
    with pytest.raises(ValueError, match="linear_q8_float: input must be int8 codes, got Float"):
        P.linear_q8_float(x.float(), sx, zx, packed, sw, b)
    with pytest.raises(ValueError, match=r"linear_q8_float: packed_weight has shape \[3, 256\] but a packed \[12, 48\]"):
        P.linear_q8_float(x[:, :48], sx, zx, packed, sw, b)
    with pytest.raises(ValueError, match=r"linear_q8_float: bias must be a float \[12\]"):
        REF.linear_q8_float(x, sx, zx, packed, sw, b[:3])


def test_errors_name_the_op():
    x, sx, zx, w, sw, b, _, _, _ = conv_case(1, 4, 6, 6, 8, (3, 3), (1, 1), (1, 1), (1, 1))
    packed = pack_conv(w)
    with pytest.raises(ValueError, match="conv2d_q8_float: input must be int8 codes, got Float"):
        P.conv2d_q8_float(x.float(), sx, zx, packed, sw, b, [3, 3], [1, 1], [1, 1], [1, 1])
    with pytest.raises(ValueError, match=r"conv2d_q8_float: packed_weight has shape .* in_features from input "
                                         r"channels / groups x kernel_size"):
        P.conv2d_q8_float(x, sx, zx, packed, sw, b, [1, 1], [1, 1], [0, 0], [1, 1])
    with pytest.raises(ValueError, match="conv2d_q8_float: input_scale must be positive and finite, got 0"):
        P.conv2d_q8_float(x, 0.0, zx, packed, sw, b, [3, 3], [1, 1], [1, 1], [1, 1])
    with pytest.raises(ValueError, match=r"conv2d_q8_float: groups \(3\) must be positive and divide"):
        P.conv2d_q8_float(x, sx, zx, packed, sw, b, [3, 3], [1, 1], [1, 1], [1, 1], 3)
    with pytest.raises(ValueError, match="conv2d_q8_float: the output would be empty"):
        REF.conv2d_q8_float(x[..., :2, :2], sx, zx, packed, sw, b, [3, 3], [1, 1], [0, 0], [1, 1])
