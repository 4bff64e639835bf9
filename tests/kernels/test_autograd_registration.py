"""Every pt2q op has an Autograd kernel: a derivative (fake_quantize_affine, mx_fake_quantize,
bfp_fake_quantize through its decomposition) or, for the others, a redispatch below autograd
(kernels/autograd/not_differentiable.cpp, what opcheck asks of non-differentiable ops). An op of
the latter kind called on inputs that require grad returns plain tensors that do not require grad:
later in-place ops may write them, a backward through a graph around them works (no gradient
reaches the op's inputs), and opcheck's autograd registration check passes."""

import pytest
import torch
from torch import nn
from torch.testing._internal.optests import autograd_registration_check

import pt2q  # noqa: F401

P = torch.ops.pt2q


def schemas():
    return sorted({s.name for s in torch._C._jit_get_all_schemas() if s.name.startswith("pt2q::")})


def test_every_op_has_an_autograd_kernel():
    names = schemas()
    assert len(names) >= 27, names
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    for name in names:
        implicit = has(name, "CompositeImplicitAutograd")
        assert has(name, "Autograd") or implicit, f"{name}: no Autograd kernel (add it to not_differentiable.cpp)"
        assert implicit == (name == "pt2q::bfp_fake_quantize"), name


def _linear_q8_float(bias):
    g = torch.Generator().manual_seed(0)
    w = torch.randint(-127, 128, (8, 32), dtype=torch.int8, generator=g)
    x = torch.randint(-128, 128, (2, 3, 32), dtype=torch.int8, generator=g)
    return (x, 0.05, 2, P.pack_weight_int8(w), torch.rand(8, generator=g) * 0.01, bias)


def _conv2d_q8_float(bias):
    g = torch.Generator().manual_seed(1)
    w = torch.randint(-127, 128, (4, 3, 3, 3), dtype=torch.int8, generator=g)
    x = torch.randint(-128, 128, (2, 3, 6, 6), dtype=torch.int8, generator=g)
    packed = P.pack_weight_int8(w.permute(0, 2, 3, 1).reshape(4, 27))
    return (x, 0.05, 2, packed, torch.rand(4, generator=g) * 0.01, bias, [3, 3], [1, 1], [1, 1], [1, 1])


def _dequantize_affine(scale):
    q = torch.randint(-128, 128, (4, 64), dtype=torch.int8, generator=torch.Generator().manual_seed(2))
    return (q, [1, 32], scale, None, torch.int8, None, None, "none")


def _linear_w8a16(bias):
    g = torch.Generator().manual_seed(3)
    w = torch.randint(-127, 128, (8, 32), dtype=torch.int8, generator=g)
    return (torch.randn(5, 32, generator=g), P.pack_weight_int8(w), torch.rand(8, generator=g), None, bias)


CASES = {  # op: (its arguments around a leaf that requires grad, the leaf)
    "linear_q8_float": (_linear_q8_float, lambda: nn.Parameter(torch.randn(8))),
    "conv2d_q8_float": (_conv2d_q8_float, lambda: nn.Parameter(torch.randn(4))),
    "dequantize_affine": (_dequantize_affine, lambda: nn.Parameter(torch.rand(4, 2) + 0.01)),
    "linear_w8a16": (_linear_w8a16, lambda: nn.Parameter(torch.randn(8))),
}


@pytest.mark.parametrize("op", sorted(CASES))
def test_an_op_without_derivative_gives_plain_outputs(op):
    arguments, leaf = CASES[op]
    param = leaf()
    args = arguments(param)
    overload = getattr(P, op).default
    with torch.no_grad():
        expected = overload(*args)
    y = overload(*args)  # grad mode on, a Parameter among the inputs: what a lowered model meets
    assert not y.requires_grad and y.grad_fn is None and not y._is_view()
    assert torch.equal(y, expected)
    torch.ops.aten.hardswish_(y)  # the in-place op a lowered graph may run next (inplace=True modules)
    assert torch.equal(y, torch.nn.functional.hardswish(expected))
    # a float layer after it still trains; nothing flows into the op
    w = nn.Parameter(torch.randn(()))
    (y * w).sum().backward()
    assert torch.equal(w.grad, y.sum()) and param.grad is None
    autograd_registration_check(overload, args, {})


def test_inputs_without_grad_give_outputs_without_grad():
    y = P.linear_q8_float(*_linear_q8_float(torch.randn(8)))
    assert not y.requires_grad and y.grad_fn is None


def test_fake_quantize_keeps_its_straight_through_gradient():
    x = torch.tensor([[-20.0, -0.3, 0.0, 0.26, 20.0, 1.0, -1.0, 0.5]], requires_grad=True)
    y = P.fake_quantize_affine(x, [1, 8], torch.tensor([0.1]), torch.tensor([0]), torch.int8)
    y.sum().backward()
    assert torch.equal(x.grad, torch.tensor([[0.0, 1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0]]))
