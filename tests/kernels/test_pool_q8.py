"""max_pool2d_q8 on CPU: the codes aten.max_pool2d gives on the same int8 / uint8 codes, for kernel
sizes, strides, paddings, dilations and ceil_mode (including a last window that starts in the
padding), 3-d and 4-d and non-contiguous inputs, extreme codes; equal to the q/dq chain
dequantize -> max_pool2d -> quantize with shared qparams; errors; opcheck."""

import pytest
import torch
import torch.nn.functional as F
from torch.library import opcheck

import pt2q  # noqa: F401
import torch.ao.quantization.fx._decomposed  # noqa: F401  (registers quantized_decomposed)
from pt2q import _C

P = torch.ops.pt2q
QD = torch.ops.quantized_decomposed
REF = _C.reference

# kernel, stride, padding, dilation, ceil_mode
WINDOWS = [((3, 3), (2, 2), (1, 1), (1, 1), False), ((2, 2), (2, 2), (0, 0), (1, 1), False),
           ((3, 3), (2, 2), (1, 1), (1, 1), True), ((3, 2), (1, 3), (1, 0), (1, 1), True),
           ((3, 3), (1, 1), (1, 1), (2, 2), False), ((5, 5), (3, 2), (2, 1), (1, 2), True),
           ((1, 1), (1, 1), (0, 0), (1, 1), False)]


def codes(shape, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    lo, hi = (-128, 128) if dtype == torch.int8 else (0, 256)
    x = torch.randint(lo, hi, shape, dtype=torch.int16, generator=g).to(dtype)
    x.view(-1)[::7] = lo  # extremes, so that a window of them must keep the lowest code
    x.view(-1)[::11] = hi - 1
    return x


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8])
@pytest.mark.parametrize("window", WINDOWS)
def test_matches_aten_on_the_codes(dtype, window):
    k, s, p, d, ceil = window
    for shape in ((2, 3, 11, 13), (4, 9, 8), (1, 1, 5, 6)):
        x = codes(shape, dtype, seed=sum(shape))
        want = F.max_pool2d(x.float(), k, s, p, d, ceil).to(dtype)
        got = P.max_pool2d_q8(x, k, s, p, d, ceil)
        assert got.dtype == dtype and torch.equal(got, want), (shape, window)
        assert torch.equal(REF.max_pool2d_q8(x, k, s, p, d, ceil), want)
    xt = codes((2, 13, 11, 3), dtype, seed=5).permute(0, 3, 2, 1)  # not contiguous
    assert torch.equal(P.max_pool2d_q8(xt, k, s, p, d, ceil), F.max_pool2d(xt.float(), k, s, p, d, ceil).to(dtype))


def test_equals_the_qdq_chain_with_shared_qparams():
    x = torch.randn(2, 4, 12, 12) * 3
    for scale, zp, lo, hi, dt in ((0.02, -5, -128, 127, torch.int8), (0.031, 130, 0, 255, torch.uint8)):
        q = QD.quantize_per_tensor(x, scale, zp, lo, hi, dt)
        chain = QD.quantize_per_tensor(F.max_pool2d(QD.dequantize_per_tensor(q, scale, zp, lo, hi, dt), 3, 2, 1),
                                       scale, zp, lo, hi, dt)
        assert torch.equal(P.max_pool2d_q8(q, [3, 3], [2, 2], [1, 1]), chain)


def test_empty_stride_means_the_kernel():
    x = codes((1, 2, 8, 8), torch.int8, 1)
    assert torch.equal(P.max_pool2d_q8(x, [2, 2], []), F.max_pool2d(x.float(), 2).to(torch.int8))


def test_errors_name_the_argument():
    x = codes((1, 2, 8, 8), torch.int8, 1)
    with pytest.raises(ValueError, match=r"max_pool2d_q8: input must be int8 or uint8 codes, got Float"):
        P.max_pool2d_q8(x.float(), [2, 2], [2, 2])
    with pytest.raises(ValueError, match=r"max_pool2d_q8: input must be \[N, C, H, W\] or \[C, H, W\], got 2"):
        P.max_pool2d_q8(x[0, 0], [2, 2], [2, 2])
    with pytest.raises(ValueError, match=r"max_pool2d_q8: padding must be non-negative and at most half the kernel"):
        P.max_pool2d_q8(x, [2, 2], [2, 2], [2, 2])
    with pytest.raises(ValueError, match=r"max_pool2d_q8: kernel_size, stride and dilation must be positive"):
        P.max_pool2d_q8(x, [2, 2], [0, 2])
    with pytest.raises(ValueError, match=r"max_pool2d_q8: the output of a 8 x 8 input would be empty"):
        P.max_pool2d_q8(x, [9, 9], [1, 1])


def test_opcheck():
    opcheck(P.max_pool2d_q8.default, (codes((2, 3, 9, 9), torch.int8, 2), [3, 3], [2, 2], [1, 1], [1, 1], True))
    opcheck(P.max_pool2d_q8.default, (codes((3, 9, 9), torch.uint8, 3), [2, 2], [2, 2]))
