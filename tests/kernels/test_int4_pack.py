"""pack_int4 / unpack_int4 against a plain Python packing of both nibble orders."""

import pytest
import torch

import pt2q
from pt2q import ops


def python_pack(values, high_first):
    out = []
    for a, b in zip(values[0::2], values[1::2]):
        a, b = a & 0xF, b & 0xF
        out.append((a << 4 | b) if high_first else (b << 4 | a))
    return out


@pytest.mark.parametrize("nibble_order", ["low_first", "high_first"])
@pytest.mark.parametrize("signed", [True, False])
@pytest.mark.parametrize("shape", [(2,), (7, 4), (3, 5, 258), (1, 200002)])
def test_pack_matches_python_and_round_trips(nibble_order, signed, shape):
    lo, hi = (-8, 8) if signed else (0, 16)
    x = torch.randint(lo, hi, shape, dtype=torch.int8 if signed else torch.uint8)
    packed = ops.pack_int4(x, nibble_order)
    assert packed.dtype == torch.uint8 and packed.shape == (*shape[:-1], shape[-1] // 2)
    flat = x.reshape(-1, shape[-1])
    for r in range(min(flat.shape[0], 3)):
        assert packed.reshape(-1, shape[-1] // 2)[r].tolist() == python_pack(flat[r].tolist(),
                                                                             nibble_order == "high_first")
    assert torch.equal(ops.unpack_int4(packed, signed, nibble_order), x)
    assert torch.equal(packed, pt2q._C.reference.pack_int4(x, nibble_order))
    assert torch.equal(pt2q._C.reference.unpack_int4(packed, signed, nibble_order), x)


def test_pack_matches_reference_on_meta_and_values():
    x = torch.randint(-8, 8, (4, 6), dtype=torch.int8)
    meta = torch.ops.pt2q.pack_int4(x.to("meta"))
    assert meta.shape == (4, 3) and meta.dtype == torch.uint8


def test_unpack_every_byte_value():
    b = torch.arange(256, dtype=torch.uint8)
    lo = ops.unpack_int4(b, signed=False)[0::2]
    hi = ops.unpack_int4(b, signed=False)[1::2]
    assert torch.equal(lo, b & 15) and torch.equal(hi, b >> 4)
    s = ops.unpack_int4(b, signed=True, nibble_order="high_first")
    assert torch.equal(s[0::2], ((b >> 4).to(torch.int8) ^ 8) - 8)


def test_out_of_range_value_names_its_index():
    x = torch.zeros(3, 8, dtype=torch.int8)
    x[2, 5] = 9
    with pytest.raises(ValueError, match=r"pack_int4: input\[2, 5\] = 9 is outside the 4-bit range \[-8, 7\]"):
        ops.pack_int4(x)
    u = torch.zeros(4, dtype=torch.uint8)
    u[3] = 16
    with pytest.raises(ValueError, match=r"input\[3\] = 16 is outside the 4-bit range \[0, 15\]"):
        ops.pack_int4(u)


def test_bad_arguments():
    with pytest.raises(ValueError, match="last dimension must be even"):
        ops.pack_int4(torch.zeros(3, dtype=torch.int8))
    with pytest.raises(TypeError, match="must be int8 .* or uint8"):
        ops.pack_int4(torch.zeros(4, dtype=torch.int32))
    with pytest.raises(ValueError, match="nibble_order must be"):
        ops.pack_int4(torch.zeros(4, dtype=torch.int8), "middle")
    with pytest.raises(TypeError, match="packed must be uint8"):
        ops.unpack_int4(torch.zeros(4, dtype=torch.int8))
