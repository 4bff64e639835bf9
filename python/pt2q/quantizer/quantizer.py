"""The quantizer API of torchao.quantization.pt2e.quantizer: specs, annotations and the
Quantizer base class, with torchao's fields, defaults and validation."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Union

import torch
from torch.fx import Node

__all__ = ["Quantizer", "QuantizationSpecBase", "QuantizationSpec", "FixedQParamsQuantizationSpec", "EdgeOrNode",
           "SharedQuantizationSpec", "DerivedQuantizationSpec", "QuantizationAnnotation", "Q_ANNOTATION_KEY"]

Q_ANNOTATION_KEY = "quantization_annotation"

# An input edge (producer, consumer) or a node's output.
EdgeOrNode = Union[tuple[Node, Node], Node]


class QuantizationSpecBase(ABC):  # noqa: B024
    """How a tensor (an input edge or an output of a node) is quantized."""


@dataclass(eq=True, frozen=True)
class QuantizationSpec(QuantizationSpecBase):
    """dtype, range, qscheme and the observer (or fake-quant) constructor of one tensor."""

    dtype: torch.dtype
    observer_or_fake_quant_ctr: Any
    quant_min: Optional[int] = None
    quant_max: Optional[int] = None
    qscheme: Optional[torch.qscheme] = None
    ch_axis: Optional[int] = None
    is_dynamic: bool = False

    def __post_init__(self):
        if self.quant_min is not None and self.quant_max is not None and self.quant_min > self.quant_max:
            raise ValueError(f"quant_min {self.quant_min} must be <= quant_max {self.quant_max}.")
        if self.ch_axis is not None and self.ch_axis < 0:
            raise ValueError("Ch_axis is < 0.")


@dataclass(eq=True, frozen=True)
class FixedQParamsQuantizationSpec(QuantizationSpecBase):
    """A tensor with qparams fixed in advance (e.g. sigmoid's output: scale 1/256)."""

    dtype: torch.dtype
    scale: float
    zero_point: int
    quant_min: Optional[int] = None
    quant_max: Optional[int] = None
    qscheme: Optional[torch.qscheme] = None
    is_dynamic: bool = False


@dataclass(eq=True, frozen=True)
class SharedQuantizationSpec(QuantizationSpecBase):
    """A tensor that shares the observer of another edge or node."""

    edge_or_node: EdgeOrNode


@dataclass(eq=True, frozen=True)
class DerivedQuantizationSpec(QuantizationSpecBase):
    """A tensor whose qparams are computed from other tensors' observers (e.g. an int32 bias)."""

    derived_from: list
    derive_qparams_fn: Callable
    dtype: torch.dtype
    quant_min: Optional[int] = None
    quant_max: Optional[int] = None
    qscheme: Optional[torch.qscheme] = None
    ch_axis: Optional[int] = None
    is_dynamic: bool = False


@dataclass
class QuantizationAnnotation:
    """How a node's inputs (by producer node) and output are quantized."""

    input_qspec_map: dict = field(default_factory=dict)
    output_qspec: Optional[QuantizationSpecBase] = None
    allow_implicit_sharing: bool = True
    _annotated: bool = False


class Quantizer(ABC):
    """Annotates an exported graph with how to quantize it."""

    def transform_for_annotation(self, model: torch.fx.GraphModule) -> torch.fx.GraphModule:
        """Optional rewrite before annotation (e.g. scalars to tensors)."""
        return model

    @abstractmethod
    def annotate(self, model: torch.fx.GraphModule) -> torch.fx.GraphModule:
        """Writes node.meta["quantization_annotation"]."""

    @abstractmethod
    def validate(self, model: torch.fx.GraphModule) -> None:
        """Checks that the backend supports the annotated graph."""

    def prepare_obs_or_fq_callback(self, model: torch.fx.GraphModule, edge_or_node_to_obs_or_fq: dict) -> None:
        """Called with the observer of every annotated edge and node before insertion; may change it."""
        return
