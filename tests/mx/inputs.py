"""Adversarial MX test data: blocks drawn to cover every binade, ties of every element grid,
exact powers of two and values a few ULPs below them (where floor(log2) fails), fp32
subnormals, zeros of both signs, NaN, +-Inf, and block maxima that overflow or underflow the
E8M0 range."""

import numpy as np


def _f32(u):
    return np.asarray(u, dtype=np.uint32).view(np.float32)


def mx_inputs(n_blocks, block, seed=0, specials=True):
    with np.errstate(over="ignore", invalid="ignore"):
        return _mx_inputs(n_blocks, block, seed, specials)


def _mx_inputs(n_blocks, block, seed, specials):
    rng = np.random.default_rng(seed)
    out = np.empty((n_blocks, block), np.float32)
    kinds = rng.integers(0, 8, n_blocks)
    for k in range(8):
        rows = np.nonzero(kinds == k)[0]
        if rows.size == 0:
            continue
        shape = (rows.size, block)
        if k == 0:  # any finite fp32 bit pattern: every binade, subnormals included
            bits = rng.integers(0, 0x7F800000, shape, dtype=np.uint32) | (rng.integers(0, 2, shape, dtype=np.uint32) << 31)
            v = _f32(bits)
        elif k == 1:  # normal data at a per-block magnitude from 2^-140 to 2^126
            mag = np.exp2(rng.integers(-140, 127, (rows.size, 1)).astype(np.float64))
            v = (rng.standard_normal(shape) * mag).astype(np.float32)
        elif k == 2:  # dyadic values: exact grid points and ties of every element format
            e = rng.integers(-20, 20, (rows.size, 1))
            v = (rng.integers(-4096, 4097, shape) / 512.0 * np.exp2(e.astype(np.float64))).astype(np.float32)
        elif k == 3:  # powers of two and a few ULPs below them
            p = rng.integers(1, 254, shape, dtype=np.uint32) << 23
            v = _f32(p - rng.integers(0, 4, shape, dtype=np.uint32))
            v = v * np.where(rng.integers(0, 2, shape) == 1, -1, 1).astype(np.float32)
        elif k == 4:  # fp32 subnormals only (block max below 2^-126)
            v = _f32(rng.integers(0, 0x00800000, shape, dtype=np.uint32)) * np.float32(rng.choice([-1, 1]))
        elif k == 5:  # zeros of both signs with a few tiny or huge values
            v = np.where(rng.integers(0, 2, shape) == 1, np.float32(-0.0), np.float32(0.0)).astype(np.float32)
            hit = rng.integers(0, block, rows.size)
            v[np.arange(rows.size), hit] = rng.choice(np.array([1e-40, 3e38, -2.5e-39, 1.0], np.float32), rows.size)
        elif k == 6:  # huge blocks whose shared exponent overflows for formats with small emax
            v = (rng.standard_normal(shape) * np.float32(3e38)).astype(np.float32)
            v = np.clip(v, -3.4e38, 3.4e38).astype(np.float32)
        else:  # uniform values in a random binade range
            v = (rng.uniform(-1, 1, shape) * np.exp2(rng.integers(-10, 10, (rows.size, 1)))).astype(np.float32)
        out[rows] = v
    if specials:
        flat = out.reshape(-1)
        pick = rng.integers(0, flat.size, max(1, flat.size // 4096))
        flat[pick] = rng.choice(np.array([np.nan, np.inf, -np.inf], np.float32), pick.size)
    return out
