"""lookup_q8 on CPU: out[i] = table[codes[i] & 255] for int8 / uint8 codes and tables, against
plain indexing in Python, on empty, 0-d, small, large (several threads' chunks), transposed, sliced
and channels-last inputs (the output keeps a dense input's strides); every ISA's loop (the 32-code
vector step, the 8-code step and the tail); errors name the argument; opcheck; the reference kernel
(pt2q._C.reference) agrees."""

import pytest
import torch
from torch.library import opcheck

import pt2q  # noqa: F401
from pt2q import _C
from tests.kernels.test_linear_weight_only import ISA_CASES, run_under_isa

P = torch.ops.pt2q
DTYPES = [torch.int8, torch.uint8]


def codes(shape, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    lo, hi = (-128, 128) if dtype == torch.int8 else (0, 256)
    x = torch.randint(lo, hi, shape, dtype=torch.int16, generator=g).to(dtype)
    if x.numel() >= 2:
        x.view(-1)[0], x.view(-1)[-1] = lo, hi - 1
    return x


def table(dtype, seed):
    g = torch.Generator().manual_seed(seed)
    lo, hi = (-128, 128) if dtype == torch.int8 else (0, 256)
    return torch.randint(lo, hi, (256,), dtype=torch.int16, generator=g).to(dtype)


def expected(x, t):
    """Entry c & 255 for code c, looked up one element at a time."""
    flat = [int(t[int(c) & 255]) for c in x.reshape(-1).tolist()]
    return torch.tensor(flat, dtype=t.dtype).reshape(x.shape)


@pytest.mark.parametrize("code_dtype", DTYPES)
@pytest.mark.parametrize("table_dtype", DTYPES)
def test_matches_indexing(code_dtype, table_dtype):
    t = table(table_dtype, seed=1)
    for i, shape in enumerate([(0,), (), (7,), (3, 5, 17), (2, 8, 33, 31)]):
        x = codes(shape, code_dtype, seed=i)
        got = P.lookup_q8(x, t)
        assert got.dtype == table_dtype and got.shape == x.shape
        assert torch.equal(got, expected(x, t)), shape
        assert torch.equal(_C.reference.lookup_q8(x, t), got)


def test_every_code_reads_its_own_entry():
    t = torch.arange(256, dtype=torch.int16).sub(128).flip(0).to(torch.int8)  # distinct entries
    for dtype in DTYPES:
        x = torch.arange(256, dtype=torch.int16).to(torch.uint8).view(dtype)  # every byte once
        assert torch.equal(P.lookup_q8(x, t), t[x.view(torch.uint8).long()])


def test_large_inputs_split_over_threads():
    x = codes((3, 96, 112, 112), torch.int8, seed=3)  # 3.6M codes: many parallel chunks
    t = table(torch.uint8, seed=4)
    assert torch.equal(P.lookup_q8(x, t), t[x.long() & 255])


def test_layouts():
    t = table(torch.int8, seed=5)
    x = codes((2, 16, 9, 7), torch.int8, seed=6)
    cl = x.contiguous(memory_format=torch.channels_last)
    got = P.lookup_q8(cl, t)
    assert got.stride() == cl.stride() and torch.equal(got, t[x.long() & 255])
    for view in (x.transpose(1, 3), x[:, 3:11, ::2], x[..., 1:], x.permute(3, 1, 0, 2)):
        got = P.lookup_q8(view, t)
        assert torch.equal(got, expected(view, t))
        dense = view.is_contiguous() or view.transpose(1, 3).is_contiguous() or view.permute(2, 1, 3, 0).is_contiguous()
        assert got.stride() == (view.stride() if dense else view.contiguous().stride()), view.stride()


def test_errors():
    t = table(torch.int8, seed=7)
    x = codes((4, 4), torch.int8, seed=8)
    with pytest.raises(ValueError, match="lookup_q8: codes must be int8 or uint8, got Float"):
        P.lookup_q8(x.float(), t)
    with pytest.raises(ValueError, match="lookup_q8: table must be int8 or uint8, got Int"):
        P.lookup_q8(x, t.int())
    with pytest.raises(ValueError, match=r"lookup_q8: table must have shape \[256\], got \[255\]"):
        P.lookup_q8(x, t[:255])
    with pytest.raises(ValueError, match=r"lookup_q8: table must have shape \[256\], got \[2, 128\]"):
        P.lookup_q8(x, t.reshape(2, 128))
    with pytest.raises(ValueError, match="lookup_q8: table is on meta, codes on cpu"):
        P.lookup_q8(x, t.to("meta"))


def test_opcheck():
    t = table(torch.uint8, seed=9)
    for x in (codes((2, 3, 5, 5), torch.int8, seed=10), codes((64,), torch.uint8, seed=11),
              codes((2, 8, 4, 4), torch.int8, seed=12).contiguous(memory_format=torch.channels_last),
              codes((6, 5), torch.int8, seed=13).t()):
        opcheck(P.lookup_q8.default, (x, t))


def isa_check():
    for seed, dtype in enumerate(DTYPES):
        t = table(torch.int8 if seed else torch.uint8, seed=20 + seed)
        for n in list(range(0, 80)) + [1000, 4099, (1 << 15) + 33, 3 * (1 << 15) + 1]:
            x = codes((n,), dtype, seed=n)
            assert torch.equal(P.lookup_q8(x, t), t[x.long() & 255]), (dtype, n)
        every = torch.arange(256, dtype=torch.int16).to(torch.uint8).view(dtype).repeat(3)
        assert torch.equal(P.lookup_q8(every, t), t[every.long() & 255])


@pytest.mark.parametrize("cap,kernels", ISA_CASES)
def test_every_isa_kernel(cap, kernels):
    run_under_isa("tests.kernels.test_lookup_q8", cap, kernels)
