"""pack_weight_int8/int4 and linear_w8a16/w4a16 on CPU against the reference path (dequantize,
then F.linear in fp32): the packed bytes exactly; the linear within the bound of fp32 summation
in any order, for every ISA's kernel, both the block-kernel (few rows) and GEMM (many rows)
paths, per-channel and per-group scales, with and without zero points and bias, fp32/bf16/fp16
inputs; opcheck, export and compile; errors name the argument."""

import os
import subprocess
import sys

import pytest
import torch
from torch.library import opcheck

import pt2q  # noqa: F401
from pt2q import _C

P = torch.ops.pt2q
REF = _C.reference
EPS32 = 2.0 ** -24
ULP = {torch.float32: 0.0, torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11}


def ops(bits):
    name = f"w{bits}a16"
    return (getattr(P, f"pack_weight_int{bits}"), getattr(P, f"linear_{name}"),
            getattr(REF, f"pack_weight_int{bits}"), getattr(REF, f"linear_{name}"))


def make(n, k, groups, zp, bias, dtype, m_shape, seed=0, bits=8):
    g = torch.Generator().manual_seed(seed)
    lo, hi = (-128, 128) if bits == 8 else (-8, 8)
    w = torch.randint(lo, hi, (n, k), dtype=torch.int8, generator=g)
    shape = (n,) if groups == 0 else (n, groups)
    scales = torch.rand(shape, generator=g) * 0.02 + 1e-4
    zps = torch.randint(-(hi // 4) - 1, hi // 4 + 1, shape, dtype=torch.int32, generator=g) if zp else None
    b = torch.randn(n, generator=g) if bias else None
    x = (torch.randn(*m_shape, k, generator=g) * 3).to(dtype)
    return w, scales, zps, b, x


def bound(x, w, scales, zps, bias, out_dtype, ref, bits):
    """|y - y_ref| allowed per output: both sums are over the same K products in fp32, in different
    orders, so each is within K * u of the exact sum of |terms| (zero-point terms, and the int4
    kernels' decode offset and its correction, counted too); a bf16/fp16 output adds one rounding."""
    n, k = w.shape
    s = scales.reshape(n, -1).repeat_interleave(k // scales.reshape(n, -1).shape[1], dim=1)
    # int4: the generic and AVX2 fp32 kernels multiply u = v + 8 and subtract 8 * sum(x) (the
    # AVX-512 one multiplies v); the AVX512_BF16 kernel multiplies 128 + u and subtracts
    # 136 * sum(x), so its terms are up to 288 + |v| times |x|.
    mag = w.float().abs() + ((288 if out_dtype == torch.bfloat16 else 16) if bits == 4 else 0)
    if zps is not None:
        z = zps.reshape(n, -1).repeat_interleave(k // zps.reshape(n, -1).shape[1], dim=1)
        mag = mag + z.float().abs()
    terms = x.float().abs() @ (mag * s).t()
    if bias is not None:
        terms = terms + bias.abs()
    # bf16 inputs from 64 rows on run F.linear's numerics where the CPU has AVX512_BF16: weights
    # rounded to bf16 (2^-9 each); elsewhere the fp32 path, inside the same bound
    weights = 2.0 ** -8 * terms if out_dtype == torch.bfloat16 and x.shape[0] >= 64 else 0.0
    return 2 * (k + 2) * EPS32 * terms + weights + ULP[out_dtype] * ref.float().abs() * 2 + 1e-30


def check(w, scales, zps, b, x, bits=8):
    pack, linear, ref_pack, ref_linear = ops(bits)
    packed = pack(w)
    got = linear(x, packed, scales, zps, b)
    want = ref_linear(x, ref_pack(w), scales, zps, b)
    assert got.dtype == x.dtype and got.shape == want.shape
    err = (got.float() - want.float()).abs()
    lim = bound(x.reshape(-1, x.shape[-1]), w, scales, zps, b, x.dtype, want.reshape(-1, w.shape[0]), bits)
    lim = lim.reshape(err.shape)
    assert bool((err <= lim).all()), (err - lim).max()
    return got


BITS = [8, 4]


@pytest.mark.parametrize("bits", BITS)
@pytest.mark.parametrize("n,k", [(1, 16), (5, 33), (64, 100), (67, 256), (130, 512)])
def test_pack_is_the_reference_layout_and_unpacks(n, k, bits):
    pack, _, ref_pack, _ = ops(bits)
    w = make(n, k, 0, False, False, torch.float32, (1,), bits=bits)[0]
    packed = pack(w)
    assert torch.equal(packed, ref_pack(w))
    chunk = 16 if bits == 8 else 32
    kp = (k + chunk - 1) // chunk * chunk
    assert packed.shape == ((n + 3) // 4, kp * 4 * bits // 8)
    if bits == 8:
        rows = packed.reshape(packed.shape[0], -1, 4, 16).permute(0, 2, 1, 3).reshape(-1, kp)
    else:  # low nibbles are k-values 0..15 of a chunk, high nibbles 16..31, each stored as v + 8
        b = packed.view(torch.uint8).reshape(packed.shape[0], -1, 4, 16)
        rows = torch.stack([b & 15, b >> 4], 3).permute(0, 2, 1, 3, 4).reshape(-1, kp).to(torch.int8) - 8
    assert torch.equal(rows[:n, :k], w) and not rows[n:].any() and not rows[:, k:].any()


@pytest.mark.parametrize("bits", BITS)
@pytest.mark.parametrize("m", [1, 2, 7, 16, 33, 128])
@pytest.mark.parametrize("n,k,groups", [(5, 33, 0), (67, 256, 0), (64, 256, 8), (13, 96, 3), (130, 512, 16)])
def test_matches_reference(m, n, k, groups, bits):
    for zp in (False, True):
        for bias in (False, True):
            check(*make(n, k, groups, zp, bias, torch.float32, (m,), seed=m * 7 + n, bits=bits), bits=bits)


@pytest.mark.parametrize("bits", BITS)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("m_shape", [(1,), (3, 5), (2, 16), (4, 20), (3, 50)])
def test_half_inputs(dtype, m_shape, bits):
    check(*make(40, 128, 4, True, True, dtype, m_shape, bits=bits), bits=bits)


# One long x row runs 4 weight blocks at a time on some CPUs (Zen 4) and one at a time on others;
# PT2Q_CPU_W4_QUAD forces either, so both kernels run on every machine. These rows have whole
# groups of 4 blocks and a partial last group of 1-2.
QUAD_SHAPES = [(37, 12300, 0), (20, 11520, 360)]


@pytest.fixture(params=["0", "1"], ids=["single_blocks", "quad_blocks"])
def quad_mode(request, monkeypatch):
    monkeypatch.setenv("PT2Q_CPU_W4_QUAD", request.param)
    return request.param


@pytest.mark.parametrize("bits", BITS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("n,k,groups", QUAD_SHAPES)
def test_long_single_row(n, k, groups, dtype, bits, quad_mode):
    """One long x row (the int4 kernels run 4 weight blocks at a time there): random scales and
    zero points per row and group, so that a block reading another block's qparams shows."""
    for zp in (False, True):
        check(*make(n, k, groups, zp, True, dtype, (1,), seed=k + groups, bits=bits), bits=bits)
        # Integer x and weights, power-of-two scales: every kernel's sums are exact in fp32 here,
        # so the output is the exact result rounded once, and a block that read another's
        # scales or zero points (invisible under the rounding bound) differs.
        w, scales, zps, b, x = make(n, k, groups, zp, True, dtype, (1,), seed=k + groups + 1, bits=bits)
        g = torch.Generator().manual_seed(k)
        scales = 2.0 ** -torch.randint(2, 5, scales.shape, generator=g).float()
        x = torch.randint(-2, 3, x.shape, generator=g).to(dtype)
        b = torch.randint(-4, 5, b.shape, generator=g).float()
        pack, linear, _, _ = ops(bits)
        got = linear(x, pack(w), scales, zps, b)
        ng = scales.reshape(n, -1).shape[1]
        z = 0 if zps is None else zps.reshape(n, ng).double().repeat_interleave(k // ng, dim=1)
        want = x.double() @ ((w.double() - z) * scales.reshape(n, ng).double().repeat_interleave(k // ng, dim=1)).t()
        assert torch.equal(got, (want + b.double()).to(dtype))


@pytest.mark.parametrize("m", [1, 2, 3])
@pytest.mark.parametrize("n,k,groups", [(37, 1000, 0), (64, 4096, 32), (12, 4096, 0), (9, 256, 2)] + QUAD_SHAPES)
def test_w4_bf16_rows_under_cancellation(n, k, groups, m, quad_mode):
    """bf16 x of few rows (the AVX512_BF16 kernel where present): the decode's 128 + u and its
    136 * sum(x) correction cancel most when x has one sign and large magnitude; ragged K, a
    partial last block of rows, per-channel and per-group scales, extreme zero points; a long
    single row takes the 4-block kernel."""
    for zp in (False, True):
        w, scales, zps, b, x = make(n, k, groups, zp, False, torch.bfloat16, (m,), seed=n + m, bits=4)
        if zps is not None:
            zps[::2] = 7
            zps[1::2] = -8
        for xs in (x.float().abs() * 300, -x.float().abs(), x.float() * 1e-30):
            check(w, scales, zps, b, xs.to(torch.bfloat16), bits=4)


@pytest.mark.skipif(not _C.info.linear_cpu_kernels().startswith("avx512"), reason="AVX-512 only")
@pytest.mark.parametrize("m", [1, 2, 3])
@pytest.mark.parametrize("n,k,groups", [(37, 1000, 0), (64, 4096, 32), (13, 96, 3), (37, 4200, 0)] + QUAD_SHAPES)
def test_w4_f32_table_kernel_multiplies_signed_codes(n, k, groups, m, quad_mode):
    """fp32 x of few rows on AVX-512 decodes nibbles by table to v itself, so the error is bounded
    by the terms |v| |x| s alone (no decode offset), against the exact fp64 result; x of one sign
    and large magnitude, ragged K, a partial last block of rows, every code from -8 to 7; a long
    single row takes the 4-block kernel."""
    for zp in (False, True):
        w, scales, zps, b, x = make(n, k, groups, zp, True, torch.float32, (m,), seed=n + m, bits=4)
        w.view(-1)[:16] = torch.arange(-8, 8, dtype=torch.int8)
        ng = scales.reshape(n, -1).shape[1]
        s = scales.reshape(n, ng).double().repeat_interleave(k // ng, dim=1)
        z = 0 if zps is None else zps.reshape(n, ng).double().repeat_interleave(k // ng, dim=1)
        for xs in (x.abs() * 300, -x.abs(), x * 1e-30, x):
            got = P.linear_w4a16(xs, P.pack_weight_int4(w), scales, zps, b).double()
            want = xs.double() @ ((w.double() - z) * s).t() + b.double()
            mag = w.double().abs() + (z.abs() if zps is not None else 0)
            terms = xs.double().abs() @ (mag * s).t() + b.double().abs()
            lim = 2 * (k + 2) * EPS32 * terms + 1e-300
            assert bool(((got - want).abs() <= lim).all()), ((got - want).abs() / lim).max()


def test_extreme_codes_and_zero_input():
    w = torch.full((8, 64), -128, dtype=torch.int8)
    w[::2] = 127
    scales = torch.full((8,), 0.5)
    check(w, scales, None, None, torch.full((3, 64), 1e3))
    out = P.linear_w8a16(torch.zeros(2, 64), P.pack_weight_int8(w), scales)
    assert torch.equal(out, torch.zeros(2, 8))
    assert P.linear_w8a16(torch.zeros(0, 64), P.pack_weight_int8(w), scales).shape == (0, 8)
    w4 = torch.full((8, 64), -8, dtype=torch.int8)
    w4[::2] = 7
    check(w4, scales, torch.full((8,), 7, dtype=torch.int32), None, torch.full((3, 64), 1e3), bits=4)


SCRIPT = r"""
import importlib, sys, torch, pt2q
t = importlib.import_module(sys.argv[3])
assert pt2q._C.info.linear_cpu_kernels() == sys.argv[2], pt2q._C.info.linear_cpu_kernels()
t.isa_check()
print("ok")
"""


def isa_check(make=make, check=check):
    """What test_every_isa_kernel runs under each ISA (also for the dynamic linears' module)."""
    for bits in (8, 4):
        for m in (1, 2, 3, 6, 40):
            for groups in (0, 4):
                check(*make(37, 128, groups, True, True, torch.float32, (m,), seed=m, bits=bits), bits=bits)
        for dtype in (torch.float32, torch.bfloat16):  # many rows: the dequantize-then-GEMM paths
            check(*make(37, 128, 4, True, True, dtype, (70,), seed=7, bits=bits), bits=bits)
        for m in (1, 3):  # bf16 rows (W4A16: the AVX512_BF16 kernel where the cap allows it)
            for zp in (False, True):
                check(*make(37, 128, 4, zp, True, torch.bfloat16, (m,), seed=m, bits=bits), bits=bits)


ISA_CASES = [("generic", "generic"), ("avx2", "avx2"), ("avx512", "avx512"), ("avx512_bf16", "avx512_vnni")]


def run_under_isa(module, cap, kernels):
    """`module`.isa_check() in a process whose PT2Q_CPU_ISA is `cap`, which must pick the linear
    kernel table `kernels`."""
    if kernels not in _C.info.available_linear_cpu_kernels():
        pytest.skip(f"this CPU cannot run the {kernels} linear kernels")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    r = subprocess.run([sys.executable, "-c", SCRIPT, cap, kernels, module], capture_output=True, text=True,
                       cwd=root, env=dict(os.environ, PT2Q_CPU_ISA=cap), timeout=120)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-2000:]


@pytest.mark.parametrize("cap,kernels", ISA_CASES)
def test_every_isa_kernel(cap, kernels):
    run_under_isa("tests.kernels.test_linear_weight_only", cap, kernels)


@pytest.mark.parametrize("bits", BITS)
def test_opcheck(bits):
    w, _, _, _, _ = opcheck_linear(bits, 16)
    opcheck(getattr(P, f"pack_weight_int{bits}").default, (w,))


def opcheck_linear(bits, acts, make=make):
    """opcheck of pt2q.linear_w{bits}a{acts}: groups, zero points and bias in fp32; per channel in
    bf16. Returns the case."""
    linear, pack = getattr(P, f"linear_w{bits}a{acts}"), getattr(P, f"pack_weight_int{bits}")
    w, s, z, b, x = make(12, 64, 2, True, True, torch.float32, (3,), bits=bits)
    opcheck(linear.default, (x, pack(w), s, z, b))
    opcheck(linear.default, (x.to(torch.bfloat16), pack(w), s[:, 0].contiguous()))
    return w, s, z, b, x


class PackedLinear(torch.nn.Module):
    """pt2q.linear_w{bits}a{acts} over a weight packed at construction."""

    def __init__(self, w, s, b, bits, acts=16):
        super().__init__()
        self.linear = getattr(P, f"linear_w{bits}a{acts}")
        self.register_buffer("packed", getattr(P, f"pack_weight_int{bits}")(w))
        self.register_buffer("scales", s)
        self.register_buffer("bias", b)

    def forward(self, x):
        return self.linear(x, self.packed, self.scales, None, self.bias)


def check_export_and_compile(bits, acts):
    w, s, _, b, x = make(24, 64, 0, False, True, torch.float32, (5,), bits=bits)
    m = PackedLinear(w, s, b, bits, acts)
    ep = torch.export.export(m, (x,))
    assert f"pt2q.linear_w{bits}a{acts}.default" in {str(n.target) for n in ep.graph.nodes}
    assert torch.equal(ep.module()(x), m(x))
    assert torch.equal(torch.compile(m, fullgraph=True)(x), m(x))


@pytest.mark.parametrize("bits", BITS)
def test_export_and_compile_match_eager(bits):
    check_export_and_compile(bits, 16)


def test_errors_name_the_argument():
    w, s, z, b, x = make(12, 64, 2, True, True, torch.float32, (3,))
    packed = P.pack_weight_int8(w)
    with pytest.raises(ValueError, match="pack_weight_int8: weight must be int8"):
        P.pack_weight_int8(w.float())
    with pytest.raises(ValueError, match="input must be float32, bfloat16 or float16"):
        P.linear_w8a16(x.double(), packed, s)
    with pytest.raises(ValueError, match=r"packed_weight has shape \[3, 256\] but a packed \[12, 48\] weight"):
        P.linear_w8a16(x[:, :48], packed, s)
    with pytest.raises(ValueError, match=r"group size \(8 = in_features / groups\) must be a multiple of 16"):
        P.linear_w8a16(x, packed, torch.ones(12, 8))
    with pytest.raises(ValueError, match="zero_points must have the scales' shape"):
        P.linear_w8a16(x, packed, s, z[:, :1])
    with pytest.raises(ValueError, match="zero_points must be integer"):
        P.linear_w8a16(x, packed, s, z.float())
    with pytest.raises(ValueError, match=r"bias must be \[12\]"):
        P.linear_w8a16(x, packed, s, None, b[:5])
    with pytest.raises(ValueError, match=r"pack_weight_int4: weight\[1, 2\] = 9 is outside the int4 range"):
        bad = torch.zeros(3, 32, dtype=torch.int8)
        bad[1, 2] = 9
        P.pack_weight_int4(bad)
    with pytest.raises(ValueError, match=r"linear_w4a16: the group size \(16 = in_features / groups\) must be a "
                                         r"multiple of 32"):
        P.linear_w4a16(x, P.pack_weight_int4(w.clamp(-8, 7)), torch.ones(12, 4))


@pytest.mark.parametrize("bits", BITS)
def test_bf16_gemm_path_over_several_tiles(bits):
    """bf16 inputs of 64+ rows: the bf16 GEMM path (with AVX512_BF16), weight tiles of 512 rows
    (here 2 and a part); isa_check runs the same rows through the fp32 path under lower caps."""
    check(*make(1100, 64, 2, True, True, torch.bfloat16, (70,), seed=3, bits=bits), bits=bits)
    check(*make(1100, 64, 0, False, False, torch.bfloat16, (70,), seed=4, bits=bits), bits=bits)
