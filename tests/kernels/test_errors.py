"""Bad arguments give errors that name the op, the argument and what was expected."""

import pytest
import torch

from pt2q import ops


def test_wrong_input_dtype():
    with pytest.raises(TypeError, match="quantize_affine: input must be float32, bfloat16 or float16, got Int"):
        ops.quantize_affine(torch.ones(4, dtype=torch.int32), [4], torch.ones(1), None, torch.int8)
    with pytest.raises(TypeError, match="dequantize_affine: input holds Float but input_dtype Char is stored as Char"):
        ops.dequantize_affine(torch.ones(4), [4], torch.ones(1), None, torch.int8)
    with pytest.raises(TypeError, match="output_dtype must be float32, bfloat16 or float16"):
        ops.dequantize_affine(torch.ones(4, dtype=torch.int8), [4], torch.ones(1), None, torch.int8,
                              output_dtype=torch.int32)


def test_unsupported_quantized_dtype():
    with pytest.raises(TypeError, match="must be an integer quantization dtype"):
        ops.quantize_affine(torch.ones(4), [4], torch.ones(1), None, torch.float16)


def test_mismatched_scale_shape():
    with pytest.raises(ValueError, match=r"scale has 3 elements \(shape \[3\]\) but block_size \[1, 8\] splits input "
                                         r"of shape \[4, 8\] into 4 blocks \(expected shape \[4\]\)"):
        ops.quantize_affine(torch.ones(4, 8), [1, 8], torch.ones(3), None, torch.int8)
    with pytest.raises(ValueError, match="zero_point has 2 elements"):
        ops.quantize_affine(torch.ones(4, 8), [1, 8], torch.ones(4), torch.zeros(2, dtype=torch.int32), torch.int8)


def test_block_size_that_does_not_divide():
    with pytest.raises(ValueError, match=r"block_size\[1\] = 3 does not divide dimension 1 of size 10"):
        ops.choose_qparams_affine(torch.ones(4, 10), "symmetric", [1, 3], torch.int8)
    with pytest.raises(ValueError, match="block_size .* has 1 entries but the input has 2 dimensions"):
        ops.quantize_affine(torch.ones(4, 10), [10], torch.ones(1), None, torch.int8)
    with pytest.raises(ValueError, match=r"block_size\[0\] must be positive"):
        ops.quantize_affine(torch.ones(4, 10), [0, 10], torch.ones(1), None, torch.int8)


def test_quant_range_outside_dtype():
    with pytest.raises(ValueError, match=r"quant range \[-200, 127\] is outside the range \[-128, 127\] of Char"):
        ops.quantize_affine(torch.ones(4), [4], torch.ones(1), None, torch.int8, -200, 127)
    with pytest.raises(ValueError, match=r"outside the range \[-8, 7\] of Int4"):
        ops.quantize_affine(torch.ones(4), [4], torch.ones(1), None, torch.int4, -8, 8)
    with pytest.raises(ValueError, match=r"quant_min \(5\) must not exceed quant_max \(2\)"):
        ops.quantize_affine(torch.ones(4), [4], torch.ones(1), None, torch.int8, 5, 2)


def test_bad_strings_and_domains():
    with pytest.raises(ValueError, match='zero_point_domain must be "int", "float" or "none", got "fp"'):
        ops.quantize_affine(torch.ones(4), [4], torch.ones(1), None, torch.int8, zero_point_domain="fp")
    with pytest.raises(ValueError, match='mapping_type must be .* got "sym"'):
        ops.choose_qparams_affine(torch.ones(4), "sym", [4], torch.int8)
    with pytest.raises(ValueError, match='zero_point must be None when zero_point_domain is "none"'):
        ops.quantize_affine(torch.ones(4), [4], torch.ones(1), torch.zeros(1), torch.int8, zero_point_domain="none")
    with pytest.raises(ValueError, match='"float" needs a zero_point tensor'):
        ops.quantize_affine(torch.ones(4), [4], torch.ones(1), None, torch.int8, zero_point_domain="float")
    with pytest.raises(ValueError, match='"symmetric_no_clipping_err" needs quant_min < 0 < quant_max'):
        ops.choose_qparams_affine(torch.ones(4), "symmetric_no_clipping_err", [4], torch.uint8)


def test_choose_qparams_rejects_non_finite_and_empty_input():
    x = torch.ones(3, 8)
    x[2, 1] = float("nan")
    with pytest.raises(ValueError, match=r"input has NaN or Inf in block 2 of 3"):
        ops.choose_qparams_affine(x, "asymmetric", [1, 8], torch.int8)
    with pytest.raises(ValueError, match="input is empty"):
        ops.choose_qparams_affine(torch.ones(0, 8), "asymmetric", [1, 8], torch.int8)


def test_torchao_enum_spellings_are_accepted():
    class MappingType:  # stands in for torchao.quantization.quant_primitives.MappingType
        name = "SYMMETRIC"

    s, z = ops.choose_qparams_affine(torch.tensor([-2.0, 1.0]), MappingType(), [2], torch.int8)
    assert s.item() == pytest.approx(2 / 127.5)
