"""Quantizers for pt2q's native linear ops, in the PT2E style. No calibration is needed: convert
observes each weight itself, and dynamic activations choose their qparams at run time. With
convert_pt2e(..., lower_to_native=True) the linears run as pt2q's native ops:

| quantizer                              | weight                               | input      | native op   |
|----------------------------------------|--------------------------------------|------------|-------------|
| Int8WeightOnlyQuantizer()              | int8 per channel, symmetric [-127,127] | float    | linear_w8a16 |
| Int4WeightOnlyQuantizer(group_size)    | int4 per group, symmetric [-8, 7]    | float      | linear_w4a16 |
| Int8DynActInt8WeightQuantizer()        | int8 per channel, symmetric [-127,127] | int8 per token | linear_w8a8 |
| Int8DynActInt4WeightQuantizer(group_size) | int4 per group, symmetric [-8, 7] | int8 per token | linear_w4a8 |

Per-token activations are asymmetric int8 (torch's choose_qparams_per_token_asymmetric);
without lowering the converted graph holds torch's quantized_decomposed ops and runs anywhere."""

from __future__ import annotations

from typing import Callable, Optional

import torch
from torch import fx

from pt2q import observer as _obs
from pt2q.quantizer._annotate import AnnotationSession, module_name_filter, module_type_filter
from pt2q.quantizer.quantizer import QuantizationSpec, Quantizer
from pt2q.quantizer.utils import QuantizationConfig

__all__ = ["Int8WeightOnlyQuantizer", "Int4WeightOnlyQuantizer", "Int8DynActInt8WeightQuantizer",
           "Int8DynActInt4WeightQuantizer"]

_GROUP_SIZES = (32, 64, 128, 256)


def _int8_weight_spec() -> QuantizationSpec:
    return QuantizationSpec(dtype=torch.int8, quant_min=-127, quant_max=127, qscheme=torch.per_channel_symmetric,
                            ch_axis=0, is_dynamic=False,
                            observer_or_fake_quant_ctr=_obs.PerChannelMinMaxObserver.with_args(eps=2 ** -12))


def _int4_weight_spec(group_size: int) -> QuantizationSpec:
    # torchao's 8da4w qparams (get_group_qparams_symmetric): eps is fp32's smallest normal, so a
    # group of tiny weights keeps its own scale.
    ctr = _obs.PerGroupMinMaxObserver.with_args(group_size=group_size, eps=torch.finfo(torch.float32).smallest_normal)
    return QuantizationSpec(dtype=torch.int8, quant_min=-8, quant_max=7, qscheme=torch.per_channel_symmetric,
                            ch_axis=0, is_dynamic=False, observer_or_fake_quant_ctr=ctr)


def _per_token_spec() -> QuantizationSpec:
    return QuantizationSpec(dtype=torch.int8, quant_min=-128, quant_max=127, qscheme=torch.per_tensor_affine,
                            is_dynamic=True, observer_or_fake_quant_ctr=_obs.PerTokenDynamicObserver)


def _check_group_size(cls: str, group_size) -> int:
    if group_size not in _GROUP_SIZES or isinstance(group_size, bool):
        raise ValueError(f"{cls}: group_size must be one of {_GROUP_SIZES}, got {group_size!r}")
    return group_size


class _LinearQuantizer(Quantizer):
    """Annotates every selected aten.linear's weight (and, for the dynamic schemes, its input).
    `set_module_name(name)` / `set_module_type(type)` restrict it to those modules (several may be
    given); without any, every linear is quantized. Linears another quantizer annotated first
    are left alone."""

    def __init__(self, weight_spec: QuantizationSpec, input_spec: Optional[QuantizationSpec]) -> None:
        super().__init__()
        self._filters: list[Callable[[fx.Node], bool]] = []
        self._weight_spec, self._input_spec = weight_spec, input_spec

    def set_module_name(self, module_name: str):
        if not isinstance(module_name, str):
            raise TypeError(f"set_module_name takes a module path (str), got {type(module_name).__name__}")
        self._filters.append(module_name_filter(module_name))
        return self

    def set_module_type(self, module_type: type):
        if not isinstance(module_type, type):
            raise TypeError(f"set_module_type takes a class, got {type(module_type).__name__}")
        self._filters.append(module_type_filter(module_type))
        return self

    def _node_filter(self) -> Optional[Callable[[fx.Node], bool]]:
        filters = list(self._filters)
        return None if not filters else (lambda n: any(f(n) for f in filters))

    def annotate(self, model: fx.GraphModule) -> fx.GraphModule:
        # The C++ annotator "native_linear" (quantizers/linear_annotators.cpp) does the work, so
        # C++ users annotate the same way.
        session = AnnotationSession(model)
        config = QuantizationConfig(self._input_spec, None, self._weight_spec, None)
        session.run(["native_linear"], config, self._node_filter(), check=False)
        session.write_back()
        return model

    def validate(self, model: fx.GraphModule) -> None:
        pass


class Int8WeightOnlyQuantizer(_LinearQuantizer):
    """int8 per-channel weights (symmetric, [-127, 127]); activations stay float."""

    def __init__(self) -> None:
        super().__init__(_int8_weight_spec(), None)


class Int4WeightOnlyQuantizer(_LinearQuantizer):
    """int4 weights per group of `group_size` input features (symmetric, [-8, 7], scale =
    max|w| / 7.5 per group: torch.ao's per-channel rule with torchao's eps, so the qparams are
    torchao's get_group_qparams_symmetric's); activations stay float."""

    def __init__(self, group_size: int = 128) -> None:
        self.group_size = _check_group_size("Int4WeightOnlyQuantizer", group_size)
        super().__init__(_int4_weight_spec(group_size), None)


class Int8DynActInt8WeightQuantizer(_LinearQuantizer):
    """int8 per-channel weights (symmetric, [-127, 127]) and int8 per-token dynamic activations."""

    def __init__(self) -> None:
        super().__init__(_int8_weight_spec(), _per_token_spec())


class Int8DynActInt4WeightQuantizer(_LinearQuantizer):
    """int4 per-group weights (symmetric, [-8, 7]) and int8 per-token dynamic activations
    (torchao's "8da4w")."""

    def __init__(self, group_size: int = 128) -> None:
        self.group_size = _check_group_size("Int8DynActInt4WeightQuantizer", group_size)
        super().__init__(_int4_weight_spec(group_size), _per_token_spec())
