"""The MX ops on CUDA (the reference implementation until issue #8 adds kernels) give the same
bits as the CPU kernels. Runs on the GPU machine; skipped elsewhere."""

import pytest
import torch

import pt2q  # noqa: F401
from tests.mx.inputs import mx_inputs

pytestmark = pytest.mark.cuda
P = torch.ops.pt2q


@pytest.mark.parametrize("fmt", ["int8", "fp8_e4m3", "fp6_e3m2", "fp4_e2m1", "int5"])
@pytest.mark.parametrize("rounding", ["nearest", "even", "floor", "stochastic"])
@pytest.mark.parametrize("scale_mode", ["floor", "ceil", "even", "rceil"])
def test_cuda_matches_cpu(fmt, rounding, scale_mode):
    x = torch.from_numpy(mx_inputs(2048, 32, seed=12)).reshape(256, 256)
    for axis in (-1, 0):
        cpu = P.mx_fake_quantize(x, fmt, 32, axis, rounding, scale_mode, False, 3)
        gpu = P.mx_fake_quantize(x.cuda(), fmt, 32, axis, rounding, scale_mode, False, 3).cpu()
        assert torch.equal(torch.isnan(cpu), torch.isnan(gpu))
        ok = ~torch.isnan(cpu)
        assert torch.equal(cpu[ok].view(torch.int32), gpu[ok].view(torch.int32))
        c, s = P.mx_quantize(x, fmt, 32, axis, rounding, scale_mode, False, 3)
        gc, gs = P.mx_quantize(x.cuda(), fmt, 32, axis, rounding, scale_mode, False, 3)
        assert torch.equal(s, gs.cpu())
        assert torch.equal(c.view(torch.uint8) if c.element_size() == 1 else c,
                           gc.cpu().view(torch.uint8) if gc.element_size() == 1 else gc.cpu())
