"""Observers with torch.ao's names, arguments and attributes, computing in pt2q's C++ core.

Each observer is an ``nn.Module`` whose statistics live in a C++ observer
(``observers/observer.h``); the buffers torch.ao code reads (``min_val``, ``max_val``,
``histogram``, ``eps``, ``scale``, ``zero_point``) mirror that state after every call and load
back into it from a state dict. Qparams are bit-identical to torch.ao's.
"""

from __future__ import annotations

import abc
import functools
import sys
import warnings
from typing import Any

import torch

from pt2q._C import observers as _cobs

__all__ = [
    "ObserverBase", "UniformQuantizationObserverBase", "MinMaxObserver", "MovingAverageMinMaxObserver",
    "PerChannelMinMaxObserver", "MovingAveragePerChannelMinMaxObserver", "HistogramObserver",
    "PlaceholderObserver", "FixedQParamsObserver", "DerivedObserverOrFakeQuantize", "PartialWrapper",
    "default_observer", "default_histogram_observer", "default_weight_observer",
    "default_per_channel_weight_observer", "default_dynamic_quant_observer", "default_placeholder_observer",
    "weight_observer_range_neg_127_to_127", "per_channel_weight_observer_range_neg_127_to_127",
    "default_float_qparams_observer", "default_fixed_qparams_range_neg1to1_observer",
    "default_fixed_qparams_range_0to1_observer",
]

_EPS = torch.finfo(torch.float32).eps
_ALLOWED_DTYPES = (torch.qint8, torch.quint8, torch.quint4x2, torch.qint32, torch.int8, torch.uint8, torch.int16,
                   torch.int32, torch.float8_e5m2, torch.float8_e4m3fn, torch.uint16)
_QSCHEMES = (torch.per_tensor_affine, torch.per_tensor_symmetric, torch.per_channel_affine,
             torch.per_channel_symmetric, torch.per_channel_affine_float_qparams)


class PartialWrapper:
    """A constructor with some arguments bound (torch.ao's ``_PartialWrapper``): ``.p`` is the
    ``functools.partial``, ``with_args`` binds more, calling it builds the observer."""

    def __init__(self, p: functools.partial):
        self.p = p
        self.callable_args: dict[str, Any] = {}

    def __call__(self, *args, **keywords):
        for name, make in self.callable_args.items():
            keywords.setdefault(name, make())
        return self.p(*args, **keywords)

    def __repr__(self):
        return repr(self.p) + repr(self.callable_args)

    def with_args(self, **kwargs):
        return _with_args(self, **kwargs)

    def with_callable_args(self, **kwargs):
        r = PartialWrapper(self.p)
        r.callable_args = {**self.callable_args, **kwargs}
        return r


def _with_args(cls_or_self, **kwargs):
    r = PartialWrapper(functools.partial(cls_or_self, **kwargs))
    if isinstance(cls_or_self, PartialWrapper):
        r.callable_args = dict(cls_or_self.callable_args)
    return r


def _qname(x) -> str:
    return str(x).replace("torch.", "")


_is_functional = torch._is_functional_tensor
_is_functorch_wrapped = torch._C._functorch.is_functorch_wrapped_tensor


def _plain_tensor(x) -> bool:
    """A tensor that holds data, found without is_fake's Python walk (about 4 us a call, most of an
    observer call on a small activation): only wrappers, functional or functorch, can hide a fake
    tensor inside an exact torch.Tensor."""
    return type(x) is torch.Tensor and not _is_functional(x) and not _is_functorch_wrapped(x)


def _tracing(x: torch.Tensor) -> bool:
    """A tensor without data: torch's higher-order ops (scan) trace their body with fake tensors
    before they run it; the observer records the run, not the trace."""
    return torch._subclasses.fake_tensor.is_fake(x)


class ObserverBase(torch.nn.Module):
    """Base of every observer: ``dtype``, ``is_dynamic``, ``with_args``."""

    def __init__(self, dtype, is_dynamic: bool = False):
        super().__init__()
        self.dtype = dtype
        self.is_dynamic = is_dynamic

    with_args = classmethod(_with_args)

    @classmethod
    def with_callable_args(cls, **kwargs):
        r = PartialWrapper(functools.partial(cls))
        return r.with_callable_args(**kwargs)

    def calculate_qparams(self, **kwargs):
        raise NotImplementedError

    def _where(self) -> str:
        seen = getattr(self, "_pt2q_observing", None)
        return f"{type(self).__name__} observing {', '.join('%' + s for s in seen)}" if seen else type(self).__name__


class UniformQuantizationObserverBase(ObserverBase):
    """torch.ao's base for affine observers: dtype/qscheme checks, ``quant_min``/``quant_max``
    resolution, the ``eps`` buffer, and the C++ observer that does the work."""

    _cpp_class = ""
    _state_names: tuple[str, ...] = ("min_val", "max_val")

    def __init__(self, dtype=torch.quint8, qscheme=torch.per_tensor_affine, reduce_range=False, quant_min=None,
                 quant_max=None, factory_kwargs=None, eps=_EPS, is_dynamic=False, *, ch_axis=0,
                 averaging_constant=0.01, bins=2048, **kwargs):
        if kwargs:
            raise TypeError(f"{type(self).__name__} got unexpected arguments {sorted(kwargs)}")
        super().__init__(dtype=dtype, is_dynamic=is_dynamic)
        if qscheme not in _QSCHEMES:
            raise AssertionError("Default Observer only works for per_tensor_affine, per_tensor_symmetric, "
                                 "per_channel_affine, per_channel_symmetric and per_channel_float_qparams "
                                 f"quantization scheme, got {qscheme}")
        if dtype not in _ALLOWED_DTYPES:
            raise AssertionError(f"Default Observer only works for {_ALLOWED_DTYPES} data type, got {dtype}")
        if reduce_range:
            warnings.warn("Please use quant_min and quant_max to specify the range for observers. "
                          "reduce_range will be deprecated in a future release of PyTorch.", stacklevel=2)
        self.qscheme = qscheme
        self.reduce_range = reduce_range
        self.has_customized_qrange = quant_min is not None and quant_max is not None
        self.register_buffer("eps", torch.tensor([eps]))
        self._cpp_args = (self._cpp_class, _qname(dtype), _qname(qscheme), quant_min, quant_max, reduce_range,
                          ch_axis, averaging_constant, float(eps), bins)
        try:
            self._obs = _cobs.Observer(*self._cpp_args)
        except RuntimeError as e:
            raise ValueError(f"{type(self).__name__}: {e}") from None
        self.quant_min, self.quant_max = self._obs.qrange
        self._sync()

    def _sync(self):
        for name, t in self._obs.state():
            self._buffers[name] = t

    def forward(self, x_orig):
        if not _plain_tensor(x_orig) and (not isinstance(x_orig, torch.Tensor) or _tracing(x_orig)):
            return x_orig
        # the C++ observer detaches; only a tensor on another device needs a copy here
        x = x_orig if x_orig.is_cpu else x_orig.detach().cpu()
        try:
            self._obs.observe(x)
        except RuntimeError as e:
            raise RuntimeError(f"{self._where()}: {e}") from None
        self._sync()
        return x_orig

    def calculate_qparams(self):
        if self._unobserved():
            warnings.warn("must run observer before calling calculate_qparams. Returning default scale and "
                          "zero point ", stacklevel=2)
        scale, zp = self._obs.calculate_qparams()
        return scale, zp

    def _unobserved(self) -> bool:
        mn = self._buffers.get("min_val")
        return mn is None or mn.numel() == 0 or (mn.dim() == 0 and bool(mn == float("inf")))

    # copy.deepcopy and pickle: the C++ observer travels as its statistics (what state files hold).
    def __getstate__(self):
        state = self.__dict__.copy()
        state["_obs"] = [(name, t.clone()) for name, t in self._obs.state()]
        return state

    def __setstate__(self, state):
        statistics = state.pop("_obs")
        super().__setstate__(state)
        self._obs = _cobs.Observer(*self._cpp_args)
        self._obs.set_state(statistics)
        self._sync()

    def reset_min_max_vals(self):
        """Forgets everything observed."""
        self._obs = _cobs.Observer(*self._cpp_args)
        self._sync()

    def merge(self, other: "UniformQuantizationObserverBase") -> None:
        """Folds in another observer's statistics (calibration split over processes)."""
        self._obs.merge(other._obs)
        self._sync()

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        state = []
        for name in self._state_names:
            key = prefix + name
            if key in state_dict:
                state.append((name, state_dict[key].detach().cpu().float()))
            elif strict:
                missing_keys.append(key)
        if len(state) == len(self._state_names):
            try:
                self._obs.set_state(state)
            except RuntimeError as e:
                error_msgs.append(f"{prefix}: {e}")
            self._sync()
        rest = {k: v for k, v in state_dict.items() if not any(k == prefix + n for n in self._state_names)}
        saved = dict(self._buffers)
        for n in self._state_names:
            self._buffers.pop(n, None)
        try:
            super()._load_from_state_dict(rest, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                          error_msgs)
        finally:
            for n in self._state_names:
                self._buffers[n] = saved[n]

    def extra_repr(self):
        return f"min_val={self._buffers.get('min_val')}, max_val={self._buffers.get('max_val')}"


class MinMaxObserver(UniformQuantizationObserverBase):
    """Running min/max of the whole tensor (torch.ao.quantization.MinMaxObserver)."""

    _cpp_class = "MinMaxObserver"

    def __init__(self, dtype=torch.quint8, qscheme=torch.per_tensor_affine, reduce_range=False, quant_min=None,
                 quant_max=None, factory_kwargs=None, eps=_EPS, is_dynamic=False, **kwargs):
        if qscheme == torch.per_tensor_symmetric and reduce_range and dtype == torch.quint8:
            raise NotImplementedError("Cannot reduce range for symmetric quantization for quint8")
        super().__init__(dtype, qscheme, reduce_range, quant_min, quant_max, factory_kwargs, eps, is_dynamic,
                         **kwargs)


class MovingAverageMinMaxObserver(MinMaxObserver):
    """Moving average of min/max (torch.ao.quantization.MovingAverageMinMaxObserver)."""

    _cpp_class = "MovingAverageMinMaxObserver"

    def __init__(self, averaging_constant=0.01, dtype=torch.quint8, qscheme=torch.per_tensor_affine,
                 reduce_range=False, quant_min=None, quant_max=None, eps=_EPS, is_dynamic=False, **kwargs):
        if not (averaging_constant == 1 or not is_dynamic):
            raise NotImplementedError("MovingAverageMinMaxObserver doesn't support dynamic quantization for "
                                      f"averaging constant of {averaging_constant}")
        self.averaging_constant = averaging_constant
        super().__init__(dtype=dtype, qscheme=qscheme, reduce_range=reduce_range, quant_min=quant_min,
                         quant_max=quant_max, eps=eps, is_dynamic=is_dynamic, averaging_constant=averaging_constant,
                         **kwargs)


class PerChannelMinMaxObserver(UniformQuantizationObserverBase):
    """Running min/max per channel along ``ch_axis`` (torch.ao.quantization.PerChannelMinMaxObserver)."""

    _cpp_class = "PerChannelMinMaxObserver"

    def __init__(self, ch_axis=0, dtype=torch.quint8, qscheme=torch.per_channel_affine, reduce_range=False,
                 quant_min=None, quant_max=None, factory_kwargs=None, eps=_EPS, is_dynamic=False, **kwargs):
        if is_dynamic:
            raise NotImplementedError("PerChannelMinMaxObserver doesn't support dynamic quantization")
        self.ch_axis = ch_axis
        super().__init__(dtype, qscheme, reduce_range, quant_min, quant_max, factory_kwargs, eps, is_dynamic,
                         ch_axis=ch_axis, **kwargs)

    def _unobserved(self) -> bool:
        return self._buffers["min_val"].numel() == 0


class MovingAveragePerChannelMinMaxObserver(PerChannelMinMaxObserver):
    """Moving average of per-channel min/max (torch.ao's class of that name)."""

    _cpp_class = "MovingAveragePerChannelMinMaxObserver"

    def __init__(self, averaging_constant=0.01, ch_axis=0, dtype=torch.quint8, qscheme=torch.per_channel_affine,
                 reduce_range=False, quant_min=None, quant_max=None, eps=_EPS, is_dynamic=False, **kwargs):
        self.averaging_constant = averaging_constant
        super().__init__(ch_axis=ch_axis, dtype=dtype, qscheme=qscheme, reduce_range=reduce_range,
                         quant_min=quant_min, quant_max=quant_max, eps=eps, is_dynamic=is_dynamic,
                         averaging_constant=averaging_constant, **kwargs)


class HistogramObserver(UniformQuantizationObserverBase):
    """A 2048-bin running histogram and torch.ao's L2 search for the clipping range
    (torch.ao.quantization.HistogramObserver), bit-identical and several times faster."""

    _cpp_class = "HistogramObserver"
    _state_names = ("min_val", "max_val", "histogram")

    def __init__(self, bins: int = 2048, dtype=torch.quint8, qscheme=torch.per_tensor_affine, reduce_range=False,
                 quant_min=None, quant_max=None, factory_kwargs=None, eps=_EPS, is_dynamic=False, **kwargs):
        if qscheme not in (torch.per_tensor_affine, torch.per_tensor_symmetric):
            raise NotImplementedError("HistogramObserver's qscheme only support torch.per_tensor_symmetric and "
                                      "torch.per_tensor_affine.")
        if is_dynamic:
            raise NotImplementedError("HistogramObserver doesn't support dynamic quantization")
        self.bins = bins
        super().__init__(dtype, qscheme, reduce_range, quant_min, quant_max, factory_kwargs, eps, is_dynamic,
                         bins=bins, **kwargs)
        self.dst_nbins = 2 ** torch.iinfo(dtype).bits
        self.upsample_rate = 16

    def _unobserved(self) -> bool:
        return bool(self._buffers["min_val"] == float("inf")) and bool(self._buffers["max_val"] == float("-inf"))

    def _compute_quantization_error(self, next_start_bin: int, next_end_bin: int) -> float:
        return self._obs._quantization_error(next_start_bin, next_end_bin)


class PlaceholderObserver(ObserverBase):
    """No statistics: dynamic activations (qparams chosen at run time) and float values."""

    def __init__(self, dtype=torch.float32, custom_op_name="", compute_dtype=None, quant_min=None, quant_max=None,
                 qscheme=None, eps=None, is_dynamic=False):
        super().__init__(dtype=dtype, is_dynamic=is_dynamic)
        self.qscheme = torch.per_tensor_affine if qscheme is None else qscheme
        self.quant_min = quant_min
        self.quant_max = quant_max
        self.eps = _EPS if eps is None else eps
        self.custom_op = custom_op_name
        if compute_dtype:
            self.is_dynamic = True
            warnings.warn("Please use `is_dynamic` instead of `compute_dtype`.", stacklevel=2)

    def forward(self, x):
        return x

    def extra_repr(self):
        return f"dtype={self.dtype}, is_dynamic={self.is_dynamic}"

    def calculate_qparams(self):
        raise Exception("calculate_qparams should not be called for PlaceholderObserver")  # noqa: TRY002


class FixedQParamsObserver(ObserverBase):
    """Fixed qparams given by the quantizer (e.g. sigmoid's scale 1/256)."""

    def __init__(self, scale, zero_point, dtype=torch.quint8, qscheme=torch.per_tensor_affine, quant_min=0,
                 quant_max=255, is_dynamic=False, **kwargs):
        if is_dynamic:
            raise NotImplementedError("FixedQParamsObserver doesn't support dynamic quantization")
        super().__init__(dtype=dtype, is_dynamic=is_dynamic)
        self.quant_min = quant_min
        self.quant_max = quant_max
        self.register_buffer("scale", torch.tensor([scale], dtype=torch.float))
        self.register_buffer("zero_point", torch.tensor([zero_point], dtype=torch.int))
        self.qscheme = qscheme

    def forward(self, x):
        return x

    def calculate_qparams(self):
        return self.scale, self.zero_point


class DerivedObserverOrFakeQuantize(ObserverBase):
    """Qparams derived from other observers (DerivedQuantizationSpec), e.g. an int32 bias whose
    scale is input scale times weight scale."""

    def __init__(self, dtype, obs_or_fqs, derive_qparams_fn, quant_min=None, quant_max=None, qscheme=None,
                 ch_axis=None):
        super().__init__(dtype)
        self.obs_or_fqs = obs_or_fqs
        self.derive_qparams_fn = derive_qparams_fn
        self.quant_min = quant_min
        self.quant_max = quant_max
        self.qscheme = qscheme
        self.ch_axis = ch_axis
        if qscheme in (torch.per_channel_affine, torch.per_channel_symmetric) and ch_axis is None:
            raise AssertionError("Must provide a valid ch_axis if qscheme is per channel")

    def forward(self, x):
        return x

    def calculate_qparams(self):
        return self.derive_qparams_fn(self.obs_or_fqs)


default_observer = MinMaxObserver.with_args(quant_min=0, quant_max=127)
default_placeholder_observer = PlaceholderObserver
default_weight_observer = MinMaxObserver.with_args(dtype=torch.qint8, qscheme=torch.per_tensor_symmetric)
weight_observer_range_neg_127_to_127 = MinMaxObserver.with_args(
    dtype=torch.qint8, qscheme=torch.per_tensor_symmetric, quant_min=-127, quant_max=127, eps=2 ** -12)
default_histogram_observer = HistogramObserver.with_args(quant_min=0, quant_max=127)
default_per_channel_weight_observer = PerChannelMinMaxObserver.with_args(
    dtype=torch.qint8, qscheme=torch.per_channel_symmetric)
per_channel_weight_observer_range_neg_127_to_127 = PerChannelMinMaxObserver.with_args(
    dtype=torch.qint8, qscheme=torch.per_channel_symmetric, quant_min=-127, quant_max=127, eps=2 ** -12)
default_float_qparams_observer = PerChannelMinMaxObserver.with_args(
    dtype=torch.quint8, qscheme=torch.per_channel_affine_float_qparams, ch_axis=0)
default_dynamic_quant_observer = PlaceholderObserver.with_args(dtype=torch.quint8, quant_min=0, quant_max=255,
                                                               is_dynamic=True)
default_fixed_qparams_range_neg1to1_observer = FixedQParamsObserver.with_args(
    scale=2.0 / 256.0, zero_point=128, dtype=torch.quint8, quant_min=0, quant_max=255)
default_fixed_qparams_range_0to1_observer = FixedQParamsObserver.with_args(
    scale=1.0 / 256.0, zero_point=0, dtype=torch.quint8, quant_min=0, quant_max=255)

from pt2q.observer_group_token import PerGroupMinMaxObserver, PerTokenDynamicObserver  # noqa: E402

__all__ += ["PerGroupMinMaxObserver", "PerTokenDynamicObserver"]

# torch.ao's and torchao's ObserverBase are ABCs; pt2q's observers register as virtual
# subclasses of them, so that `isinstance(obs, ObserverBase)` in code written for torchao (its
# tests, its own helpers such as _is_activation_post_process) holds for pt2q's observers too.
# Only modules already imported are touched: pt2q imports neither torch.ao.quantization
# (deprecated) nor torchao.
_FOREIGN_OBSERVER_MODULES = ("torch.ao.quantization.observer", "torchao.quantization.pt2e.observer")
_registered_with: set = set()


def register_with_foreign_bases() -> None:
    """Registers pt2q's ObserverBase with the foreign observer bases imported so far (called at
    import and by prepare_pt2e; idempotent)."""
    for name in _FOREIGN_OBSERVER_MODULES:
        base = getattr(sys.modules.get(name), "ObserverBase", None)
        if name not in _registered_with and isinstance(base, abc.ABCMeta):
            base.register(ObserverBase)
            _registered_with.add(name)


register_with_foreign_bases()
