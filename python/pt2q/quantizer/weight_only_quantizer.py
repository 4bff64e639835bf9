"""Int8WeightOnlyQuantizer: int8 per-channel weights of every linear, activations left float. No
calibration is needed: convert observes each weight itself. With convert_pt2e(...,
lower_to_native=True) the linears run as pt2q.linear_w8a16."""

from __future__ import annotations

from typing import Callable, Optional

import torch
from torch import fx

from pt2q import observer as _obs
from pt2q.quantizer._annotate import module_name_filter, module_type_filter
from pt2q.quantizer.quantizer import Q_ANNOTATION_KEY, QuantizationAnnotation, QuantizationSpec, Quantizer

__all__ = ["Int8WeightOnlyQuantizer"]


def _weight_spec() -> QuantizationSpec:
    return QuantizationSpec(dtype=torch.int8, quant_min=-127, quant_max=127, qscheme=torch.per_channel_symmetric,
                            ch_axis=0, is_dynamic=False,
                            observer_or_fake_quant_ctr=_obs.PerChannelMinMaxObserver.with_args(eps=2 ** -12))


class Int8WeightOnlyQuantizer(Quantizer):
    """Annotates the weight of each aten.linear (int8, symmetric, per output channel).
    `set_module_name(name)` / `set_module_type(type)` restrict it to those modules (several may be
    given); without any, every linear is quantized."""

    def __init__(self) -> None:
        super().__init__()
        self._filters: list[Callable[[fx.Node], bool]] = []

    def set_module_name(self, module_name: str) -> "Int8WeightOnlyQuantizer":
        if not isinstance(module_name, str):
            raise TypeError(f"set_module_name takes a module path (str), got {type(module_name).__name__}")
        self._filters.append(module_name_filter(module_name))
        return self

    def set_module_type(self, module_type: type) -> "Int8WeightOnlyQuantizer":
        if not isinstance(module_type, type):
            raise TypeError(f"set_module_type takes a class, got {type(module_type).__name__}")
        self._filters.append(module_type_filter(module_type))
        return self

    def _selected(self, n: fx.Node) -> bool:
        return not self._filters or any(f(n) for f in self._filters)

    def annotate(self, model: fx.GraphModule) -> fx.GraphModule:
        spec = _weight_spec()
        for n in model.graph.nodes:
            if n.op != "call_function" or n.target != torch.ops.aten.linear.default or not self._selected(n):
                continue
            weight: Optional[fx.Node] = n.args[1] if len(n.args) > 1 else None
            if not isinstance(weight, fx.Node) or Q_ANNOTATION_KEY in n.meta:
                continue
            n.meta[Q_ANNOTATION_KEY] = QuantizationAnnotation(input_qspec_map={weight: spec}, _annotated=True)
        return model

    def validate(self, model: fx.GraphModule) -> None:
        pass
