"""MXQuantizer: OCP MX and BFP block formats in the PT2E flow.

A config names an element format per role (weights, input activations, output activations; None
leaves the role float), with the block size, rounding and scale mode. Each role's block axis is,
unless given, the reduction axis of the op that consumes it:

| op                         | input activation | weight        | output |
|----------------------------|------------------|---------------|--------|
| aten.linear                | -1 (K)           | -1 (K of [N, K]) | -1  |
| aten.conv1d / conv2d       | 1 (channels)     | 1 (in channels)  | 1   |
| aten.matmul / aten.bmm     | a: -1, b: -2     | (a constant operand: the weight format) | -1 |
| aten.add / mul.Tensor, aten.layer_norm (opt-in: `ops`) | -1 (both operands) | (constant operand) | -1 |

Configs apply globally, per module type or per module name (module name first, then type, then
global; None keeps those modules float), as the other quantizers' do. prepare_pt2e inserts
MXFakeQuantize modules (the prepared model computes in the quantized numerics); convert_pt2e
packs the weights into MX codes + E8M0 scales and keeps `mx_fake_quantize` on activations.

    q = MXQuantizer().set_global(MXQuantizationConfig(weight="fp4_e2m1", input_activation="int8"))
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, Optional, Union

import torch
from torch import fx

from pt2q.observer_mx import MXFakeQuantize, check_mx_params
from pt2q.quantizer._annotate import module_name_filter, module_type_filter
from pt2q.quantizer.quantizer import Q_ANNOTATION_KEY, QuantizationAnnotation, Quantizer

__all__ = ["MXQuantizationSpec", "MXQuantizationConfig", "MXQuantizer", "BFP_FORMATS"]

# BFP names (MSFP style: element bits + 8 shared exponent bits) -> element formats.
BFP_FORMATS = {"bfp16": "int8", "bfp12": "int4", "bfp10": "int2"}


@dataclass(eq=True, frozen=True)
class MXQuantizationSpec:
    """One quantized edge in an MX format; its fields print in the IR's annotation and are the
    `mx_fake_quantize` arguments. `observe=True` makes the inserted module record statistics."""

    elem_format: str
    block_size: int = 32
    axis: int = -1
    rounding: str = "nearest"
    scale_mode: str = "floor"
    flush_fp32_subnorms: bool = False
    seed: Optional[int] = None
    observe: bool = False
    observer_or_fake_quant_ctr: Callable = MXFakeQuantize

    def __post_init__(self):
        check_mx_params("MXQuantizationSpec", self.elem_format, self.block_size, self.axis, self.rounding,
                        self.scale_mode, self.flush_fp32_subnorms, self.seed)


Role = Optional[Union[str, MXQuantizationSpec]]


@dataclass(frozen=True)
class MXQuantizationConfig:
    """Element formats per role (a format name such as "fp4_e2m1", "int8", "bfp12", or an
    MXQuantizationSpec whose own block size, rounding, ... apply to that role; its axis is
    replaced by the role's default unless the *_axis field here is set), and what the named
    formats share. `ops`: which op families are quantized: "linear", "conv", "matmul" (the
    default), and the opt-in "add", "mul", "layer_norm" (their tensor inputs)."""

    weight: Role = None
    input_activation: Role = None
    output_activation: Role = None
    block_size: int = 32
    rounding: str = "nearest"
    scale_mode: str = "floor"
    flush_fp32_subnorms: bool = False
    seed: Optional[int] = None
    observe: bool = False
    weight_axis: Optional[int] = None
    input_axis: Optional[int] = None
    output_axis: Optional[int] = None
    ops: tuple = ("linear", "conv", "matmul")

    def __post_init__(self):
        for role in ("weight", "input_activation", "output_activation"):
            v = getattr(self, role)
            if v is not None and not isinstance(v, (str, MXQuantizationSpec)):
                raise ValueError(f"MXQuantizationConfig: {role} must be a format name, an MXQuantizationSpec or "
                                 f"None, got {v!r}")
            if isinstance(v, str):
                self.spec(role, -1)  # checks the format and the shared parameters now
        unknown = set(self.ops) - set(_OPS)
        if unknown:
            raise ValueError(f"MXQuantizationConfig: ops must be drawn from {tuple(_OPS)}, got {sorted(unknown)}")

    def spec(self, role: str, default_axis: int) -> Optional[MXQuantizationSpec]:
        """The spec of `role` for an op whose reduction axis for it is `default_axis`."""
        v = getattr(self, role)
        axis = {"weight": self.weight_axis, "input_activation": self.input_axis,
                "output_activation": self.output_axis}[role]
        axis = default_axis if axis is None else axis
        if v is None:
            return None
        if isinstance(v, MXQuantizationSpec):
            return dataclasses.replace(v, axis=axis)
        return MXQuantizationSpec(elem_format=BFP_FORMATS.get(v, v), block_size=self.block_size, axis=axis,
                                  rounding=self.rounding, scale_mode=self.scale_mode,
                                  flush_fp32_subnorms=self.flush_fp32_subnorms, seed=self.seed, observe=self.observe)


# op family -> {aten op: (argument index of the input, of the weight / second operand) and axes}
_OPS = {
    "linear": {torch.ops.aten.linear.default: ((0, -1), (1, -1), -1)},
    "conv": {torch.ops.aten.conv1d.default: ((0, 1), (1, 1), 1),
             torch.ops.aten.conv2d.default: ((0, 1), (1, 1), 1)},
    "matmul": {torch.ops.aten.matmul.default: ((0, -1), (1, -2), -1),
               torch.ops.aten.bmm.default: ((0, -1), (1, -2), -1)},
    # opt-in (MXQuantizationConfig.ops): elementwise inputs and layer_norm's input, blocked along
    # the last axis
    "add": {torch.ops.aten.add.Tensor: ((0, -1), (1, -1), -1)},
    "mul": {torch.ops.aten.mul.Tensor: ((0, -1), (1, -1), -1)},
    "layer_norm": {torch.ops.aten.layer_norm.default: ((0, -1), None, -1)},
}


class MXQuantizer(Quantizer):
    """Annotates linear, conv1d/conv2d and matmul/bmm with MX specs from a global, per module type
    or per module name MXQuantizationConfig. Nodes another quantizer annotated first are left
    alone."""

    def __init__(self) -> None:
        super().__init__()
        self.global_config: Optional[MXQuantizationConfig] = None
        self.module_type_config: dict = {}
        self.module_name_config: dict = {}

    @staticmethod
    def _check(config):
        if config is not None and not isinstance(config, MXQuantizationConfig):
            raise TypeError(f"MXQuantizer takes an MXQuantizationConfig or None, got {type(config).__name__}")
        return config

    def set_global(self, config: Optional[MXQuantizationConfig]) -> "MXQuantizer":
        self.global_config = self._check(config)
        return self

    def set_module_type(self, module_type: type, config: Optional[MXQuantizationConfig]) -> "MXQuantizer":
        if not isinstance(module_type, type):
            raise TypeError(f"set_module_type takes a class, got {type(module_type).__name__}")
        self.module_type_config[module_type] = self._check(config)
        return self

    def set_module_name(self, module_name: str, config: Optional[MXQuantizationConfig]) -> "MXQuantizer":
        if not isinstance(module_name, str):
            raise TypeError(f"set_module_name takes a module path (str), got {type(module_name).__name__}")
        self.module_name_config[module_name] = self._check(config)
        return self

    def _config_of(self, n: fx.Node) -> Optional[MXQuantizationConfig]:
        for name, config in self.module_name_config.items():
            if module_name_filter(name)(n):
                return config
        for module_type, config in self.module_type_config.items():
            if module_type_filter(module_type)(n):
                return config
        return self.global_config

    def annotate(self, model: fx.GraphModule) -> fx.GraphModule:
        for n in model.graph.nodes:
            if n.op != "call_function" or Q_ANNOTATION_KEY in n.meta:
                continue
            config = self._config_of(n)
            if config is None:
                continue
            entry = next((table[n.target] for fam, table in _OPS.items() if fam in config.ops and n.target in table),
                         None)
            if entry is None:
                continue
            (a_idx, a_axis), second, out_axis = entry
            b_idx, b_axis = second if second is not None else (None, None)
            specs = {}
            a = n.args[a_idx] if len(n.args) > a_idx else None
            b = n.args[b_idx] if b_idx is not None and len(n.args) > b_idx else None
            if isinstance(a, fx.Node) and (s := config.spec("input_activation", a_axis)) is not None:
                specs[a] = s
            if isinstance(b, fx.Node) and b is not a:
                is_weight = n.target in _OPS["linear"] or n.target in _OPS["conv"] or b.op == "get_attr"
                s = config.spec("weight" if is_weight else "input_activation", b_axis)
                if s is not None:
                    specs[b] = s
            out = config.spec("output_activation", out_axis)
            if not specs and out is None:
                continue
            n.meta[Q_ANNOTATION_KEY] = QuantizationAnnotation(input_qspec_map=specs, output_qspec=out,
                                                              _annotated=True)
        return model

    def validate(self, model: fx.GraphModule) -> None:
        pass
