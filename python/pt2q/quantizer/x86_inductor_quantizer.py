"""X86InductorQuantizer: uint8 activations and int8 per-channel weights for Inductor's x86
lowering (torchao's recipe), annotating in C++ (quantizers/x86_annotators.cpp)."""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass
from typing import Callable, Optional

import torch
import torch.nn.functional as F
from torch import fx

from pt2q import observer as _obs
from pt2q.quantizer._annotate import AnnotationSession, module_name_filter
from pt2q.quantizer.quantizer import QuantizationAnnotation, QuantizationSpec, Quantizer
from pt2q.quantizer.utils import QuantizationConfig

__all__ = ["X86InductorQuantizer", "get_default_x86_inductor_quantization_config"]


@dataclass
class X86InductorQuantizationAnnotation(QuantizationAnnotation):
    """A QuantizationAnnotation that also says whether the node ends a quantized pattern."""

    _is_output_of_quantized_pattern: bool = False


@functools.lru_cache
def get_default_x86_inductor_quantization_config(is_qat: bool = False, is_dynamic: bool = False,
                                                 reduce_range: bool = False) -> QuantizationConfig:
    """uint8 affine activations [0, 255] ([0, 127] with reduce_range; HistogramObserver, or chosen
    at run time when dynamic), int8 per-channel symmetric weights [-128, 127], bias float."""
    if is_qat:
        raise NotImplementedError("get_default_x86_inductor_quantization_config(is_qat=True): quantization-aware "
                                  "training is not supported by pt2q yet")
    act_ctr = _obs.PlaceholderObserver if is_dynamic else _obs.HistogramObserver
    act = QuantizationSpec(dtype=torch.uint8, quant_min=0, quant_max=127 if reduce_range else 255,
                           qscheme=torch.per_tensor_affine, is_dynamic=is_dynamic,
                           observer_or_fake_quant_ctr=act_ctr.with_args(eps=2 ** -12))
    weight = QuantizationSpec(dtype=torch.int8, quant_min=-128, quant_max=127, qscheme=torch.per_channel_symmetric,
                              ch_axis=0, is_dynamic=False,
                              observer_or_fake_quant_ctr=_obs.PerChannelMinMaxObserver.with_args(eps=2 ** -12))
    return QuantizationConfig(act, act, weight, None, is_qat)


_MODULE_OR_FUNCTION_TO_OP = {
    torch.nn.Conv2d: "aten.conv2d", F.conv2d: "aten.conv2d", torch.nn.Conv1d: "aten.conv1d", F.conv1d: "aten.conv1d",
    torch.nn.Linear: "aten.linear", F.linear: "aten.linear", torch.nn.MaxPool2d: "aten.max_pool2d",
    F.max_pool2d: "aten.max_pool2d", torch.cat: "aten.cat", torch.nn.AvgPool2d: "aten.avg_pool2d",
    F.avg_pool2d: "aten.avg_pool2d", torch.nn.AdaptiveAvgPool2d: "aten.adaptive_avg_pool2d",
    F.adaptive_avg_pool2d: "aten.adaptive_avg_pool2d", torch.flatten: "aten.flatten.using_ints",
    torch.matmul: "aten.matmul", torch.mul: "aten.mul.Tensor",
}

_RECIPE = ["x86_conv2d_fusions", "x86_linear_fusions", "x86_matmul", "x86_mul", "x86_propagation"]


class X86InductorQuantizer(Quantizer):
    """conv2d/conv1d and linear with their fused add/unary ops quantized on the inputs (outputs go
    to the next op's quantize), mul, optionally matmul, and max_pool2d/cat/avg_pool2d/
    adaptive_avg_pool2d/flatten in int8 when fed by quantized ops. Configs by module name, then
    operator type, then global; static and dynamic configs cannot be mixed."""

    def __init__(self) -> None:
        super().__init__()
        self.global_config: Optional[QuantizationConfig] = None
        self.operator_type_qconfig: dict[str, Optional[QuantizationConfig]] = {}
        self.module_name_qconfig: dict[str, Optional[QuantizationConfig]] = {}

    def _mode_conflicts(self, config: Optional[QuantizationConfig]) -> bool:
        if config is None or config.input_activation is None:
            return False
        for other in [*self.module_name_qconfig.values(), *self.operator_type_qconfig.values(), self.global_config]:
            if other is not None and other.input_activation is not None and \
                    other.input_activation.is_dynamic != config.input_activation.is_dynamic:
                warnings.warn("Mixed dynamic and static quantization config is not supported.", stacklevel=3)
                return True
        return False

    def set_global(self, quantization_config: QuantizationConfig) -> "X86InductorQuantizer":
        if self._mode_conflicts(quantization_config):
            warnings.warn("Skip the global quantization config.", stacklevel=2)
            return self
        self.global_config = quantization_config
        return self

    def get_global_quantization_config(self) -> Optional[QuantizationConfig]:
        return self.global_config

    def set_function_type_qconfig(self, function_type: Callable, quantization_config: Optional[QuantizationConfig]
                                  ) -> "X86InductorQuantizer":
        if function_type not in _MODULE_OR_FUNCTION_TO_OP:
            raise ValueError(f"X86InductorQuantizer cannot configure {function_type}; it configures "
                             f"{sorted({getattr(k, '__name__', str(k)) for k in _MODULE_OR_FUNCTION_TO_OP})}")
        if not self._mode_conflicts(quantization_config):
            self.operator_type_qconfig[_MODULE_OR_FUNCTION_TO_OP[function_type]] = quantization_config
        return self

    def set_module_type_qconfig(self, module_type, quantization_config: Optional[QuantizationConfig]
                                ) -> "X86InductorQuantizer":
        return self.set_function_type_qconfig(module_type, quantization_config)

    def set_module_name_qconfig(self, module_name: str, quantization_config: Optional[QuantizationConfig]
                                ) -> "X86InductorQuantizer":
        if not self._mode_conflicts(quantization_config):
            self.module_name_qconfig[module_name] = quantization_config
        return self

    def annotate(self, model: fx.GraphModule) -> fx.GraphModule:
        session = AnnotationSession(model, X86InductorQuantizationAnnotation)
        for name, config in self.module_name_qconfig.items():
            session.run(_RECIPE, config, module_name_filter(name), none_claims=True)
        for op, config in self.operator_type_qconfig.items():
            session.run(_RECIPE, config, pattern_filter=op, none_claims=True)
        if self.global_config is not None:
            session.run(_RECIPE, self.global_config, pattern_filter="global")
        session.x86_int8_outputs()
        session.write_back()
        return model

    def validate(self, model: fx.GraphModule) -> None:
        pass
