"""Test inputs for the quantization ops: random data with adversarial values spliced in."""

import torch


def adversarial(shape, dtype=torch.float32, scale=0.05, spread=200.0, specials=True, gen_seed=0):
    """Normal data of std ``scale * spread / 4`` plus, at fixed positions: exact rounding ties for
    ``scale`` (a power of two keeps x / scale exact), values far beyond any code range,
    signed zeros, a subnormal and (with ``specials``) +-Inf."""
    g = torch.Generator().manual_seed(gen_seed)
    x = torch.randn(shape, generator=g) * (scale * spread / 4)
    flat = x.view(-1)
    n = flat.numel()
    if n == 0:
        return x.to(dtype)
    k = torch.arange(n, dtype=torch.float32)
    ties = (torch.randint(-300, 300, (n,), generator=g).float() + 0.5) * scale
    sel = (k % 7) == 3
    flat[sel] = ties[sel]
    big = 6e4 if dtype == torch.float16 else 1e6  # beyond every code range, finite in the dtype
    flat[(k % 13) == 5] = big
    flat[(k % 13) == 6] = -big
    flat[(k % 17) == 4] = -0.0
    flat[(k % 19) == 2] = 1e-40
    if specials:
        flat[(k % 23) == 7] = float("inf")
        flat[(k % 23) == 8] = -float("inf")
    return x.to(dtype)


def pow2_scales(n, gen_seed=1):
    """Per-block scales that are powers of two (so that ties stay exact) or random floats."""
    g = torch.Generator().manual_seed(gen_seed)
    e = torch.randint(-8, -2, (n,), generator=g).float()
    s = torch.pow(2.0, e)
    mix = torch.rand(n, generator=g) * 0.1 + 0.001
    return torch.where(torch.arange(n) % 2 == 0, s, mix)
