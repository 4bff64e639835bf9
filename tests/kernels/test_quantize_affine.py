"""quantize_affine / dequantize_affine against PyTorch's own ops (bit-exact), torchao's
primitives, and pt2q's reference implementation."""

import pytest
import torch

import pt2q
from pt2q import ops
from tests.conftest import torchao_primitives
from tests.kernels.inputs import adversarial, pow2_scales

qd = torch.ops.quantized_decomposed
ref = pt2q._C.reference

# (dtype, qmin, qmax) of every code type quantized_decomposed accepts, plus narrow ranges.
RANGES = [
    (torch.int8, -128, 127),
    (torch.int8, -127, 127),
    (torch.uint8, 0, 255),
    (torch.int16, -32768, 32767),
    (torch.uint16, 0, 65535),
    (torch.int32, -(2**31), 2**31 - 1),
    (torch.int8, -8, 7),
    (torch.uint8, 0, 15),
]
SHAPES = [(1,), (7,), (17,), (1025,), (3, 15), (4, 16, 17), (2, 3, 33, 5)]


def _bits_equal(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    if a.is_floating_point():
        a = a.view(torch.int16 if a.element_size() == 2 else torch.int32)
        b = b.view(torch.int16 if b.element_size() == 2 else torch.int32)
    return torch.equal(a, b)


@pytest.mark.parametrize("dtype,qmin,qmax", RANGES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("in_dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_per_tensor_matches_quantized_decomposed(dtype, qmin, qmax, shape, in_dtype):
    x = adversarial(shape, in_dtype)
    scale, zp = 0.0625, (qmin + qmax) // 3
    got = ops.quantize_affine(x, list(shape), torch.tensor([scale]), torch.tensor([zp]), dtype, qmin, qmax)
    want = qd.quantize_per_tensor(x.float(), scale, zp, qmin, qmax, dtype)
    if dtype == torch.int32:
        # PyTorch clamps in fp32, where 2^31 - 1 rounds up to 2^31, and then casts: the cast of
        # 2^31 is undefined (x86 gives -2^31). pt2q saturates at quant_max instead.
        sat = x.float() * (1 / scale) + zp >= 2**31
        want = torch.where(sat, torch.full_like(want, qmax), want)
    assert torch.equal(got, want)
    dq = ops.dequantize_affine(got, list(shape), torch.tensor([scale]), torch.tensor([zp]), dtype, qmin, qmax)
    assert _bits_equal(dq, qd.dequantize_per_tensor(got, scale, zp, qmin, qmax, dtype))


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
@pytest.mark.parametrize("dtype,qmin,qmax", RANGES[:5])
@pytest.mark.parametrize("in_dtype", [torch.float32, torch.bfloat16])
def test_per_channel_matches_quantized_decomposed(axis, dtype, qmin, qmax, in_dtype):
    shape = (5, 6, 37)
    x = adversarial(shape, in_dtype)
    n = shape[axis]
    scales = pow2_scales(n)
    zps = torch.randint(qmin, qmax + 1, (n,), dtype=torch.int64)
    block = ops.block_size_per_channel(shape, axis)
    got = ops.quantize_affine(x, block, scales, zps, dtype, qmin, qmax)
    want = qd.quantize_per_channel(x.float(), scales, zps, axis % 3, qmin, qmax, dtype)
    assert torch.equal(got, want)
    dq = ops.dequantize_affine(got, block, scales, zps, dtype, qmin, qmax)
    if dtype == torch.uint16:
        # torch's op fails on uint16 ("Promotion for uint16 ... is not supported"); this is its
        # formula, (q - zp) in integers, then times the fp32 scale.
        view = [-1 if d == axis % 3 else 1 for d in range(3)]
        want = (got.to(torch.int64) - zps.view(view)) * scales.view(view)
    else:
        want = qd.dequantize_per_channel(got, scales, zps, axis % 3, qmin, qmax, dtype)
    assert _bits_equal(dq, want)


@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float16])
def test_dequantize_to_half_types_matches_quantized_decomposed(out_dtype):
    # 8-bit codes minus a zero point are exact in bf16 and fp16, so PyTorch's op-by-op rounding
    # and pt2q's single rounding agree bit for bit.
    q = torch.randint(-128, 128, (64, 33), dtype=torch.int8)
    got = ops.dequantize_affine(q, [64, 33], torch.tensor([0.0173]), torch.tensor([-7]), torch.int8,
                                output_dtype=out_dtype)
    want = qd.dequantize_per_tensor(q, 0.0173, -7, -128, 127, torch.int8, out_dtype=out_dtype)
    assert _bits_equal(got, want)


GRANULARITIES = [
    ((64, 96), [64, 96]),       # per-tensor
    ((64, 96), [1, 96]),        # per-channel axis 0 / per-token
    ((64, 96), [64, 1]),        # per-channel on the last axis
    ((64, 96), [1, 32]),        # per-group 32
    ((8, 256), [1, 128]),       # per-group 128
    ((3, 5, 96), [1, 1, 96]),   # per-token, 3-d
    ((4, 6, 10), [2, 3, 5]),    # 2-d blocks
    ((6, 4, 3), [3, 1, 3]),     # blocks on outer dims, per-channel in the middle
    ((1, 20000), [1, 1]),       # per-element along a long row
    ((2, 16384), [2, 16384]),   # per-tensor over few long rows (split across threads)
]


@pytest.mark.parametrize("shape,block", GRANULARITIES)
@pytest.mark.parametrize("in_dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("domain", ["int", "none", "float"])
def test_cpu_kernel_matches_reference(shape, block, in_dtype, domain):
    x = adversarial(shape, in_dtype, specials=False)
    mapping = "symmetric" if domain == "none" else "asymmetric"
    s, z = ops.choose_qparams_affine(x, mapping, block, torch.int8, zero_point_domain=domain)
    rs, rz = ref.choose_qparams_affine(x, mapping, block, torch.int8, zero_point_domain=domain)
    assert torch.equal(s, rs) and torch.equal(z, rz)
    zp = None if domain == "none" else z
    x = adversarial(shape, in_dtype, specials=True, gen_seed=5)
    q = ops.quantize_affine(x, block, s, zp, torch.int8, zero_point_domain=domain)
    assert torch.equal(q, ref.quantize_affine(x, block, s, zp, torch.int8, zero_point_domain=domain))
    for out in (torch.float32, torch.bfloat16, torch.float16):
        dq = ops.dequantize_affine(q, block, s, zp, torch.int8, zero_point_domain=domain, output_dtype=out)
        rdq = ref.dequantize_affine(q, block, s, zp, torch.int8, zero_point_domain=domain, output_dtype=out)
        assert _bits_equal(dq, rdq)


@pytest.mark.parametrize("shape,block", GRANULARITIES[:8])
@pytest.mark.parametrize("target", [(torch.int8, None, None), (torch.int4, None, None), (torch.uint8, 0, 15)])
def test_matches_torchao_primitives(shape, block, target):
    ao = torchao_primitives()
    if ao is None:
        pytest.skip("torchao not installed")
    dtype, qmin, qmax = target
    # torchao cannot hold torch.int4 tensors ("copy_" not implemented); it spells int4 as int8
    # with [-8, 7], which is what pt2q stores torch.int4 codes in.
    ao_dtype, ao_min, ao_max = (torch.int8, -8, 7) if dtype == torch.int4 else (dtype, qmin, qmax)
    x = adversarial(shape, torch.float32, specials=False)
    eps = torch.finfo(torch.float32).eps
    s, z = ops.choose_qparams_affine(x, "asymmetric", block, dtype, qmin, qmax, eps=eps)
    ts, tz = ao.choose_qparams_affine(x, ao.MappingType.ASYMMETRIC, tuple(block), ao_dtype, ao_min, ao_max, eps=eps)
    assert torch.equal(s, ts) and torch.equal(z, tz)
    x = adversarial(shape, torch.float32, gen_seed=4)
    q = ops.quantize_affine(x, block, s, z, dtype, qmin, qmax)
    tq = ao.quantize_affine(x, tuple(block), ts, tz, ao_dtype, ao_min, ao_max)
    assert torch.equal(q, tq)
    dq = ops.dequantize_affine(q, block, s, z, dtype, qmin, qmax)
    assert _bits_equal(dq, ao.dequantize_affine(tq, tuple(block), ts, tz, ao_dtype, ao_min, ao_max))


@pytest.mark.parametrize("shape,group", [((16, 256), 64), ((8, 128), 32), ((5, 384), 128)])
def test_float_zero_point_domain_matches_torchao_tinygemm(shape, group):
    ao = torchao_primitives()
    if ao is None:
        pytest.skip("torchao not installed")
    x = adversarial(shape, torch.float32, specials=False)
    block = [1, group]
    eps = torch.finfo(torch.float32).eps
    s, z = ops.choose_qparams_affine(x, "asymmetric", block, torch.uint4, eps=eps, zero_point_domain="float")
    ts, tz = ao._choose_qparams_affine_tinygemm(x, ao.MappingType.ASYMMETRIC, tuple(block), torch.uint4, eps=eps)
    assert torch.equal(s, ts) and torch.equal(z, tz)
    q = ops.quantize_affine(x, block, s, z, torch.uint4, zero_point_domain="float")
    tq = ao._quantize_affine_tinygemm(x, tuple(block), ts, tz, torch.uint4)
    assert torch.equal(q, tq)
    dq = ops.dequantize_affine(q, block, s, z, torch.uint4, zero_point_domain="float")
    assert _bits_equal(dq, ao._dequantize_affine_tinygemm(tq, tuple(block), ts, tz, torch.uint4))


def test_nan_quantizes_to_quant_min():
    # quantized_decomposed leaves NaN to an undefined float->int cast; pt2q defines it as
    # quant_min, the code torch.fake_quantize_per_tensor_affine gives NaN.
    x = torch.tensor([float("nan"), 1.0, float("nan")])
    q = ops.quantize_affine(x, [3], torch.tensor([0.5]), torch.tensor([10]), torch.uint8)
    assert q.tolist() == [0, 12, 0]
    q = ops.quantize_affine(x, [3], torch.tensor([0.5]), torch.tensor([10]), torch.int8, -100, 100)
    assert q.tolist() == [-100, 12, -100]


def test_non_contiguous_and_empty_inputs():
    x = adversarial((33, 64)).t()  # non-contiguous view
    block = [64, 1]
    s = pow2_scales(33).view(1, 33)
    got = ops.quantize_affine(x, block, s, None, torch.int8, zero_point_domain="none")
    want = ops.quantize_affine(x.contiguous(), block, s, None, torch.int8, zero_point_domain="none")
    assert torch.equal(got, want)
    e = torch.empty(0, 8)
    assert ops.quantize_affine(e, [1, 8], torch.empty(0), None, torch.int8, zero_point_domain="none").shape == (0, 8)
    assert ops.dequantize_affine(e.to(torch.int8), [1, 8], torch.empty(0), None, torch.int8,
                                 zero_point_domain="none").shape == (0, 8)


def test_zero_dim_tensor():
    x = torch.tensor(1.3)
    q = ops.quantize_affine(x, [], torch.tensor(0.1), torch.tensor(3), torch.int8)
    assert q.shape == () and q.item() == 16
    assert ops.dequantize_affine(q, [], torch.tensor(0.1), torch.tensor(3), torch.int8).item() == pytest.approx(1.3)


def test_scale_dtypes_bf16_and_fp16_are_upcast_exactly():
    x = adversarial((8, 64), specials=False)
    for sdt in (torch.bfloat16, torch.float16):
        s = pow2_scales(8).to(sdt).view(8, 1)
        got = ops.quantize_affine(x, [1, 64], s, None, torch.int8, zero_point_domain="none")
        want = ops.quantize_affine(x, [1, 64], s.float(), None, torch.int8, zero_point_domain="none")
        assert torch.equal(got, want)
