"""MX / BFP quantization written from the specification, in numpy, independent of pt2q's
kernels: microxcaling's C++ element algorithm (mx/cpp/quantize.cuh: mantissa shifts on raw
fp32 bits), its shared-exponent rule (mx/cpp/shared_exp.cuh) for scale_mode="floor", and
torchao's rules (mx_formats/mx_tensor.py) for ceil / even / rceil. See
../shared/reference/mx_bfp_numerics.md sections 2.3 and 4.

Stochastic rounding has no upstream C++ definition; it is pt2q's (kernels/README.md): round up
when floor(frac * 2^32) > r, with r from the documented counter hash.
"""

import numpy as np

# name: (ebits, mbits, emax, max_norm) as in microxcaling's mx/formats.py
FORMATS = {
    "int8": (0, 8, 0, 127 / 64),
    "int4": (0, 4, 0, 7 / 4),
    "int2": (0, 2, 0, 1.0),
    "fp8_e5m2": (5, 4, 15, 57344.0),
    "fp8_e4m3": (4, 5, 8, 448.0),
    "fp6_e3m2": (3, 4, 4, 28.0),
    "fp6_e2m3": (2, 5, 2, 7.5),
    "fp4_e2m1": (2, 3, 2, 6.0),
}


def int_format(bits):
    return (0, bits, 0, ((1 << (bits - 1)) - 1) / 2 ** (bits - 2))


def fmt_params(name):
    if name in FORMATS:
        return FORMATS[name]
    assert name.startswith("int")
    return int_format(int(name[3:]))


def _f32(u):
    return np.asarray(u, dtype=np.uint32).view(np.float32)


def _u32(f):
    return np.asarray(f, dtype=np.float32).view(np.uint32).astype(np.int64)


def quantize_elemwise(v, bits, ebits, max_norm, rmode):
    """microxcaling's quantize_elemwise (saturate_normals=True, allow_denorm=True) on float32
    arrays; rmode: 'nearest' (away), 'even', 'floor'."""
    b = _u32(v)
    S = b >> 31
    E = (b >> 23) & 0xFF
    M = b & 0x7FFFFF
    is_int = ebits == 0
    mb = bits - 1
    nb = 1 if is_int else (1 << (ebits - 1)) - 1
    ne = E - 127 + nb
    d = np.where(ne <= 0, 1 - ne, 0)
    d = np.minimum(d, 24)
    sub = E == 0
    M = np.where(sub, M, M + (1 << 23))
    sig = np.where(sub, 23, 24)
    t = d + sig - mb
    tie = (M & ((np.int64(1) << (t - 1)) - 1)) == 0
    even = (M & (np.int64(1) << t)) == 0
    if rmode != "even":
        tie = np.zeros_like(tie)
        even = np.zeros_like(even)
    M = M >> d
    M = M >> (sig - mb - 1)
    if rmode in ("nearest", "even"):
        allowed = np.ones_like(M, dtype=bool) if not is_int else M != (1 << (mb + 1)) - 1
        M = np.where(allowed & ~(tie & even), M + 1, M)
    M = M >> 1
    zero = M == 0
    M = M << (sig - mb + d)
    ovf = M >= (np.int64(1) << sig)
    M = np.where(ovf & ~sub, M >> 1, M)
    M = M & 0x7FFFFF
    E = np.where(ovf, E + 1, E)
    y = _f32(((S << 31) | (E << 23) | M).astype(np.uint32)).copy()
    big = np.abs(y) > np.float32(max_norm)
    y = np.where(big, np.copysign(np.float32(max_norm), y), y).astype(np.float32)
    x_zero = (b & 0x7FFFFFFF) == 0
    return np.where(zero | x_zero, np.float32(0.0), y).astype(np.float32)


def shared_scale_bits(amax, ebits, mbits, emax, max_norm, scale_mode):
    """E8M0 exponent byte per block (255 = NaN)."""
    b = _u32(amax)
    eb = (b >> 23) & 0xFF
    mant = b & 0x7FFFFF
    m = mbits - 2
    if scale_mode == "rceil":
        with np.errstate(over="ignore", invalid="ignore"):
            t = _u32((amax.astype(np.float32) / np.float32(max_norm)).astype(np.float32))
        te, tm = (t >> 23) & 0xFF, t & 0x7FFFFF
        byte = np.where(te == 0, (tm > 0x400000).astype(np.int64), te + (tm != 0))
        byte = np.where(byte > 254, 255, byte)
        return np.where((te == 255) | (eb == 255), 255, byte)
    if scale_mode == "even":
        r = (b + (1 << (23 - m - 1))) & 0x7F800000
        u = (r >> 23) - 127 - emax
    elif scale_mode == "ceil":
        u = eb - 127 + (mant != 0) - emax
    else:  # floor: microxcaling's shared_exp = biased exponent - emax, NaN above 2^127
        u = eb - 127 - emax
    s = u + 127
    s = np.where(s > 254, 255, np.where(s < 0, 0, s))
    return np.where(eb == 255, 255, s)


def hash32(x):
    x = np.asarray(x, dtype=np.uint64) & 0xFFFFFFFF
    x ^= x >> np.uint64(16)
    x = (x * np.uint64(0x7FEB352D)) & np.uint64(0xFFFFFFFF)
    x ^= x >> np.uint64(15)
    x = (x * np.uint64(0x846CA68B)) & np.uint64(0xFFFFFFFF)
    x ^= x >> np.uint64(16)
    return x


def element_random(seed, index):
    seed = np.uint64(seed & 0xFFFFFFFFFFFFFFFF)
    key = hash32(np.uint64(seed & np.uint64(0xFFFFFFFF)) ^ hash32((seed >> np.uint64(32)) + np.uint64(0x9E3779B9)))
    index = np.asarray(index, dtype=np.uint64)
    return hash32((index & np.uint64(0xFFFFFFFF)) ^ hash32((index >> np.uint64(32)) ^ key))


def quantize_stochastic(v, ebits, mbits, max_norm, rnd):
    """Value-level rounding with the stochastic rule (float64 for exactness)."""
    av = np.abs(v.astype(np.float64))
    m = mbits - 2
    e = ((_u32(v) >> 23) & 0xFF) - 127  # exact exponent from the fp32 bits, never log2
    emin = 0 if ebits == 0 else 1 - ((1 << (ebits - 1)) - 1)
    se = (np.zeros_like(e) if ebits == 0 else np.maximum(e, emin)) - m
    scaled = av * np.exp2(-se.astype(np.float64))
    n0 = np.floor(scaled)
    frac = scaled - n0
    up = np.floor(frac * 4294967296.0).astype(np.uint64) > rnd
    q = np.minimum((n0 + up) * np.exp2(se.astype(np.float64)), max_norm).astype(np.float32)
    return np.where(q != 0, np.copysign(q, v), np.float32(0.0)).astype(np.float32)


def mx_fake_quantize(x, fmt, block_size=32, axis=-1, rounding="nearest", scale_mode="floor", flush=False, seed=0):
    """x: float32 numpy array (bf16/fp16 inputs are passed already widened)."""
    ebits, mbits, emax, max_norm = fmt_params(fmt)
    x = np.asarray(x, dtype=np.float32)
    shape = x.shape
    x1 = x.reshape(1) if x.ndim == 0 else x
    xt = np.moveaxis(x1, axis, -1)
    L = xt.shape[-1]
    bs = L if block_size == 0 else block_size
    nb = -(-L // bs)
    pad = nb * bs - L
    xp = np.concatenate([xt, np.zeros(xt.shape[:-1] + (pad,), np.float32)], -1) if pad else xt
    xb = xp.reshape(xt.shape[:-1] + (nb, bs))
    a = np.abs(xb)
    amax = np.where(np.isnan(a).any(-1, keepdims=True), np.float32(np.nan), np.nanmax(np.where(np.isnan(a), 0, a), -1, keepdims=True)).astype(np.float32)
    s = shared_scale_bits(amax, ebits, mbits, emax, max_norm, scale_mode)
    X = _f32(np.where(s == 0, 0x00400000, np.where(s == 255, 0x7FC00000, s << 23)).astype(np.uint32))
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        v = (xb / X).astype(np.float32)
    if flush:
        v = np.where(((_u32(amax) >> 23) & 0xFF) == 0, np.float32(0), v)
    if rounding == "stochastic":
        idx = np.moveaxis(np.arange(x1.size, dtype=np.uint64).reshape(x1.shape), axis, -1)
        idx = np.concatenate([idx, np.zeros(idx.shape[:-1] + (pad,), np.uint64)], -1) if pad else idx
        rnd = element_random(seed, idx.reshape(xb.shape))
        with np.errstate(invalid="ignore"):
            q = quantize_stochastic(np.where(np.isfinite(v), v, 0).astype(np.float32), ebits, mbits, max_norm, rnd)
    else:
        q = quantize_elemwise(np.where(np.isfinite(v), v, 0).astype(np.float32), mbits, ebits, max_norm, rounding)
    with np.errstate(invalid="ignore", over="ignore"):
        out = (q * X).astype(np.float32)
    out = np.where(s == 255, np.float32(np.nan), out)
    if flush:
        out = np.where(((_u32(amax) >> 23) & 0xFF) == 0, np.float32(0), out)
    out = out.reshape(xt.shape[:-1] + (nb * bs,))[..., :L]
    return np.moveaxis(out, -1, axis).reshape(shape).astype(np.float32)
