"""Every pt2q op has an Autograd kernel: a derivative (fake_quantize_affine, mx_fake_quantize,
bfp_fake_quantize through its decomposition) or torch's not-implemented fallback
(kernels/autograd/not_differentiable.cpp). With the latter, an op called on inputs that require
grad returns plain tensors that later in-place ops may write, and a backward through it raises an
error naming the op instead of silently giving no gradient."""

import pytest
import torch
from torch import nn

import pt2q  # noqa: F401

P = torch.ops.pt2q
DIFFERENTIABLE = {"pt2q::fake_quantize_affine", "pt2q::mx_fake_quantize", "pt2q::bfp_fake_quantize"}


def schemas():
    return sorted({s.name for s in torch._C._jit_get_all_schemas() if s.name.startswith("pt2q::")})


def test_every_op_has_an_autograd_kernel():
    names = schemas()
    assert len(names) >= 25, names
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    for name in names:
        implicit = has(name, "CompositeImplicitAutograd")
        assert has(name, "Autograd") or implicit, f"{name}: no Autograd kernel (add it to not_differentiable.cpp)"
        assert implicit == (name == "pt2q::bfp_fake_quantize"), name


def _linear_q8_float(bias):
    g = torch.Generator().manual_seed(0)
    w = torch.randint(-127, 128, (8, 32), dtype=torch.int8, generator=g)
    x = torch.randint(-128, 128, (2, 3, 32), dtype=torch.int8, generator=g)
    return P.linear_q8_float(x, 0.05, 2, P.pack_weight_int8(w), torch.rand(8, generator=g) * 0.01, bias)


def _conv2d_q8_float(bias):
    g = torch.Generator().manual_seed(1)
    w = torch.randint(-127, 128, (4, 3, 3, 3), dtype=torch.int8, generator=g)
    x = torch.randint(-128, 128, (2, 3, 6, 6), dtype=torch.int8, generator=g)
    packed = P.pack_weight_int8(w.permute(0, 2, 3, 1).reshape(4, 27))
    return P.conv2d_q8_float(x, 0.05, 2, packed, torch.rand(4, generator=g) * 0.01, bias, [3, 3], [1, 1], [1, 1],
                             [1, 1])


def _dequantize_affine(scale):
    q = torch.randint(-128, 128, (4, 64), dtype=torch.int8, generator=torch.Generator().manual_seed(2))
    return P.dequantize_affine(q, [1, 32], scale, None, torch.int8, None, None, "none")


def _linear_w8a16(bias):
    g = torch.Generator().manual_seed(3)
    w = torch.randint(-127, 128, (8, 32), dtype=torch.int8, generator=g)
    return P.linear_w8a16(torch.randn(5, 32, generator=g), P.pack_weight_int8(w), torch.rand(8, generator=g), None,
                          bias)


CASES = {
    "linear_q8_float": (_linear_q8_float, lambda: nn.Parameter(torch.randn(8))),
    "conv2d_q8_float": (_conv2d_q8_float, lambda: nn.Parameter(torch.randn(4))),
    "dequantize_affine": (_dequantize_affine, lambda: nn.Parameter(torch.rand(4, 2) + 0.01)),
    "linear_w8a16": (_linear_w8a16, lambda: nn.Parameter(torch.randn(8))),
}


@pytest.mark.parametrize("op", sorted(CASES))
def test_an_output_of_an_op_without_derivative_is_writable_and_its_backward_names_the_op(op):
    call, leaf = CASES[op]
    param = leaf()
    with torch.no_grad():
        expected = call(param)
    y = call(param)  # grad mode on, a Parameter among the inputs: what a lowered model meets
    assert y.requires_grad and not y._is_view()
    assert torch.equal(y.detach(), expected)
    torch.ops.aten.hardswish_(y)  # the in-place op a lowered graph runs next (torchvision's inplace=True modules)
    assert torch.equal(y.detach(), torch.nn.functional.hardswish(expected))
    with pytest.raises(RuntimeError, match=f"pt2q::{op}.*not implemented|not implemented.*pt2q::{op}"):
        y.sum().backward()
    assert param.grad is None


def test_inputs_without_grad_give_outputs_without_grad():
    y = _linear_q8_float(torch.randn(8))
    assert not y.requires_grad and y.grad_fn is None


def test_fake_quantize_keeps_its_straight_through_gradient():
    x = torch.tensor([[-20.0, -0.3, 0.0, 0.26, 20.0, 1.0, -1.0, 0.5]], requires_grad=True)
    y = P.fake_quantize_affine(x, [1, 8], torch.tensor([0.1]), torch.tensor([0]), torch.int8)
    y.sum().backward()
    assert torch.equal(x.grad, torch.tensor([[0.0, 1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0]]))
