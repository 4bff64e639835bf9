"""choose_qparams_affine against torch.ao's observers (the qparams convert_pt2e uses)."""

import pytest
import torch
from torch.ao.quantization.observer import MinMaxObserver, PerChannelMinMaxObserver

from pt2q import ops
from tests.kernels.inputs import adversarial

# (observer dtype, pt2q dtype, quant_min, quant_max): None means the dtype's default range.
OBSERVER_DTYPES = [
    (torch.qint8, torch.int8, None, None),
    (torch.quint8, torch.uint8, None, None),
    (torch.qint8, torch.int8, -127, 127),
    (torch.quint8, torch.uint8, 0, 127),
    (torch.qint8, torch.int8, -8, 7),
    (torch.quint8, torch.uint8, 0, 15),
    (torch.int16, torch.int16, None, None),
]


def _observe(obs, x):
    obs(x)
    s, z = obs.calculate_qparams()
    return s, z


@pytest.mark.parametrize("qscheme", [torch.per_tensor_affine, torch.per_tensor_symmetric])
@pytest.mark.parametrize("obs_dtype,dtype,qmin,qmax", OBSERVER_DTYPES)
@pytest.mark.parametrize("shape", [(1,), (17,), (64, 33), (3, 4, 1025)])
@pytest.mark.parametrize("offset", [0.0, 3.0, -3.0])
def test_per_tensor_matches_minmax_observer(qscheme, obs_dtype, dtype, qmin, qmax, shape, offset):
    x = adversarial(shape, specials=False) + offset
    obs = MinMaxObserver(dtype=obs_dtype, qscheme=qscheme, quant_min=qmin, quant_max=qmax)
    ws, wz = _observe(obs, x)
    mapping = "symmetric" if qscheme == torch.per_tensor_symmetric else "asymmetric"
    s, z = ops.choose_qparams_affine(x, mapping, list(shape), dtype, qmin, qmax)
    assert torch.equal(s.reshape(1), ws)
    assert z.reshape(1).tolist() == wz.tolist()


@pytest.mark.parametrize("qscheme", [torch.per_channel_affine, torch.per_channel_symmetric])
@pytest.mark.parametrize("obs_dtype,dtype,qmin,qmax", OBSERVER_DTYPES[:4])
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_per_channel_matches_per_channel_observer(qscheme, obs_dtype, dtype, qmin, qmax, axis):
    shape = (6, 5, 40)
    x = adversarial(shape, specials=False) * torch.linspace(0.1, 3, shape[axis]).view(
        [-1 if d == axis else 1 for d in range(3)])
    obs = PerChannelMinMaxObserver(ch_axis=axis, dtype=obs_dtype, qscheme=qscheme, quant_min=qmin, quant_max=qmax)
    ws, wz = _observe(obs, x)
    mapping = "symmetric" if qscheme == torch.per_channel_symmetric else "asymmetric"
    s, z = ops.choose_qparams_affine(x, mapping, ops.block_size_per_channel(shape, axis), dtype, qmin, qmax)
    assert torch.equal(s, ws)
    assert z.tolist() == wz.tolist()


@pytest.mark.parametrize("in_dtype", [torch.bfloat16, torch.float16])
def test_half_inputs_use_fp32_qparam_arithmetic(in_dtype):
    # torch.ao observers upcast to fp32 before computing qparams; so does pt2q.
    x = adversarial((32, 64), in_dtype, specials=False)
    obs = MinMaxObserver(dtype=torch.qint8, qscheme=torch.per_tensor_affine)
    ws, wz = _observe(obs, x.float())
    s, z = ops.choose_qparams_affine(x, "asymmetric", [32, 64], torch.int8)
    assert s.dtype == torch.float32 and torch.equal(s.reshape(1), ws) and z.item() == wz.item()


def test_output_shapes_and_dtypes_follow_torchao():
    x = torch.randn(4, 6, 32)
    s, z = ops.choose_qparams_affine(x, "asymmetric", [1, 1, 16], torch.int8)
    assert s.shape == (4, 6, 2) and s.dtype == torch.float32 and z.dtype == torch.int32
    s, z = ops.choose_qparams_affine(x, "symmetric", [4, 6, 32], torch.int8, scale_dtype=torch.bfloat16,
                                     zero_point_dtype=torch.int64)
    assert s.shape == () and s.dtype == torch.bfloat16 and z.dtype == torch.int64
    s, z = ops.choose_qparams_affine(x, "asymmetric", [1, 6, 32], torch.uint4, zero_point_domain="float")
    assert s.shape == (4,) and z.dtype == torch.float32


def test_constant_block_gets_eps_scale():
    x = torch.zeros(4, 8)
    s, z = ops.choose_qparams_affine(x, "asymmetric", [1, 8], torch.uint8)
    assert torch.all(s == torch.finfo(torch.float32).eps) and torch.all(z == 0)
    s, _ = ops.choose_qparams_affine(x, "symmetric", [1, 8], torch.int8, eps=1e-3)
    assert torch.allclose(s, torch.full((4,), 1e-3))


def test_symmetric_no_clipping_err_matches_torchao_formula():
    x = torch.tensor([[-4.0, 1.0, 3.5, 0.0]])
    s, z = ops.choose_qparams_affine(x, "symmetric_no_clipping_err", [1, 4], torch.int4)
    # smin = -4 / -8 = 0.5, smax = 3.5 / 7 = 0.5: either gives 0.5
    assert s.item() == 0.5 and z.item() == 0
    x = torch.tensor([[-1.0, 7.0]])
    s, _ = ops.choose_qparams_affine(x, "symmetric_no_clipping_err", [1, 2], torch.int4)
    assert s.item() == 1.0
