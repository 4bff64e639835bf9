"""choose_qparams_affine on CUDA: scale and zero point bit for bit against the CPU kernel on the same
inputs (every mapping, zero-point domain and target dtype; fp32 / bf16 / fp16 inputs; per tensor,
per token, groups, per channel on every axis, one qparam per element, blocks over several
dimensions), with rounding-prone and far-apart values; long blocks cut into pieces; misaligned views;
NaN / Inf named as on CPU; which layouts run the CUDA kernels; opcheck. Runs on the GPU machine;
skipped elsewhere."""

import pytest
import torch
from torch.library import opcheck

from pt2q import ops
from tests.kernels.inputs import adversarial
from tests.cuda_support import cuda_kernel_names, needs_cuda_kernel

pytestmark = [pytest.mark.cuda, needs_cuda_kernel("pt2q::choose_qparams_affine")]

# (shape, block): contiguous runs (the CUDA kernel) and strided blocks (the reference on the device)
CASES = [((64, 96), [64, 96]), ((64, 96), [1, 96]), ((64, 96), [64, 1]), ((8, 256), [1, 32]),
         ((4, 6, 10), [2, 3, 5]), ((1, 100003), [1, 100003]), ((3, 33, 7), [1, 33, 1]), ((16, 48), [1, 3]),
         ((6, 48), [2, 12]), ((2, 3, 16), [1, 3, 16]), ((5, 16), [1, 1]), ((4, 64), [4, 8]),
         ((3, 40), [1, 8]), ((2, 8, 5, 5), [1, 8, 5, 5]), ((2, 8, 5, 5), [2, 1, 5, 5]), ((700, 1000), [700, 1000]),
         ((3, 4099), [3, 4099]), ((3, 40000), [1, 40000]), ((64, 3, 600), [64, 1, 600]), ((4, 6, 10), [4, 3, 1]),
         ((6, 8, 4, 4), [3, 1, 4, 2])]
MAPPINGS = [("asymmetric", "int"), ("asymmetric", "none"), ("asymmetric", "float"), ("symmetric", "int"),
            ("symmetric_no_clipping_err", "int")]


def same_bits(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape and a.device.type == "cpu"
    if a.is_floating_point():
        view = {torch.float32: torch.int32, torch.float64: torch.int64}.get(a.dtype, torch.int16)
        return torch.equal(a.view(view), b.view(view))
    return torch.equal(a, b)


def check(x, mapping, block, qdtype, **kw):
    s, z = ops.choose_qparams_affine(x, mapping, block, qdtype, **kw)
    sc, zc = ops.choose_qparams_affine(x.cuda(), mapping, block, qdtype, **kw)
    assert sc.is_cuda and zc.is_cuda
    assert same_bits(s, sc.cpu()) and same_bits(z, zc.cpu())


@pytest.mark.parametrize("shape,block", CASES)
@pytest.mark.parametrize("in_dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("mapping,domain", MAPPINGS)
def test_cuda_matches_cpu(shape, block, in_dtype, mapping, domain):
    x = adversarial(shape, in_dtype, specials=False, gen_seed=len(shape) + shape[-1])
    # symmetric_no_clipping_err needs qmin < 0 < qmax: no unsigned targets
    for qdtype in (torch.int8, torch.int4) + (() if mapping.endswith("err") else (torch.uint8,)):
        check(x, mapping, block, qdtype, zero_point_domain=domain)


@pytest.mark.parametrize("shape,block,runs", [((64, 96), [1, 96], True), ((64, 96), [64, 1], False),
                                              ((2, 8, 5, 5), [1, 8, 5, 5], True), ((2, 8, 5, 5), [2, 1, 5, 5], False),
                                              ((64, 3, 600), [64, 1, 600], False), ((8, 256), [1, 32], True)])
def test_runs_take_the_cuda_kernels_and_strided_blocks_the_reference(shape, block, runs):
    """Strided blocks stay on ATen's reductions: a copy into runs first measured 0.62x of them for
    fp32 per channel along the last axis (64 Mi elements, H100; docs/perf_affine_cuda.md)."""
    x = torch.randn(shape, device="cuda")
    names = cuda_kernel_names(lambda: ops.choose_qparams_affine(x, "asymmetric", block, torch.int8))
    assert any("runMinMaxKernel" in n for n in names) == runs, names
    assert any("reduce" in n.lower() for n in names) != runs, names  # ATen's amin / amax


def test_options_eps_ranges_and_dtypes():
    x = adversarial((32, 128), specials=False) * 1e-6
    check(x, "asymmetric", [1, 32], torch.int8, eps=1e-12)
    check(x, "symmetric", [1, 32], torch.int8, eps=0.0)
    check(x, "asymmetric", [1, 128], torch.uint8, quant_min=3, quant_max=200)
    check(x, "symmetric", [32, 1], torch.int16, scale_dtype=torch.bfloat16, zero_point_dtype=torch.int64)
    check(x, "asymmetric", [1, 64], torch.int32, scale_dtype=torch.float16)
    check(torch.zeros(4, 64), "asymmetric", [1, 16], torch.int8)
    check(torch.full((4, 64), -3.0), "symmetric", [4, 64], torch.int8)


def test_misaligned_view_and_non_contiguous_input():
    x = adversarial((33, 64), specials=False).reshape(-1)
    view = x.cuda()[1:].reshape(-1)[: 32 * 64].view(32, 64)
    assert view.data_ptr() % 16 != 0
    s, z = ops.choose_qparams_affine(x[1:][: 32 * 64].view(32, 64), "asymmetric", [1, 64], torch.int8)
    sc, zc = ops.choose_qparams_affine(view, "asymmetric", [1, 64], torch.int8)
    assert same_bits(s, sc.cpu()) and same_bits(z, zc.cpu())
    t = adversarial((48, 64), specials=False)
    s, z = ops.choose_qparams_affine(t.t(), "asymmetric", [1, 48], torch.int8)
    sc, zc = ops.choose_qparams_affine(t.cuda().t(), "asymmetric", [1, 48], torch.int8)
    assert same_bits(s, sc.cpu()) and same_bits(z, zc.cpu())


@pytest.mark.parametrize("special", [float("nan"), float("inf"), -float("inf")])
@pytest.mark.parametrize("shape,block,where,blockno", [((4, 100000), [4, 100000], (3, 99999), 0),
                                                       ((8, 64), [1, 32], (5, 40), 11), ((8, 64), [8, 1], (2, 7), 7)])
def test_non_finite_input_names_the_block_as_on_cpu(special, shape, block, where, blockno):
    x = torch.randn(shape)
    x[where] = special
    msg = rf"choose_qparams_affine: input has NaN or Inf in block {blockno} of "
    with pytest.raises(ValueError, match=msg):
        ops.choose_qparams_affine(x, "asymmetric", block, torch.int8)
    with pytest.raises(ValueError, match=msg):
        ops.choose_qparams_affine(x.cuda(), "asymmetric", block, torch.int8)


def test_negative_eps_is_an_error_after_a_bad_block_as_on_cpu():
    x = torch.randn(4, 64)
    for dev in ("cpu", "cuda"):
        with pytest.raises(ValueError, match="choose_qparams_affine: eps must be non-negative, got -1"):
            ops.choose_qparams_affine(x.to(dev), "asymmetric", [1, 64], torch.int8, eps=-1.0)
    x[2, 3] = float("nan")
    for dev in ("cpu", "cuda"):
        with pytest.raises(ValueError, match="NaN or Inf in block 2 of 4"):
            ops.choose_qparams_affine(x.to(dev), "asymmetric", [1, 64], torch.int8, eps=-1.0)


def test_opcheck():
    x = torch.randn(16, 64, device="cuda")
    opcheck(torch.ops.pt2q.choose_qparams_affine, (x, "asymmetric", [1, 32], torch.int8))
    opcheck(torch.ops.pt2q.choose_qparams_affine, (x, "symmetric", [16, 1], torch.int8))
