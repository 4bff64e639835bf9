"""Every pt2q op passes torch.library.opcheck, traces under torch.compile(fullgraph=True) and
torch.export, and has a Meta kernel."""

import pytest
import torch
from torch.library import opcheck

import pt2q  # noqa: F401

P = torch.ops.pt2q


def _qparams(shape, block, dtype=torch.int8):
    x = torch.randn(shape)
    s, z = P.choose_qparams_affine(x, "asymmetric", block, dtype)
    return x, s, z


def _cases():
    x, s, z = _qparams((8, 64), [1, 32])
    q = P.quantize_affine(x, [1, 32], s, z, torch.int8)
    xb = x.to(torch.bfloat16)
    return [
        (P.choose_qparams_affine.default, (x, "asymmetric", [1, 32], torch.int8)),
        (P.choose_qparams_affine.default, (xb, "symmetric", [8, 64], torch.int4, None, None, 1e-5)),
        (P.quantize_affine.default, (x, [1, 32], s, z, torch.int8)),
        (P.quantize_affine.default, (xb, [1, 32], s, None, torch.int8, -127, 127, "none")),
        (P.dequantize_affine.default, (q, [1, 32], s, z, torch.int8)),
        (P.dequantize_affine.default, (q, [1, 32], s, z, torch.int8, None, None, "int"), {"output_dtype": torch.bfloat16}),
        (P.fake_quantize_affine.default, (x.clone().requires_grad_(), [1, 32], s, z, torch.int8)),
        (P.fake_quantize_affine.default, (xb.clone().requires_grad_(), [8, 1], s.new_ones(64), None, torch.uint4,
                                          None, None, "none")),
        (P.fake_quantize_affine_cachemask.default, (x, [1, 32], s, z, torch.int8)),
        (P.pack_int4.default, (torch.randint(-8, 8, (4, 6), dtype=torch.int8),)),
        (P.unpack_int4.default, (torch.randint(0, 255, (4, 3), dtype=torch.uint8), True, "high_first")),
    ]


@pytest.mark.parametrize("case", range(11))
def test_opcheck(case):
    entry = _cases()[case]
    op, args = entry[0], entry[1]
    kwargs = entry[2] if len(entry) > 2 else {}
    opcheck(op, args, kwargs)


class QuantDequant(torch.nn.Module):
    """A layer's weight path: choose qparams per group, quantize, dequantize, fake-quantize, pack."""

    def forward(self, w, x):
        s, z = P.choose_qparams_affine(w, "asymmetric", [1, 32], torch.int4)
        q = P.quantize_affine(w, [1, 32], s, z, torch.int4)
        packed = P.pack_int4(q)
        wq = P.dequantize_affine(P.unpack_int4(packed), [1, 32], s, z, torch.int4)
        xf = P.fake_quantize_affine(x, list(x.shape), torch.tensor([0.05]), torch.tensor([0]), torch.int8)
        return torch.nn.functional.linear(xf, wq)


def test_torch_compile_fullgraph_matches_eager():
    m = QuantDequant()
    w, x = torch.randn(16, 64), torch.randn(4, 64)
    eager = m(w, x)
    compiled = torch.compile(m, fullgraph=True, backend="inductor")(w, x)
    assert torch.equal(eager, compiled)


def test_torch_export_keeps_the_ops_and_matches_eager():
    m = QuantDequant()
    w, x = torch.randn(16, 64), torch.randn(4, 64)
    ep = torch.export.export(m, (w, x))
    targets = {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}
    for name in ("choose_qparams_affine", "quantize_affine", "pack_int4", "unpack_int4", "dequantize_affine",
                 "fake_quantize_affine"):
        assert f"pt2q.{name}.default" in targets, targets
    assert torch.equal(ep.module()(w, x), m(w, x))


def test_export_with_dynamic_batch():
    m = QuantDequant()
    w, x = torch.randn(16, 64), torch.randn(4, 64)
    batch = torch.export.Dim("batch", min=2, max=1024)
    ep = torch.export.export(m, (w, x), dynamic_shapes=(None, {0: batch}))
    x2 = torch.randn(9, 64)
    assert torch.equal(ep.module()(w, x2), m(w, x2))


def test_meta_kernels_give_shapes_and_dtypes():
    x = torch.empty(4, 6, 32, device="meta")
    s, z = P.choose_qparams_affine(x, "asymmetric", [1, 1, 16], torch.int8)
    assert s.shape == (4, 6, 2) and z.dtype == torch.int32 and s.device.type == "meta"
    q = P.quantize_affine(x, [1, 1, 16], s, z, torch.int4)
    assert q.dtype == torch.int8 and q.shape == x.shape
    assert P.dequantize_affine(q, [1, 1, 16], s, z, torch.int4, output_dtype=torch.float16).dtype == torch.float16
    with pytest.raises(ValueError, match="does not divide"):
        P.quantize_affine(x, [1, 1, 5], s, z, torch.int8)
