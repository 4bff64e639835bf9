"""quantize_per_token_int8 and linear_w8a8/w4a8 on CPU. The activation codes, scales and zero
points bit for bit against torch's quantized_decomposed per-token pair (an independent
implementation) on random and adversarial rows; the linear against an fp64 reference built from
those ops, within the bound of the kernels' fp32 epilogue, for every ISA's kernels, per-channel
and per-group scales, zero points, bias, fp32/bf16/fp16; opcheck, export, compile; errors."""

import pytest
import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401  (registers quantized_decomposed)
from torch.library import opcheck

import pt2q  # noqa: F401
from pt2q import _C
from tests.kernels import test_linear_weight_only as woq
from tests.kernels.test_linear_weight_only import ISA_CASES, check_export_and_compile, run_under_isa

P = torch.ops.pt2q
D = torch.ops.quantized_decomposed
REF = _C.reference
EPS32 = 2.0 ** -24
ULP = {torch.float32: 0.0, torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11}


def torch_per_token(x):
    """torch's own per-token asymmetric int8 quantization of x (as fp32)."""
    xf = x.float()
    s, z = D.choose_qparams_per_token_asymmetric(xf, torch.int8)
    return D.quantize_per_token(xf, s, z, -128, 127, torch.int8), s, z


def adversarial_rows(k, g):
    rows = [
        torch.zeros(k), torch.full((k,), 3.0), torch.full((k,), -2.5), torch.rand(k, generator=g) + 1.0,
        -(torch.rand(k, generator=g) + 1.0), torch.randn(k, generator=g) * 1e-30, torch.randn(k, generator=g) * 1e30,
        torch.randn(k, generator=g) * 1e-40,  # subnormal
        torch.randn(k, generator=g) * torch.logspace(-20, 20, k),
    ]
    r = torch.zeros(k)
    r[0], r[-1] = -1.0, 254.0  # scale exactly 1: codes land on .5 ties
    r[1:-1] = torch.arange(max(k - 2, 0)) * 0.5 - 3.0
    rows.append(r)
    t = torch.randn(k, generator=g)
    t[k // 2] = -0.0
    rows.append(t)
    # values a few ULPs around code boundaries of a fixed scale
    u = torch.randn(k, generator=g)
    s = (u.max().clamp(min=0) - u.min().clamp(max=0)) / 255
    rows.append(torch.nextafter((u / s).round() * s + s / 2, torch.tensor(float("inf"))))
    return torch.stack(rows)


@pytest.mark.parametrize("k", [1, 7, 16, 100, 4099])
def test_per_token_codes_match_torch(k):
    g = torch.Generator().manual_seed(k)
    x = torch.cat([torch.randn(40, k, generator=g) * torch.logspace(-3, 3, 40).unsqueeze(1), adversarial_rows(k, g)])
    want = torch_per_token(x)
    for got in (P.quantize_per_token_int8(x), REF.quantize_per_token_int8(x)):
        for a, b in zip(got, want):
            assert a.dtype == b.dtype and a.shape == b.shape
            assert torch.equal(a, b)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_per_token_half_inputs_quantize_their_fp32_value(dtype):
    x = (torch.randn(3, 5, 300, generator=torch.Generator().manual_seed(1)) * 4).to(dtype)
    got = P.quantize_per_token_int8(x)
    want = torch_per_token(x.float())
    assert got[0].shape == (3, 5, 300) and got[1].shape == (3, 5, 1)
    for a, b in zip(got, want):
        assert torch.equal(a, b)


def make(n, k, groups, zp, bias, dtype, m_shape, seed=0, bits=8):
    g = torch.Generator().manual_seed(seed)
    lo, hi = (-128, 128) if bits == 8 else (-8, 8)
    w = torch.randint(lo, hi, (n, k), dtype=torch.int8, generator=g)
    shape = (n,) if groups == 0 else (n, groups)
    scales = torch.rand(shape, generator=g) * 0.02 + 1e-4
    zps = torch.randint(-(hi // 4) - 1, hi // 4 + 1, shape, dtype=torch.int32, generator=g) if zp else None
    b = torch.randn(n, generator=g) if bias else None
    x = (torch.randn(*m_shape, k, generator=g) * 3 + torch.randn(k, generator=g)).to(dtype)
    return w, scales, zps, b, x


def decomposed_chain(x, w, scales, zps, bias):
    """The Q/DQ graph the op replaces, in fp64: torch's per-token q/dq, its group dequantize."""
    n, k = w.shape
    q, s, z = torch_per_token(x.reshape(-1, k))
    xd = D.dequantize_per_token(q, s, z, -128, 127, torch.int8, torch.float64)
    groups = scales.reshape(n, -1).shape[1]
    wz = zps.reshape(n, groups) if zps is not None else torch.zeros(n, groups, dtype=torch.int32)
    wd = D.dequantize_per_channel_group(w, scales.reshape(n, groups).double(), wz, -128, 127, torch.int8,
                                        k // groups, torch.float64)
    y = xd @ wd.t()
    return (y + bias.double() if bias is not None else y), xd


def check(w, scales, zps, b, x, bits=8):
    linear = getattr(P, f"linear_w{bits}a8")
    packed = getattr(P, f"pack_weight_int{bits}")(w)
    got = linear(x, packed, scales, zps, b)
    ref = getattr(REF, f"linear_w{bits}a8")(x, packed, scales, zps, b)
    want, xd = decomposed_chain(x, w, scales, zps, b)
    n, k = w.shape
    assert got.dtype == x.dtype and got.shape == (*x.shape[:-1], n)
    # fp32 epilogue: one conversion and scale per group, fp32 sums over the groups and 4 lanes,
    # the token scale, bias and zero-point term: a few roundings of the sum of |terms| each.
    groups = scales.reshape(n, -1).shape[1]
    s = scales.reshape(n, groups).double().repeat_interleave(k // groups, dim=1)
    mag = w.double().abs()
    if zps is not None:
        mag = mag + zps.reshape(n, groups).double().abs().repeat_interleave(k // groups, dim=1)
    terms = xd.abs() @ (mag * s).t() + (b.double().abs() if b is not None else 0)
    lim = 2 * (groups + 8) * EPS32 * terms + ULP[x.dtype] * want.abs() * 2 + 1e-30
    for y in (got, ref):
        err = (y.reshape(-1, n).double() - want).abs()
        assert bool((err <= lim).all()), (err - lim).max()
    return got


BITS = [8, 4]


@pytest.mark.parametrize("bits", BITS)
@pytest.mark.parametrize("m", [1, 2, 7, 16, 33, 128])
@pytest.mark.parametrize("n,k,groups", [(5, 33, 0), (67, 256, 0), (64, 256, 8), (13, 96, 3), (130, 512, 16)])
def test_matches_decomposed_chain(m, n, k, groups, bits):
    if bits == 4 and groups and (k // groups) % 32:
        groups = 0
    check(*make(n, k, groups, m % 2 == 1, m != 2, torch.float32, (m,), seed=m * 31 + n, bits=bits), bits=bits)


@pytest.mark.parametrize("bits", BITS)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("m_shape", [(1,), (3, 5), (2, 16), (3, 50)])
def test_half_inputs(dtype, m_shape, bits):
    check(*make(40, 128, 2 if bits == 8 else 4, True, True, dtype, m_shape, bits=bits), bits=bits)


@pytest.mark.parametrize("bits", BITS)
def test_many_panels_and_extreme_codes(bits):
    """Large N (many panels, a ragged last one), saturating codes, constant and zero tokens."""
    w, s, z, b, x = make(1030, 160, 5 if bits == 8 else 0, True, True, torch.float32, (9,), seed=5, bits=bits)
    w[::3] = 127 if bits == 8 else 7
    w[1::3] = -128 if bits == 8 else -8
    x[0] = 0
    x[1] = 7.0
    x[2] = torch.linspace(-1e4, 1e-4, x.shape[1])
    check(w, s, z, b, x, bits=bits)


def isa_check():
    woq.isa_check(make, check)


@pytest.mark.parametrize("cap,kernels", ISA_CASES)
def test_every_isa_kernel(cap, kernels):
    run_under_isa("tests.kernels.test_linear_dynamic", cap, kernels)


@pytest.mark.parametrize("bits", BITS)
def test_opcheck(bits):
    *_, x = woq.opcheck_linear(bits, 8, make)
    opcheck(P.quantize_per_token_int8.default, (x,))


@pytest.mark.parametrize("bits", BITS)
def test_export_and_compile_match_eager(bits):
    check_export_and_compile(bits, 8)


def test_errors_name_the_argument_and_row():
    w, s, z, b, x = make(12, 64, 2, True, True, torch.float32, (3,))
    packed = P.pack_weight_int8(w)
    with pytest.raises(ValueError, match="linear_w8a8: input must be float32, bfloat16 or float16"):
        P.linear_w8a8(x.double(), packed, s)
    with pytest.raises(ValueError, match=r"linear_w8a8: packed_weight has shape \[3, 256\] but a packed \[12, 48\]"):
        P.linear_w8a8(x[:, :48], packed, s)
    with pytest.raises(ValueError, match=r"linear_w4a8: the group size \(16 = in_features / groups\) must be a "
                                         r"multiple of 32"):
        P.linear_w4a8(x, P.pack_weight_int4(w.clamp(-8, 7)), torch.ones(12, 4))
    bad = x.clone()
    bad[2, 5] = float("nan")
    for fn in (P.linear_w8a8, REF.linear_w8a8):
        with pytest.raises(ValueError, match=r"linear_w8a8: input row 2 \(of 3 rows of length 64\) holds NaN or Inf"):
            fn(bad, packed, s)
    bad[2, 5] = float("inf")
    with pytest.raises(ValueError, match=r"quantize_per_token_int8: input row 2 .* holds NaN or Inf"):
        P.quantize_per_token_int8(bad)
    with pytest.raises(ValueError, match="quantize_per_token_int8: input must be float32"):
        P.quantize_per_token_int8(x.double())


def torch_per_tensor_chain(x, eps):
    """XNNPACK's dynamic activation chain, with torch's ops on x in its own dtype (a bf16/fp16
    model's graph chooses its qparams in that dtype): one scale for the whole input."""
    s, z = D.choose_qparams.tensor(x, -128, 127, eps, torch.int8)
    q = D.quantize_per_tensor.tensor(x, s, z, -128, 127, torch.int8)
    return D.dequantize_per_tensor.tensor(q, s, z, -128, 127, torch.int8).double()


@pytest.mark.parametrize("bits", BITS)
@pytest.mark.parametrize("m_shape", [(1,), (7,), (3, 50)])
@pytest.mark.parametrize("eps", [2.0 ** -12, torch.finfo(torch.float32).eps])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_per_tensor_mode_matches_the_xnnpack_dynamic_chain(bits, m_shape, eps, dtype):
    """per_tensor_eps: the activation codes of torch's choose_qparams.tensor -> quantize_per_tensor
    (compared through the linear: a code off by one moves the output far past the bound); for
    bf16/fp16 x the scale rounds to that dtype as torch's does."""
    w, scales, zps, b, x = make(40, 128, 0 if bits == 8 else 4, bits == 4, True, torch.float32, m_shape,
                                seed=len(m_shape), bits=bits)
    x[..., 3] = 0.0
    x = x.to(dtype)
    packed = getattr(P, f"pack_weight_int{bits}")(w)
    n, k = w.shape
    xd = torch_per_tensor_chain(x.reshape(-1, k), eps)
    groups = scales.reshape(n, -1).shape[1]
    wz = zps.reshape(n, groups) if zps is not None else torch.zeros(n, groups, dtype=torch.int32)
    wd = D.dequantize_per_channel_group(w, scales.reshape(n, groups).double(), wz, -128, 127, torch.int8,
                                        k // groups, torch.float64)
    want = xd @ wd.t() + b.double()
    mag = w.double().abs() + (wz.double().abs().repeat_interleave(k // groups, 1))
    terms = xd.abs() @ (mag * scales.reshape(n, groups).double().repeat_interleave(k // groups, 1)).t() + b.abs()
    # a bf16/fp16 output adds its one rounding
    lim = 2 * (groups + 8) * EPS32 * terms + ULP[dtype] * want.abs() * 2 + 1e-30
    for fn in (getattr(P, f"linear_w{bits}a8"), getattr(REF, f"linear_w{bits}a8")):
        got = fn(x, packed, scales, zps, b, per_tensor_eps=eps)
        assert got.dtype == dtype
        err = (got.reshape(-1, n).double() - want).abs()
        assert bool((err <= lim).all()), (err - lim).max()


def test_per_tensor_mode_errors_and_schema():
    w, s, _, _, x = make(12, 64, 0, False, False, torch.float32, (3,))
    bad = x.clone()
    bad[1, 7] = float("inf")
    with pytest.raises(ValueError, match=r"linear_w8a8: input row 1 .* holds NaN or Inf"):
        P.linear_w8a8(bad, P.pack_weight_int8(w), s, per_tensor_eps=1e-5)
    opcheck(P.linear_w8a8.default, (x, P.pack_weight_int8(w), s, None, None, 2.0 ** -12))
