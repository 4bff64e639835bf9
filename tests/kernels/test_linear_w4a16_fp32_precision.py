"""linear_w4a16 with fp32 x under torch's fp32 matmul precision. Where the AVX512_BF16 kernel runs,
"high" splits x into two bf16 parts (hi = bf16(x), lo = bf16(x - hi)) and "medium" keeps hi
alone, as torch documents those settings; "highest" (the default) keeps fp32 products, and so do
CPUs without the kernel at every setting. Exact expectations on inputs whose sums are exact in
fp32; on random inputs the bf16 kernel's bound against an fp64 reference on the parts; each way
torch sets the precision (and the inheritance from the generic setting)."""

import pytest
import torch

import pt2q  # noqa: F401
from pt2q import _C

P = torch.ops.pt2q
EPS32 = 2.0 ** -24
HAS_KERNEL = _C.info.w4_bf16_cpu_kernel()
# "high"'s two parts take 4 bytes a value, as fp32 x does; rows past half the L1 stay fp32.
HIGH_MAX_K = _C.info.l1_data_cache_bytes() // 8


@pytest.fixture
def precision():
    """Sets torch's fp32 matmul precision by name for one test and restores the default after."""
    def use(name):
        torch.set_float32_matmul_precision(name)
    yield use
    torch.set_float32_matmul_precision("highest")
    torch.backends.fp32_precision = "none"
    torch.backends.mkldnn.fp32_precision = "none"
    torch.backends.mkldnn.matmul.fp32_precision = "none"
    assert torch.get_float32_matmul_precision() == "highest"


def parts(x, name):
    """The bf16 parts the kernel multiplies at precision `name`, summed in fp64."""
    hi = x.to(torch.bfloat16).double()
    if name == "medium":
        return hi
    return hi + (x.double() - hi).float().to(torch.bfloat16).double()


# x = 1 + 2^-8 + 2^-17: hi = 1 + 2^-7, lo = -2^-8, so "high" drops 2^-17 and "medium" adds
# 2^-8 - 2^-17 a value. x holds it at 8 positions spread over the row (the first and last chunk
# among them) and zeros elsewhere: with codes 7 (15 after a kernel's +8 offset), scale 1, every
# product is a multiple of 2^-17 and every partial sum of any kernel stays below 2^7 (8 x 15.1),
# so each path's sums are exact in fp32 at any K and each result is its exact value: the parts'
# for the split, x's own for fp32 products (dense rows of this x would round: past K ~ 60 the
# fp32 sums' rounding outgrows the split's 2^-17, so neither path could be told by its error).
# Rows of HIGH_MAX_K and one chunk more straddle where "high" stops splitting.
X_ADV = 1 + 2.0 ** -8 + 2.0 ** -17


@pytest.mark.parametrize("m", [1, 2, 3])
@pytest.mark.parametrize("k,groups", [(32, 0), (64, 2), (HIGH_MAX_K, 0), (HIGH_MAX_K + 32, 0)])
def test_exact_parts(precision, m, k, groups):
    n = 6
    w = torch.full((n, k), 7, dtype=torch.int8)
    s = torch.ones(n) if groups == 0 else torch.ones(n, groups)
    x = torch.zeros(m, k)
    x[:, torch.linspace(0, k - 1, 8).round().long()] = X_ADV
    x[1::2] = -x[1::2]  # rows of either sign
    packed = P.pack_weight_int4(w)
    exact = x.double() @ (w.double()).t()
    split = parts(x, "high") @ w.double().t()
    assert not torch.equal(split, exact) and not torch.equal(parts(x, "medium") @ w.double().t(), split)
    for name in ("high", "medium", "highest"):
        precision(name)
        got = P.linear_w4a16(x, packed, s).double()
        if HAS_KERNEL and (name == "medium" or (name == "high" and k <= HIGH_MAX_K)):
            want = parts(x, name) @ w.double().t()
        else:
            want = exact  # fp32 products
        assert torch.equal(got, want), (name, got[0, 0].item(), want[0, 0].item())


def make(n, k, groups, zp, m, seed):
    g = torch.Generator().manual_seed(seed)
    w = torch.randint(-8, 8, (n, k), dtype=torch.int8, generator=g)
    shape = (n,) if groups == 0 else (n, groups)
    s = torch.rand(shape, generator=g) * 0.02 + 1e-4
    z = torch.randint(-8, 8, shape, dtype=torch.int32, generator=g) if zp else None
    b = torch.randn(n, generator=g)
    x = torch.randn(m, k, generator=g) * 3
    return w, s, z, b, x


@pytest.mark.skipif(not HAS_KERNEL, reason="needs the AVX512_BF16 int4 kernel")
@pytest.mark.parametrize("name", ["high", "medium"])
@pytest.mark.parametrize("m", [1, 2, 5, 63])
@pytest.mark.parametrize("n,k,groups", [(37, 1000, 0), (64, 4096, 32), (13, 96, 3), (9, 4200, 0)])
def test_random_within_the_bf16_kernels_bound(precision, name, m, n, k, groups):
    """Ragged K, partial row blocks, per-channel and per-group scales, zero points, bias, x of one
    sign and large magnitude (the decode offset's worst cancellation): within the bound of fp32
    sums of the terms (|v| + 288 + |zp|) |part| s, plus the bias and the output's rounding."""
    precision(name)
    for zp in (False, True):
        w, s, z, b, x = make(n, k, groups, zp, m, seed=n + m + k)
        ng = s.reshape(n, -1).shape[1]
        sk = s.reshape(n, ng).double().repeat_interleave(k // ng, dim=1)
        zk = 0 if z is None else z.reshape(n, ng).double().repeat_interleave(k // ng, dim=1)
        for xs in (x, x.abs() * 300, -x.abs()):
            got = P.linear_w4a16(xs, P.pack_weight_int4(w), s, z, b).double()
            xp = parts(xs, name)
            want = xp @ ((w.double() - zk) * sk).t() + b.double()
            mag = w.double().abs() + 288 + (zk.abs() if z is not None else 0)
            hi = xs.to(torch.bfloat16).double()
            terms = (hi.abs() + (xp - hi).abs()) @ (mag * sk).t() + b.double().abs()
            lim = 2 * (k + 4) * EPS32 * terms + 1e-300
            assert bool(((got - want).abs() <= lim).all()), ((got - want).abs() / lim).max()
            # bf16(x) is up to 2^-9 off x, far above the kernel's rounding: the result is the
            # parts', not the exact one.
            if name == "medium":
                exact = xs.double() @ ((w.double() - zk) * sk).t() + b.double()
                assert (got - want).norm() * 4 < (got - exact).norm()


@pytest.mark.parametrize("how", ["matmul", "mkldnn", "generic"])
def test_every_way_torch_sets_it(precision, how):
    """The kernel reads oneDNN's matmul precision, which inherits from mkldnn.fp32_precision and
    then the generic torch.backends.fp32_precision; "ieee" anywhere keeps fp32 products."""
    w = torch.full((4, 32), 7, dtype=torch.int8)
    x = torch.full((1, 32), X_ADV)
    packed = P.pack_weight_int4(w)
    s = torch.ones(4)
    exact = P.linear_w4a16(x, packed, s)
    target = {"matmul": torch.backends.mkldnn.matmul, "mkldnn": torch.backends.mkldnn,
              "generic": torch.backends}[how]
    for value, name in (("tf32", "high"), ("bf16", "medium"), ("ieee", "highest")):
        target.fp32_precision = value
        got = P.linear_w4a16(x, packed, s).double()
        want = parts(x, name) @ w.double().t() if HAS_KERNEL and name != "highest" else exact.double()
        assert torch.equal(got, want), (how, value)
    precision("highest")


def test_bf16_and_many_rows_ignore_it(precision):
    """bf16 x is bf16 whatever the setting; 64 rows and more take the dequantize-then-GEMM path,
    whose GEMM reads the setting itself. Both give the same results at every setting here."""
    w, s, z, b, x = make(40, 256, 2, True, 64, seed=3)
    packed = P.pack_weight_int4(w)
    xb = x[:3].to(torch.bfloat16)
    base = (P.linear_w4a16(xb, packed, s, z, b), P.linear_w4a16(x, packed, s, z, b))
    for name in ("high", "medium"):
        precision(name)
        assert torch.equal(P.linear_w4a16(xb, packed, s, z, b), base[0])
        got = P.linear_w4a16(x, packed, s, z, b)
        # torch's own fp32 GEMM on this CPU may change with the setting ("medium": bf16 on
        # AVX512_BF16); it stays within bf16's rounding of the weights and x.
        assert torch.allclose(got, base[1], rtol=2.0 ** -6, atol=1e-2)
