"""Python face of the ``torch.ops.pt2q`` operators.

The operators themselves are C++ (schemas in ``kernels/ops.cpp``); these wrappers only accept
the spellings users bring from torchao (``MappingType.SYMMETRIC``, ``ZeroPointDomain.FLOAT``,
tuples for block sizes) and document the semantics. Every wrapper is a plain call, so
``torch.compile`` and ``torch.export`` see the operator itself.
"""

from __future__ import annotations

from typing import Optional, Sequence

import torch

__all__ = [
    "choose_qparams_affine",
    "quantize_affine",
    "dequantize_affine",
    "fake_quantize_affine",
    "pack_int4",
    "unpack_int4",
    "mx_fake_quantize",
    "mx_quantize",
    "mx_dequantize",
    "linear_mx",
    "bfp_fake_quantize",
    "block_size_per_tensor",
    "block_size_per_channel",
    "block_size_per_group",
    "block_size_per_token",
]


def _name(value) -> str:
    """'symmetric' from 'symmetric', MappingType.SYMMETRIC or ZeroPointDomain.INT alike."""
    return (value.name if hasattr(value, "name") else str(value)).lower()


def choose_qparams_affine(
    input: torch.Tensor,
    mapping_type,
    block_size: Sequence[int],
    target_dtype: torch.dtype,
    quant_min: Optional[int] = None,
    quant_max: Optional[int] = None,
    eps: Optional[float] = None,
    scale_dtype: Optional[torch.dtype] = None,
    zero_point_dtype: Optional[torch.dtype] = None,
    zero_point_domain="int",
):
    """Scale and zero point per block of ``input``, with torch.ao's observer arithmetic.

    ``mapping_type``: ``"symmetric"``, ``"asymmetric"`` or ``"symmetric_no_clipping_err"``.
    ``eps`` defaults to ``torch.finfo(torch.float32).eps`` (torch.ao observers). Returns
    ``(scale, zero_point)`` shaped like torchao's (the reduced dimensions dropped).
    """
    return torch.ops.pt2q.choose_qparams_affine(
        input, _name(mapping_type), list(block_size), target_dtype, quant_min, quant_max, eps,
        scale_dtype, zero_point_dtype, _name(zero_point_domain),
    )


def quantize_affine(input, block_size, scale, zero_point, output_dtype, quant_min=None, quant_max=None,
                    zero_point_domain="int"):
    """``clamp(round(input / scale) + zero_point, quant_min, quant_max)`` per block, as
    ``quantized_decomposed.quantize_per_*`` computes it (fp32, multiply by ``1/scale``)."""
    return torch.ops.pt2q.quantize_affine(
        input, list(block_size), scale, zero_point, output_dtype, quant_min, quant_max, _name(zero_point_domain)
    )


def dequantize_affine(input, block_size, scale, zero_point, input_dtype, quant_min=None, quant_max=None,
                      zero_point_domain="int", *, output_dtype=torch.float32):
    """``(input - zero_point) * scale`` per block, in fp32, rounded once to ``output_dtype``."""
    return torch.ops.pt2q.dequantize_affine(
        input, list(block_size), scale, zero_point, input_dtype, quant_min, quant_max, _name(zero_point_domain),
        output_dtype=output_dtype,
    )


def fake_quantize_affine(input, block_size, scale, zero_point, quant_dtype, quant_min=None, quant_max=None,
                         zero_point_domain="int"):
    """Quantize then dequantize in one pass; straight-through gradient inside the range."""
    return torch.ops.pt2q.fake_quantize_affine(
        input, list(block_size), scale, zero_point, quant_dtype, quant_min, quant_max, _name(zero_point_domain)
    )


def pack_int4(input: torch.Tensor, nibble_order: str = "low_first") -> torch.Tensor:
    """Two 4-bit values per byte along the last dimension (see kernels/README.md)."""
    return torch.ops.pt2q.pack_int4(input, nibble_order)


def unpack_int4(packed: torch.Tensor, signed: bool = True, nibble_order: str = "low_first") -> torch.Tensor:
    """Inverse of :func:`pack_int4`; int8 (sign-extended) when ``signed``, else uint8."""
    return torch.ops.pt2q.unpack_int4(packed, signed, nibble_order)


def mx_fake_quantize(x, elem_format, block_size=32, axis=-1, rounding="nearest", scale_mode="floor",
                     flush_fp32_subnorms=False, seed=None):
    """OCP MX / BFP quantize-dequantize (kernels/README.md, Note [MX numerics])."""
    return torch.ops.pt2q.mx_fake_quantize(x, elem_format, block_size, axis, rounding, scale_mode,
                                           flush_fp32_subnorms, seed)


def bfp_fake_quantize(x, bits=8, block_size=32, axis=-1, rounding="nearest", scale_mode="floor",
                      flush_fp32_subnorms=False, seed=None):
    """BFP: `bits`-bit integer elements (sign included) sharing an 8-bit exponent per block."""
    return torch.ops.pt2q.bfp_fake_quantize(x, bits, block_size, axis, rounding, scale_mode, flush_fp32_subnorms,
                                            seed)


def mx_quantize(x, elem_format, block_size=32, axis=-1, rounding="nearest", scale_mode="floor",
                flush_fp32_subnorms=False, seed=None):
    """(codes, E8M0 scales) in the layout of kernels/README.md, "MX code layout"."""
    return torch.ops.pt2q.mx_quantize(x, elem_format, block_size, axis, rounding, scale_mode, flush_fp32_subnorms,
                                      seed)


def mx_dequantize(codes, scales, elem_format, block_size=32, axis=-1, last_dim=None, output_dtype=torch.float32):
    """Codes and scales from mx_quantize back to float."""
    return torch.ops.pt2q.mx_dequantize(codes, scales, elem_format, block_size, axis, last_dim, output_dtype)


def linear_mx(input, weight_codes, weight_scales, weight_format, block_size=32, bias=None, input_format=None,
              input_block_size=32, input_rounding="nearest", input_scale_mode="floor",
              input_flush_fp32_subnorms=False):
    """F.linear with an MX weight (mx_quantize's codes and scales of a [N, K] weight blocked along
    K), the input MX fake-quantized along K first when input_format is given; fp32 accumulation,
    output in the input's dtype."""
    return torch.ops.pt2q.linear_mx(input, weight_codes, weight_scales, weight_format, block_size, bias,
                                    input_format, input_block_size, input_rounding, input_scale_mode,
                                    input_flush_fp32_subnorms)


def block_size_per_tensor(shape: Sequence[int]) -> list[int]:
    """One qparam for the whole tensor."""
    return list(shape)


def block_size_per_channel(shape: Sequence[int], axis: int = 0) -> list[int]:
    """One qparam per index of ``axis``."""
    axis = axis % len(shape)
    return [1 if d == axis else n for d, n in enumerate(shape)]


def block_size_per_group(shape: Sequence[int], group_size: int) -> list[int]:
    """Groups of ``group_size`` along the last dimension, one qparam per row and group."""
    return [1] * (len(shape) - 1) + [group_size]


def block_size_per_token(shape: Sequence[int]) -> list[int]:
    """One qparam per row (every dimension but the last)."""
    return [1] * (len(shape) - 1) + [shape[-1]]
