"""pack_int4 / unpack_int4 / pack_weight_int8 / pack_weight_int4 on CUDA: the same bytes as the CPU
kernels (themselves checked against a plain Python packing and the reference layout) for both
nibble orders, signed and unsigned values, odd and ragged shapes, every byte value, a view at an
odd offset (the byte-by-byte path) and sizes past one launch's grid; out-of-range values raise
the CPU op's error naming the first one, also when several threads see one; opcheck.
Runs on the GPU machine; skipped elsewhere."""

import pytest
import torch
from torch.library import opcheck

import pt2q  # noqa: F401
from tests.cuda_support import needs_cuda_kernel

pytestmark = [pytest.mark.cuda, needs_cuda_kernel("pt2q::pack_weight_int4")]
P = torch.ops.pt2q
ORDERS = ["low_first", "high_first"]


def codes(shape, signed, seed):
    g = torch.Generator().manual_seed(seed)
    lo, hi = (-8, 8) if signed else (0, 16)
    return torch.randint(lo, hi, shape, dtype=torch.int8 if signed else torch.uint8, generator=g)


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("signed", [True, False])
@pytest.mark.parametrize("shape", [(2,), (7, 4), (3, 5, 258), (1, 200002), (0, 6), (4097, 36)])
def test_pack_and_unpack_match_cpu(order, signed, shape):
    x = codes(shape, signed, seed=shape[-1])
    got = P.pack_int4(x.cuda(), order)
    want = P.pack_int4(x, order)
    assert got.is_cuda and got.dtype == want.dtype and got.shape == want.shape
    assert torch.equal(got.cpu(), want)
    back = P.unpack_int4(got, signed, order)
    assert back.is_cuda and back.dtype == x.dtype and torch.equal(back.cpu(), x)


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("signed", [True, False])
def test_unpack_every_byte_value_and_a_misaligned_view(order, signed):
    every = torch.arange(256, dtype=torch.uint8).reshape(16, 16)
    assert torch.equal(P.unpack_int4(every.cuda(), signed, order).cpu(), P.unpack_int4(every, signed, order))
    x = codes((1, 2 * 4099 + 2), signed, seed=3)
    view = x.cuda()[:, 2:]  # 2 bytes into its storage: neither 8- nor 16-byte aligned
    assert torch.equal(P.pack_int4(view, order).cpu(), P.pack_int4(x[:, 2:], order))
    packed = P.pack_int4(x, order)
    pview = packed.cuda()[:, 1:]
    assert torch.equal(P.unpack_int4(pview, signed, order).cpu(), P.unpack_int4(packed[:, 1:], signed, order))


def test_large_input_spans_more_than_one_grid():
    # 132 * 32 blocks of 256 threads cover 8.6 M units per pass: the kernels loop over the rest.
    x = codes((48 * 1024 * 1024,), True, seed=4)
    got = P.pack_int4(x.cuda())
    assert torch.equal(got.cpu(), P.pack_int4(x))
    assert torch.equal(P.unpack_int4(got, True).cpu(), x)


def test_out_of_range_value_names_its_first_index():
    x = codes((4, 64), True, seed=5)
    x[2, 5], x[3, 60] = 9, -9
    with pytest.raises(ValueError, match=r"pack_int4: input\[2, 5\] = 9 is outside the 4-bit range \[-8, 7\]"):
        P.pack_int4(x.cuda())
    u = codes((1000,), False, seed=6)
    u[3], u[999] = 16, 200
    with pytest.raises(ValueError, match=r"input\[3\] = 16 is outside the 4-bit range \[0, 15\]"):
        P.pack_int4(u.cuda())
    with pytest.raises(ValueError, match=r"input\[0, 3\] = 16 is outside"):
        P.pack_int4(u.cuda()[None])  # 2-d; u[999] lies in the vector path's byte-wise tail
    with pytest.raises(ValueError, match="last dimension must be even"):
        P.pack_int4(torch.zeros(3, 5, dtype=torch.int8, device="cuda"))


@pytest.mark.parametrize("bits", [8, 4])
@pytest.mark.parametrize("n,k", [(1, 16), (5, 33), (64, 100), (67, 256), (130, 512), (4099, 4096), (3, 1)])
def test_pack_weight_matches_cpu(bits, n, k):
    w = codes((n, k), True, seed=n + k) if bits == 4 else torch.randint(-128, 128, (n, k), dtype=torch.int8)
    got = getattr(P, f"pack_weight_int{bits}")(w.cuda())
    want = getattr(P, f"pack_weight_int{bits}")(w)
    assert got.is_cuda and got.dtype == torch.int8 and got.shape == want.shape
    assert torch.equal(got.cpu(), want)


def test_pack_weight_int4_range_error_and_a_strided_weight():
    w = codes((6, 40), True, seed=7)
    w[1, 2], w[4, 39] = 9, -100
    with pytest.raises(ValueError, match=r"pack_weight_int4: weight\[1, 2\] = 9 is outside the int4 range"):
        P.pack_weight_int4(w.cuda())
    t = codes((64, 48), True, seed=8).t()
    assert torch.equal(P.pack_weight_int4(t.cuda()).cpu(), P.pack_weight_int4(t))
    with pytest.raises(ValueError, match="weight must be 2-d"):
        P.pack_weight_int8(torch.zeros(4, dtype=torch.int8, device="cuda"))


def test_opcheck():
    x = codes((6, 34), True, seed=9).cuda()
    opcheck(P.pack_int4.default, (x, "high_first"))
    opcheck(P.unpack_int4.default, (P.pack_int4(x), True, "low_first"))
    opcheck(P.pack_weight_int8.default, (torch.randint(-128, 128, (9, 40), dtype=torch.int8, device="cuda"),))
    opcheck(P.pack_weight_int4.default, (x,))
