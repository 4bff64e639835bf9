"""MX / BFP fake quantization for the PT2E flow. An MX tensor needs no calibrated qparams (each
block's E8M0 scale is chosen from the block at run time), so the module prepare_pt2e inserts for an
MX spec quantizes and dequantizes (`pt2q.mx_fake_quantize`) and, when asked (`observe=True`),
records per-block statistics of what it quantized: the histogram of block-max exponents, how many
elements saturated (beyond the largest value of their block's scale) or underflowed (nonzero, but
quantized to zero), and the signal and noise power behind the SQNR. `pt2q.report` tabulates them.

convert_pt2e turns each module into what it computes: `mx_quantize` -> `mx_dequantize` on a
constant (a weight; folded into packed codes and E8M0 scales) and `mx_fake_quantize` elsewhere."""

from __future__ import annotations

import math

import torch

from pt2q.observer import ObserverBase, _tracing

# The largest element magnitude of each format in units of its block scale (microxcaling's
# max_norm); BFP widths int2..int16 are sign-magnitude fixed point with 2^(bits-2) steps per 1.
_FLOAT_MAX = {"fp8_e5m2": 57344.0, "fp8_e4m3": 448.0, "fp6_e3m2": 28.0, "fp6_e2m3": 7.5, "fp4_e2m1": 6.0}
ROUNDINGS = ("nearest", "even", "floor", "stochastic")
SCALE_MODES = ("floor", "ceil", "even", "rceil")
EXP_MIN, EXP_MAX = -127, 128  # block-max exponents floor(log2(max|x|)) of finite fp32 blocks


def element_max(elem_format: str) -> float:
    """The largest magnitude an element of `elem_format` holds, in units of its block's scale."""
    if elem_format in _FLOAT_MAX:
        return _FLOAT_MAX[elem_format]
    if elem_format.startswith("int") and elem_format[3:].isdigit() and 2 <= int(elem_format[3:]) <= 16:
        bits = int(elem_format[3:])
        return (2 ** (bits - 1) - 1) / 2 ** (bits - 2)
    raise ValueError(f"elem_format must be one of {sorted(_FLOAT_MAX)} or int2..int16, got {elem_format!r}")


def check_mx_params(where: str, elem_format, block_size, axis, rounding, scale_mode, flush_fp32_subnorms,
                    seed) -> None:
    """Raises ValueError naming `where` and the argument when an MX parameter is out of range."""
    if not isinstance(elem_format, str):
        raise ValueError(f"{where}: elem_format must be a str, got {elem_format!r}")
    try:
        element_max(elem_format)
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 0:
        raise ValueError(f"{where}: block_size must be an int >= 0 (0: the whole axis), got {block_size!r}")
    if isinstance(axis, bool) or not isinstance(axis, int):
        raise ValueError(f"{where}: axis must be an int, got {axis!r}")
    if rounding not in ROUNDINGS:
        raise ValueError(f"{where}: rounding must be one of {ROUNDINGS}, got {rounding!r}")
    if scale_mode not in SCALE_MODES:
        raise ValueError(f"{where}: scale_mode must be one of {SCALE_MODES}, got {scale_mode!r}")
    if not isinstance(flush_fp32_subnorms, bool):
        raise ValueError(f"{where}: flush_fp32_subnorms must be a bool, got {flush_fp32_subnorms!r}")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ValueError(f"{where}: seed must be an int or None, got {seed!r}")


def blocks_of(x: torch.Tensor, block_size: int, axis: int) -> torch.Tensor:
    """x as fp32 [blocks, block_size] along `axis`, a ragged last block zero-padded (the MX ops'
    blocking)."""
    v = x.detach().float().movedim(axis, -1)
    n = v.shape[-1]
    bs = n if block_size == 0 else block_size
    pad = (-n) % bs if n else 0
    if pad:
        v = torch.nn.functional.pad(v, (0, pad))
    return v.reshape(-1, bs) if v.numel() else v.reshape(0, max(bs, 1))


class MXFakeQuantize(ObserverBase):
    """MX fake quantization of one edge (the `mx_fake_quantize` op with these arguments), with
    optional statistics. Attributes (when `observe`): `calls`, `elements`, `blocks`, `nan_blocks`,
    `zero_blocks`, `saturated`, `underflowed`, `signal_power` and `noise_power` (sums of x^2 and of
    (x - q(x))^2 over finite elements, fp64), `exp_hist` (int64 [256]: blocks by block-max
    exponent EXP_MIN..EXP_MAX), and `sqnr_db()`."""

    def __init__(self, elem_format: str, block_size: int = 32, axis: int = -1, rounding: str = "nearest",
                 scale_mode: str = "floor", flush_fp32_subnorms: bool = False, seed=None, observe: bool = False,
                 **unused):
        super().__init__(dtype=torch.float32)  # what flows on the edge: MX has no qparams to calculate
        check_mx_params("MXFakeQuantize", elem_format, block_size, axis, rounding, scale_mode, flush_fp32_subnorms,
                        seed)
        self.elem_format, self.block_size, self.axis = elem_format, block_size, axis
        self.rounding, self.scale_mode, self.flush_fp32_subnorms, self.seed = rounding, scale_mode, \
            flush_fp32_subnorms, seed
        self.observe = bool(observe)
        self.reset_statistics()

    def reset_statistics(self) -> None:
        self.calls = self.elements = self.blocks = self.nan_blocks = self.zero_blocks = 0
        self.saturated = self.underflowed = 0
        self.signal_power = self.noise_power = 0.0
        self.exp_hist = torch.zeros(EXP_MAX - EXP_MIN + 1, dtype=torch.int64)

    def mx_args(self) -> tuple:
        return (self.elem_format, self.block_size, self.axis, self.rounding, self.scale_mode,
                self.flush_fp32_subnorms, self.seed)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not isinstance(x, torch.Tensor) or not x.is_floating_point():
            raise ValueError(f"{self._where()}: MX fake quantization takes a floating-point tensor, got "
                             f"{getattr(x, 'dtype', type(x).__name__)}")
        y = torch.ops.pt2q.mx_fake_quantize(x, *self.mx_args())
        if self.observe and not _tracing(x) and not torch.compiler.is_compiling():
            self._record(x, y)
        return y

    def _record(self, x: torch.Tensor, y: torch.Tensor) -> None:
        axis = self.axis if self.axis >= 0 else self.axis + x.dim()
        xb = blocks_of(x, self.block_size, axis)
        yb = blocks_of(y, self.block_size, axis)
        amax = xb.abs().amax(dim=1) if xb.shape[1] else torch.zeros(xb.shape[0])
        finite_block = torch.isfinite(xb).all(dim=1)
        self.calls += 1
        self.elements += x.numel()
        self.blocks += xb.shape[0]
        self.nan_blocks += int((~finite_block).sum())
        zero = finite_block & (amax == 0)
        self.zero_blocks += int(zero.sum())
        live = finite_block & ~zero
        exps = torch.frexp(amax[live])[1].to(torch.int64) - 1  # floor(log2(amax)), subnormals included
        self.exp_hist += torch.bincount(exps - EXP_MIN, minlength=self.exp_hist.numel())[: self.exp_hist.numel()]
        xs, ys = xb[live], yb[live]
        # Each block's E8M0 scale, as the op chose it: an element saturated when its magnitude
        # exceeds the largest value that scale can hold.
        scales = torch.ops.pt2q.mx_quantize(x.detach(), *self.mx_args())[1].movedim(axis, -1).reshape(-1)
        limit = torch.exp2(scales[live].double() - 127) * element_max(self.elem_format)
        self.saturated += int((xs.double().abs() > limit[:, None]).sum())
        self.underflowed += int(((xs != 0) & (ys == 0)).sum())
        self.signal_power += float(xs.double().square().sum())
        self.noise_power += float((xs.double() - ys.double()).square().sum())

    def sqnr_db(self) -> float:
        """10 log10(signal / noise) over everything observed (inf when nothing was lost)."""
        if self.noise_power == 0.0:
            return math.inf if self.signal_power > 0 else math.nan
        return 10.0 * math.log10(self.signal_power / self.noise_power) if self.signal_power > 0 else -math.inf

    def conversion_record(self) -> dict:
        """What convert_pt2e turns this module into (the bindings' "mx" record)."""
        return {"kind": "mx", "elem_format": self.elem_format, "block_size": int(self.block_size),
                "axis": int(self.axis), "rounding": self.rounding, "scale_mode": self.scale_mode,
                "flush_fp32_subnorms": bool(self.flush_fp32_subnorms), "seed": self.seed}

    def extra_repr(self) -> str:
        return (f"elem_format={self.elem_format!r}, block_size={self.block_size}, axis={self.axis}, "
                f"rounding={self.rounding!r}, scale_mode={self.scale_mode!r}, "
                f"flush_fp32_subnorms={self.flush_fp32_subnorms}, seed={self.seed}, observe={self.observe}")

