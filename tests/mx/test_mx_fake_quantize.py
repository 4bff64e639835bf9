"""mx_fake_quantize against the specification written in numpy (tests/mx/spec_reference.py)
bit for bit, on 2^20 adversarial elements per format x rounding x scale mode; microxcaling's
and torchao's conformance vectors; layout, dtype, gradient and registration tests."""

import numpy as np
import pytest
import torch
from torch.library import opcheck

import pt2q  # noqa: F401
from tests.mx import spec_reference as spec
from tests.mx.inputs import mx_inputs

P = torch.ops.pt2q
FORMATS = list(spec.FORMATS)
ROUNDINGS = ["nearest", "even", "floor", "stochastic"]
SCALE_MODES = ["floor", "ceil", "even", "rceil"]


def _same_bits(got, want):
    g = got.view(torch.int32) if isinstance(got, torch.Tensor) else torch.from_numpy(got).view(torch.int32)
    w = torch.from_numpy(np.ascontiguousarray(want)).view(torch.int32)
    nan_g = torch.isnan(g.view(torch.float32))
    nan_w = torch.isnan(w.view(torch.float32))
    assert torch.equal(nan_g, nan_w), f"NaN positions differ at {torch.nonzero(nan_g != nan_w)[:5].tolist()}"
    bad = (g != w) & ~nan_g
    if bad.any():
        i = torch.nonzero(bad.reshape(-1))[:5].reshape(-1)
        raise AssertionError(f"{int(bad.sum())} elements differ, first at {i.tolist()}: "
                             f"got {g.reshape(-1)[i].view(torch.float32).tolist()} "
                             f"want {w.reshape(-1)[i].view(torch.float32).tolist()}")


@pytest.mark.parametrize("scale_mode", SCALE_MODES)
@pytest.mark.parametrize("rounding", ROUNDINGS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_matches_spec_on_a_million_elements(fmt, rounding, scale_mode):
    x = mx_inputs(1 << 15, 32, seed=hash((fmt, rounding, scale_mode)) & 0xFFFF)
    got = P.mx_fake_quantize(torch.from_numpy(x), fmt, 32, -1, rounding, scale_mode, False, 1234)
    _same_bits(got, spec.mx_fake_quantize(x, fmt, 32, -1, rounding, scale_mode, False, 1234))


@pytest.mark.parametrize("fmt", ["int8", "fp8_e4m3", "fp4_e2m1", "int5", "int12", "int16"])
@pytest.mark.parametrize("block,axis,shape", [(32, 0, (70, 9)), (16, 1, (3, 40, 5)), (7, -1, (4, 33)),
                                              (0, -1, (5, 50)), (0, 0, (50, 3)), (64, -1, (2, 20)),
                                              (1, -1, (3, 17))])
@pytest.mark.parametrize("rounding", ["nearest", "even", "stochastic"])
def test_layouts_match_spec(fmt, block, axis, shape, rounding):
    x = mx_inputs(int(np.prod(shape)) // 8 + 1, 8, seed=3).reshape(-1)[: int(np.prod(shape))].reshape(shape)
    got = P.mx_fake_quantize(torch.from_numpy(x), fmt, block, axis, rounding, "floor", False, 99)
    _same_bits(got, spec.mx_fake_quantize(x, fmt, block, axis, rounding, "floor", False, 99))
    ref = pt2q._C.reference.mx_fake_quantize(torch.from_numpy(x), fmt, block, axis, rounding, "floor", False, 99)
    _same_bits(got, ref.numpy())


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("axis", [0, -1])
def test_cpu_kernel_matches_aten_reference(fmt, axis):
    x = torch.from_numpy(mx_inputs(2048, 16, seed=5)).reshape(256, 128)
    for rounding in ROUNDINGS:
        for scale_mode in SCALE_MODES:
            for flush in (False, True):
                got = P.mx_fake_quantize(x, fmt, 32, axis, rounding, scale_mode, flush, 7)
                ref = pt2q._C.reference.mx_fake_quantize(x, fmt, 32, axis, rounding, scale_mode, flush, 7)
                _same_bits(got, ref.numpy())


@pytest.mark.parametrize("fmt", ["int8", "fp8_e4m3", "fp4_e2m1"])
def test_flush_fp32_subnorms_matches_spec(fmt):
    x = mx_inputs(4096, 32, seed=11)
    got = P.mx_fake_quantize(torch.from_numpy(x), fmt, 32, -1, "nearest", "floor", True, None)
    _same_bits(got, spec.mx_fake_quantize(x, fmt, 32, -1, "nearest", "floor", True))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("fmt", ["int8", "fp8_e5m2", "fp6_e2m3"])
def test_half_inputs_are_widened_then_rounded_once(dtype, fmt):
    x = torch.from_numpy(mx_inputs(2048, 32, seed=2, specials=False))
    x = x.clamp(-6e4, 6e4).to(dtype)
    got = P.mx_fake_quantize(x, fmt, 32)
    want = spec.mx_fake_quantize(x.float().numpy(), fmt, 32)
    assert got.dtype == dtype
    _same_bits(got.float(), torch.from_numpy(want).to(dtype).float().numpy())


# ---- conformance vectors (mx_bfp_numerics.md section 2.6) -----------------------------------

def test_microxcaling_int8_hw_vectors():
    x = torch.tensor([[1.0234375, 1.0390625, 1.99609375, 0.00390625, 0.0078125, -0.00390625, 1.0, 0.5, 0.25, 0.125]])
    want = [1.03125, 1.046875, 1.984375, 0.0, 0.015625, 0.0, 1.0, 0.5, 0.25, 0.125]
    assert P.mx_fake_quantize(x, "int8", 10).tolist() == [want]


def test_microxcaling_int4_never_gives_minus_two():
    assert P.mx_fake_quantize(torch.tensor([-1.99, 0.5]), "int4", 2).tolist() == [-1.75, 0.5]


@pytest.mark.parametrize("fmt", ["fp8_e4m3", "fp4_e2m1", "int4"])
@pytest.mark.parametrize("special", [float("nan"), float("inf"), -float("inf")])
def test_microxcaling_nan_or_inf_poisons_the_block(fmt, special):
    y = P.mx_fake_quantize(torch.tensor([special, 0.0, 2.0**127, 0.0, 1.0, 2.0, 3.0, 4.0]), fmt, 4, -1, "floor")
    assert torch.isnan(y[:4]).all() and not torch.isnan(y[4:]).any()


def test_microxcaling_fp8_e4m3_saturation_vectors():
    x = torch.tensor([485.0, 475, 400, -485, -475, -450, 2**-6, -(2**-6)])
    assert P.mx_fake_quantize(x, "fp8_e4m3", 8).tolist() == [448, 448, 416, -448, -448, -448, 2**-6, -(2**-6)]


def test_microxcaling_issue_4_floor_scale_clamps_957_to_896():
    assert P.mx_fake_quantize(torch.tensor([957.0, 960.0]), "fp8_e4m3", 2).tolist() == [896.0, 896.0]
    # rceil picks the larger scale and keeps 957 -> 960 (rounded on the finer grid)
    assert P.mx_fake_quantize(torch.tensor([957.0, 960.0]), "fp8_e4m3", 2, -1, "nearest", "rceil").tolist() == [
        960.0, 960.0]


def test_floor_log2_trap_a_few_ulps_below_a_power_of_two():
    # 127.99999 (0x42FFFFFF): floor(log2) in fp32 says 7, the bits say 6.
    x = torch.tensor([127.99999237060547, 1.0])
    y = P.mx_fake_quantize(x, "int8", 2)
    assert y.tolist() == [127.0, 1.0]


def test_dmx_bfp_even_vectors():
    # dmx tests/test_bfp.py, BFP[8|8]{1}(SN) and BFP[4|8]{1}(SN): ties to even
    assert P.bfp_fake_quantize(torch.tensor([1 + 2**-7, 1 + 2**-6 + 2**-7]), 8, 1, -1, "even").tolist() == [
        1.0, 1.03125]
    assert P.bfp_fake_quantize(torch.tensor([1 + 2**-3, 1 + 2**-2 + 2**-3]), 4, 1, -1, "even").tolist() == [1.0, 1.5]


def test_torchao_fp6_e3m2_rounding_vectors():
    # torchao test_kernels.py::test_fp6_e3m2_rounding, through a block whose scale is 1 (max 28)
    # (codes 0b011111, 0b011110, 0b000010, 0b000001, 0: the smallest subnormal is 2^-4)
    x = torch.tensor([28.0, 29.0, 26.0, 0.1251, 0.0314, 0.03])
    y = P.mx_fake_quantize(x, "fp6_e3m2", 6, -1, "even")
    assert y.tolist() == [28.0, 28.0, 24.0, 0.125, 0.0625, 0.0]


def test_signed_zero_and_underflow_give_plus_zero():
    y = P.mx_fake_quantize(torch.tensor([-0.0, -1e-30, 1.0, -0.0]), "int8", 4)
    assert torch.equal(y.view(torch.int32)[[0, 1, 3]], torch.zeros(3, dtype=torch.int32))


def test_all_zero_block_and_overflowing_block():
    assert P.mx_fake_quantize(torch.zeros(32), "fp4_e2m1").abs().sum().item() == 0.0
    # int8: amax 3e38 has exponent 127, scale exponent 127 - 0 fits; fp8_e4m3 needs 127 - 8: fits
    y = P.mx_fake_quantize(torch.full((32,), 3e38), "fp8_e4m3")
    assert torch.isfinite(y).all()


# ---- stochastic rounding --------------------------------------------------------------------

def test_stochastic_is_unbiased():
    # 1.3 on the int8 grid at scale 1 sits between 1.296875 and 1.3125: E[q] must be 1.3.
    x = torch.full((1 << 20,), 1.3)
    x[::32] = 1.9  # sets every block's max (and scale 1)
    y = P.mx_fake_quantize(x, "int8", 32, -1, "stochastic", "floor", False, 2024)
    vals = y.reshape(-1, 32)[:, 1:].reshape(-1).double()
    assert set(torch.unique(vals).tolist()) == {1.296875, 1.3125}
    mean = vals.mean().item()
    # standard error of the mean: step * sqrt(p(1-p)/n) ~ 1.5e-5; allow 5 sigma
    assert abs(mean - 1.2999999523162842) < 8e-5, mean


def test_stochastic_is_reproducible_and_thread_independent():
    x = torch.from_numpy(mx_inputs(4096, 32, seed=8, specials=False))
    a = P.mx_fake_quantize(x, "fp4_e2m1", 32, -1, "stochastic", "floor", False, 5)
    b = P.mx_fake_quantize(x, "fp4_e2m1", 32, -1, "stochastic", "floor", False, 5)
    c = P.mx_fake_quantize(x, "fp4_e2m1", 32, -1, "stochastic", "floor", False, 6)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        d = P.mx_fake_quantize(x, "fp4_e2m1", 32, -1, "stochastic", "floor", False, 5)
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(a, b) and torch.equal(a, d) and not torch.equal(a, c)
    torch.manual_seed(3)
    e = P.mx_fake_quantize(x, "fp4_e2m1", 32, -1, "stochastic")
    torch.manual_seed(3)
    f = P.mx_fake_quantize(x, "fp4_e2m1", 32, -1, "stochastic")
    assert torch.equal(e, f)


# ---- autograd, registration, errors ---------------------------------------------------------

def test_gradient_is_straight_through():
    x = torch.randn(4, 64, requires_grad=True)
    y = P.mx_fake_quantize(x, "fp4_e2m1")
    g = torch.randn(4, 64)
    y.backward(g)
    assert torch.equal(x.grad, g)


@pytest.mark.parametrize("args", [("int8",), ("fp8_e4m3", 16, 0), ("fp4_e2m1", 32, -1, "even", "rceil"),
                                  ("fp6_e3m2", 0, 1, "stochastic", "ceil", True, 3)])
def test_opcheck(args):
    x = torch.randn(8, 48, requires_grad=True)
    opcheck(P.mx_fake_quantize.default, (x, *args))


def test_opcheck_bfp_alias():
    opcheck(P.bfp_fake_quantize.default, (torch.randn(8, 48, requires_grad=True), 6, 16, 0, "even"))


def test_compile_and_export():
    class M(torch.nn.Module):
        def forward(self, x):
            return P.mx_fake_quantize(x, "fp8_e4m3", 32, -1) + P.bfp_fake_quantize(x, 8, 16)

    x = torch.randn(4, 64)
    eager = M()(x)
    assert torch.equal(torch.compile(M(), fullgraph=True)(x), eager)
    ep = torch.export.export(M(), (x,))
    assert "pt2q.mx_fake_quantize.default" in {str(n.target) for n in ep.graph.nodes}
    assert torch.equal(ep.module()(x), eager)


def test_errors_name_the_argument():
    x = torch.randn(4, 8)
    with pytest.raises(ValueError, match='unknown elem_format "fp3"'):
        P.mx_fake_quantize(x, "fp3")
    with pytest.raises(ValueError, match="axis 2 is out of range for a tensor of 2 dimensions"):
        P.mx_fake_quantize(x, "int8", 32, 2)
    with pytest.raises(TypeError, match="x must be float32, bfloat16 or float16, got Int"):
        P.mx_fake_quantize(torch.ones(4, dtype=torch.int32), "int8")
    with pytest.raises(ValueError, match='rounding must be .* got "up"'):
        P.mx_fake_quantize(x, "int8", 32, -1, "up")
    with pytest.raises(ValueError, match='scale_mode must be .* got "max"'):
        P.mx_fake_quantize(x, "int8", 32, -1, "nearest", "max")
    with pytest.raises(ValueError, match="block_size must be positive"):
        P.mx_fake_quantize(x, "int8", -4)
    with pytest.raises(ValueError, match=r"bits must be in \[2, 16\]"):
        P.bfp_fake_quantize(x, 17)


@pytest.mark.parametrize("fmt", ["fp8_e4m3", "fp8_e5m2"])
@pytest.mark.parametrize("block", [32, 64, 16])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_clean_fp8_blocks_match_spec(fmt, block, dtype):
    """Blocks whose every element is zero or within the format's normal range of the block (the
    kernels' bit-level path for round to nearest): exact ties of the 3 / 2 kept mantissa bits,
    values that round up a binade or past max_norm, zeros of both signs as ReLU leaves them,
    random mantissas; whole groups of 16 blocks of 32 and single blocks of 16 and 64."""
    g = np.random.default_rng(block)
    m = 3 if fmt == "fp8_e4m3" else 2
    n = 1 << 14
    sign = g.choice([-1.0, 1.0], n)
    e = g.integers(-5, 6, n).astype(np.float64)
    tie = 1 + (2 * g.integers(0, 1 << m, n) + 1) / 2.0 ** (m + 1)  # halfway between two codes
    frac = np.where(g.random(n) < 0.5, tie, 1 + g.random(n))
    frac = np.where(g.random(n) < 0.05, 2 - 2.0 ** -(m + 2), frac)  # rounds up to the next binade
    x = sign * frac * 2.0 ** e
    x[g.random(n) < 0.3] = 0.0
    x[g.random(n) < 0.05] = -0.0
    x[::97] = 1.9921875 * 2.0 ** 5  # a block maximum whose top values exceed max_norm * 2^s
    x = torch.from_numpy(x.astype(np.float32)).to(dtype).reshape(-1, 16 * 32)
    got = P.mx_fake_quantize(x, fmt, block, -1, "nearest")
    want = spec.mx_fake_quantize(x.float().numpy(), fmt, block, -1, "nearest", "floor", False, None)
    _same_bits(got.float(), want.astype(np.float32))
