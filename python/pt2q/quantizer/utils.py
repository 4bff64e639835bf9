"""Configs and annotation helpers of torchao.quantization.pt2e.quantizer (same names, same checks)."""

from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import Callable, NamedTuple, Optional

import torch
from torch.fx import Node

from pt2q.quantizer.quantizer import Q_ANNOTATION_KEY, QuantizationAnnotation, QuantizationSpec

__all__ = ["QuantizationConfig", "OperatorConfig", "OperatorPatternType", "get_input_act_qspec",
           "get_output_act_qspec", "get_weight_qspec", "get_bias_qspec", "annotate_input_qspec_map",
           "annotate_output_qspec", "get_module_name_filter", "is_valid_annotation"]


@dataclass(eq=True, frozen=True)
class QuantizationConfig:
    """The specs of one op's roles: input activation, output activation, weight, bias."""

    input_activation: Optional[QuantizationSpec]
    output_activation: Optional[QuantizationSpec]
    weight: Optional[QuantizationSpec]
    bias: Optional[QuantizationSpec]
    is_qat: bool = False


OperatorPatternType = typing.Annotated[list[Callable], None]


class OperatorConfig(NamedTuple):
    config: QuantizationConfig
    operators: list


_PER_TENSOR = (torch.per_tensor_affine, torch.per_tensor_symmetric)


def _act(config: Optional[QuantizationConfig], role: str):
    spec = None if config is None else getattr(config, role)
    if spec is not None and spec.qscheme not in _PER_TENSOR:
        raise ValueError(f"{role} must be quantized per tensor (per_tensor_affine or per_tensor_symmetric), "
                         f"got {spec.qscheme}")
    return spec


def get_input_act_qspec(quantization_config: Optional[QuantizationConfig]):
    return _act(quantization_config, "input_activation")


def get_output_act_qspec(quantization_config: Optional[QuantizationConfig]):
    return _act(quantization_config, "output_activation")


def get_weight_qspec(quantization_config: Optional[QuantizationConfig]):
    if quantization_config is None or quantization_config.weight is None:
        return None
    spec = quantization_config.weight
    if spec.qscheme not in (torch.per_tensor_symmetric, torch.per_channel_symmetric, None):
        raise ValueError(f"Unsupported quantization_spec {spec} for weight")
    return spec


def get_bias_qspec(quantization_config: Optional[QuantizationConfig]):
    if quantization_config is None or quantization_config.bias is None:
        return None
    spec = quantization_config.bias
    if spec.dtype != torch.float:
        raise ValueError(f"Only float dtype for bias is supported for bias right now, got {spec.dtype}")
    return spec


def annotate_input_qspec_map(node: Node, input_node: Node, qspec) -> None:
    a = node.meta.get(Q_ANNOTATION_KEY, QuantizationAnnotation())
    if a.input_qspec_map is None:
        a.input_qspec_map = {}
    a.input_qspec_map[input_node] = qspec
    node.meta[Q_ANNOTATION_KEY] = a


def annotate_output_qspec(node: Node, qspec) -> None:
    a = node.meta.get(Q_ANNOTATION_KEY, QuantizationAnnotation())
    a.output_qspec = qspec
    node.meta[Q_ANNOTATION_KEY] = a


def _normalize_path(path: str) -> str:
    return path[len("L['self']."):] if path.startswith("L['self'].") else path


def get_module_name_filter(module_name: str):
    """A filter accepting the nodes that come from the module at `module_name` (or inside it)."""

    def module_name_filter(n: Node) -> bool:
        stack = n.meta.get("nn_module_stack", {})
        return module_name in [_normalize_path(p) for p, _ in stack.values()]

    return module_name_filter


def is_valid_annotation(annotation) -> bool:
    if annotation is None:
        return False
    return len(annotation.input_qspec_map) != 0 or annotation.output_qspec is not None
