"""CUDA kernels of the affine ops: bit-exact with the CPU kernels on the same inputs.
Runs on the GPU machine (torch with CUDA, pt2q built with its CUDA glue); skipped elsewhere."""

import pytest
import torch

from pt2q import ops
from tests.kernels.inputs import adversarial
from tests.cuda_support import needs_cuda_kernel

pytestmark = [pytest.mark.cuda, needs_cuda_kernel("pt2q::quantize_affine")]

# A last dimension of whole vectors (8 elements) takes the vectorized kernels: one qparam per
# vector (per tensor, per channel along axis 0, blocks of 8 / 16 / 32 along the last axis),
# consecutive qparams (block 1 along the last axis), any other block (3, 12); the others (last
# dimension 10, 100003, 7, even after merging) take the one-per-element kernels.
CASES = [((64, 96), [64, 96]), ((64, 96), [1, 96]), ((64, 96), [64, 1]), ((8, 256), [1, 32]),
         ((4, 6, 10), [2, 3, 5]), ((1, 100003), [1, 100003]), ((3, 33, 7), [1, 33, 1]),
         ((16, 48), [1, 3]), ((6, 48), [2, 12]), ((2, 3, 16), [1, 3, 1]), ((5, 16), [5, 16]), ((4, 64), [4, 8]),
         ((3, 40), [1, 8]),
         # merged layouts (kernels/cuda/vec_index.h): a last dimension of 2 or 4 that merges into whole
         # vectors, size-1 dimensions, blocks straddling vectors, an outermost one-block dimension
         ((6, 4, 2), [6, 4, 2]), ((4, 5, 4), [1, 5, 4]), ((2, 1, 8, 1, 8), [1, 1, 8, 1, 2]), ((4, 3, 8), [4, 1, 8]),
         # per channel along the last axis (the column kernels: a thread keeps one vector of columns
         # over rows rg, rg + groups, ...): rows not a multiple of 16 nor of 4 x groups, one row,
         # one vector per row, outer dimensions merged into rows
         ((37, 48), [37, 1]), ((3, 4096), [3, 1]), ((1, 64), [1, 1]), ((300, 8), [300, 1]), ((2, 5, 16), [2, 5, 1])]


@pytest.mark.parametrize("shape,block", CASES)
@pytest.mark.parametrize("in_dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("domain", ["int", "none", "float"])
@pytest.mark.parametrize("qdtype", [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int4], ids=str)
def test_cuda_matches_cpu(shape, block, in_dtype, domain, qdtype):
    mapping = "symmetric" if domain == "none" else "asymmetric"
    x = adversarial(shape, in_dtype)
    s, z = ops.choose_qparams_affine(adversarial(shape, in_dtype, specials=False), mapping, block, qdtype,
                                     zero_point_domain=domain)
    zp = None if domain == "none" else z
    dev = lambda t: None if t is None else t.cuda()  # noqa: E731
    q = ops.quantize_affine(x, block, s, zp, qdtype, zero_point_domain=domain)
    qc = ops.quantize_affine(x.cuda(), block, s.cuda(), dev(zp), qdtype, zero_point_domain=domain)
    assert torch.equal(q, qc.cpu())
    for out in (torch.float32, torch.bfloat16):
        d = ops.dequantize_affine(q, block, s, zp, qdtype, zero_point_domain=domain, output_dtype=out)
        dc = ops.dequantize_affine(q.cuda(), block, s.cuda(), dev(zp), qdtype, zero_point_domain=domain,
                                   output_dtype=out)
        assert torch.equal(d.view(torch.int16 if out == torch.bfloat16 else torch.int32),
                           dc.cpu().view(torch.int16 if out == torch.bfloat16 else torch.int32))
    f, m = torch.ops.pt2q.fake_quantize_affine_cachemask(x, block, s, zp, qdtype, None, None, domain)
    fc, mc = torch.ops.pt2q.fake_quantize_affine_cachemask(x.cuda(), block, s.cuda(), dev(zp), qdtype, None, None,
                                                           domain)
    view = torch.int32 if in_dtype == torch.float32 else torch.int16
    assert torch.equal(f.view(view), fc.cpu().view(view)) and torch.equal(m, mc.cpu())


def test_cuda_fake_quantize_gradient_and_compile():
    x = torch.randn(32, 64, device="cuda", requires_grad=True)
    s = torch.tensor([0.02], device="cuda")
    z = torch.tensor([0], device="cuda", dtype=torch.int32)
    y = ops.fake_quantize_affine(x, [32, 64], s, z, torch.int8)
    y.sum().backward()
    inside = ((x.detach() / 0.02).round() >= -128) & ((x.detach() / 0.02).round() <= 127)
    assert torch.equal(x.grad, inside.float())
    f = torch.compile(lambda t: torch.ops.pt2q.fake_quantize_affine(t, [32, 64], s, z, torch.int8), fullgraph=True)
    assert torch.equal(f(x.detach()), y.detach())


@pytest.mark.parametrize("in_dtype", [torch.float32, torch.bfloat16], ids=str)
def test_cuda_misaligned_storage_takes_the_scalar_kernels(in_dtype):
    # A view that starts one element past a 16-byte boundary: the vectorized kernels would load
    # across it, so the entry points hand it to the one-per-element kernels; the bits agree.
    x = adversarial((33, 64), in_dtype).reshape(-1)[1:].reshape(-1)[: 32 * 64].reshape(32, 64)
    s, z = ops.choose_qparams_affine(x.float().clamp(-1e6, 1e6).nan_to_num(), "asymmetric", [1, 64], torch.int8)
    xc = torch.empty(32 * 64 + 1, device="cuda", dtype=in_dtype)[1:].view(32, 64)
    xc.copy_(x)
    assert xc.data_ptr() % 16 != 0
    q = ops.quantize_affine(x, [1, 64], s, z, torch.int8)
    assert torch.equal(q, ops.quantize_affine(xc, [1, 64], s.cuda(), z.cuda(), torch.int8).cpu())
    f, m = torch.ops.pt2q.fake_quantize_affine_cachemask(x, [1, 64], s, z, torch.int8)
    fc, mc = torch.ops.pt2q.fake_quantize_affine_cachemask(xc, [1, 64], s.cuda(), z.cuda(), torch.int8)
    view = torch.int32 if in_dtype == torch.float32 else torch.int16
    assert torch.equal(f.view(view), fc.cpu().view(view)) and torch.equal(m, mc.cpu())
