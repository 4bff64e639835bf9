"""fake_quantize_affine against torch.fake_quantize_per_{tensor,channel}_affine: values,
NaN/Inf handling and the straight-through gradient, bit for bit."""

import pytest
import torch

import pt2q
from pt2q import ops
from tests.kernels.inputs import adversarial, pow2_scales

ref = pt2q._C.reference


@pytest.mark.parametrize("qmin,qmax,zp", [(-128, 127, 3), (0, 255, 128), (-8, 7, 0), (0, 15, 4)])
@pytest.mark.parametrize("shape", [(1,), (17,), (1025,), (8, 33)])
def test_per_tensor_matches_torch_values_and_grad(qmin, qmax, zp, shape):
    x = adversarial(shape)
    x[..., 0] = float("nan")  # torch maps NaN to quant_min; so does pt2q
    dtype = torch.int8 if qmin < 0 else torch.uint8
    xa = x.clone().requires_grad_()
    xb = x.clone().requires_grad_()
    got = ops.fake_quantize_affine(xa, list(shape), torch.tensor([0.0625]), torch.tensor([zp]), dtype, qmin, qmax)
    want = torch.fake_quantize_per_tensor_affine(xb, 0.0625, zp, qmin, qmax)
    assert torch.equal(got.view(torch.int32), want.view(torch.int32))
    g = torch.randn(shape)
    got.backward(g)
    want.backward(g)
    finite = ~torch.isnan(x)  # torch's mask for NaN comes from an undefined int cast
    assert torch.equal(xa.grad[finite], xb.grad[finite])
    assert torch.all(xa.grad[~finite] == 0)


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_per_channel_matches_torch_values_and_grad(axis):
    shape = (4, 6, 35)
    # No infinities: torch's per-channel kernel casts inf to int64 before clamping (undefined;
    # +inf comes out as quant_min). pt2q saturates, as torch's per-tensor kernel does.
    x = adversarial(shape, specials=False)
    n = shape[axis]
    scales = pow2_scales(n)
    zps = torch.randint(-20, 20, (n,), dtype=torch.int32)
    xa = x.clone().requires_grad_()
    xb = x.clone().requires_grad_()
    got = ops.fake_quantize_affine(xa, ops.block_size_per_channel(shape, axis), scales, zps, torch.int8)
    want = torch.fake_quantize_per_channel_affine(xb, scales, zps, axis, -128, 127)
    assert torch.equal(got, want)
    g = torch.randn(shape)
    got.backward(g)
    want.backward(g)
    assert torch.equal(xa.grad, xb.grad)


@pytest.mark.parametrize("in_dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("domain", ["int", "none", "float"])
@pytest.mark.parametrize("shape,block", [((16, 64), [1, 32]), ((16, 64), [16, 1]), ((2, 9000), [2, 9000])])
def test_equals_dequantize_of_quantize_and_reference(in_dtype, domain, shape, block):
    x = adversarial(shape, in_dtype)
    mapping = "symmetric" if domain == "none" else "asymmetric"
    s, z = ops.choose_qparams_affine(adversarial(shape, in_dtype, specials=False, gen_seed=3), mapping, block,
                                     torch.int8, zero_point_domain=domain)
    zp = None if domain == "none" else z
    fq = ops.fake_quantize_affine(x, block, s, zp, torch.int8, zero_point_domain=domain)
    q = ops.quantize_affine(x, block, s, zp, torch.int8, zero_point_domain=domain)
    dq = ops.dequantize_affine(q, block, s, zp, torch.int8, zero_point_domain=domain, output_dtype=in_dtype)
    view = torch.int16 if in_dtype != torch.float32 else torch.int32
    assert fq.dtype == in_dtype
    assert torch.equal(fq.view(view), dq.view(view))
    rfq, rmask = ref.fake_quantize_affine_cachemask(x, block, s, zp, torch.int8, zero_point_domain=domain)
    assert torch.equal(fq.view(view), rfq.view(view))
    fq2, mask = torch.ops.pt2q.fake_quantize_affine_cachemask(x, block, s, zp, torch.int8, None, None, domain)
    assert torch.equal(mask, rmask) and torch.equal(fq2.view(view), rfq.view(view))


def test_infinities_saturate_per_channel_too():
    x = torch.tensor([[float("inf"), -float("inf"), 1.0]])
    y = ops.fake_quantize_affine(x, [1, 1], torch.tensor([0.5, 0.5, 0.5]), torch.tensor([1, 1, 1]), torch.int8)
    assert y.tolist() == [[(127 - 1) * 0.5, (-128 - 1) * 0.5, 1.0]]


def test_no_grad_path_skips_the_mask_and_matches():
    x = adversarial((64, 64))
    s = torch.tensor([0.05])
    with torch.no_grad():
        a = ops.fake_quantize_affine(x.requires_grad_(), [64, 64], s, None, torch.int8, zero_point_domain="none")
    b = ops.fake_quantize_affine(x.detach(), [64, 64], s, None, torch.int8, zero_point_domain="none")
    assert not a.requires_grad and torch.equal(a, b)


def test_gradient_is_straight_through_inside_range_only():
    x = torch.tensor([-10.0, -1.0, 0.0, 1.0, 10.0], requires_grad=True)
    y = ops.fake_quantize_affine(x, [5], torch.tensor([0.5]), torch.tensor([0]), torch.int8, -4, 4)
    y.sum().backward()
    assert x.grad.tolist() == [0.0, 1.0, 1.0, 1.0, 0.0]
