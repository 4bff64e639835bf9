"""XNNPACKQuantizer: symmetric int8 for XNNPACK-style backends (ExecuTorch's quantizer and
torchao's test copy), annotating in C++ (quantizers/xnnpack_annotators.cpp)."""

from __future__ import annotations

import functools
from typing import Callable, Optional

import torch
from torch import fx

from pt2q import observer as _obs
from pt2q.quantizer._annotate import AnnotationSession, module_name_filter, module_type_filter, not_in
from pt2q.quantizer.quantizer import QuantizationSpec, Quantizer
from pt2q.quantizer.utils import QuantizationConfig

__all__ = ["XNNPACKQuantizer", "get_symmetric_quantization_config"]


@functools.lru_cache
def get_symmetric_quantization_config(is_per_channel: bool = False, is_qat: bool = False, is_dynamic: bool = False,
                                      act_qmin: int = -128, act_qmax: int = 127, weight_qmin: int = -127,
                                      weight_qmax: int = 127) -> QuantizationConfig:
    """int8 activations (affine, HistogramObserver; dynamic: chosen at run time) and int8
    symmetric weights (per tensor or per channel along axis 0), bias float. Memoized: the same
    arguments give the same object. QAT configs need prepare_qat_pt2e, which pt2q lacks yet."""
    if is_qat:
        raise NotImplementedError("get_symmetric_quantization_config(is_qat=True): quantization-aware training is "
                                  "not supported by pt2q yet")
    act_ctr = _obs.PlaceholderObserver if is_dynamic else _obs.HistogramObserver
    act = QuantizationSpec(dtype=torch.int8, quant_min=act_qmin, quant_max=act_qmax, qscheme=torch.per_tensor_affine,
                           is_dynamic=is_dynamic, observer_or_fake_quant_ctr=act_ctr.with_args(eps=2 ** -12))
    weight_ctr = _obs.PerChannelMinMaxObserver if is_per_channel else _obs.MinMaxObserver
    weight = QuantizationSpec(
        dtype=torch.int8, quant_min=weight_qmin, quant_max=weight_qmax,
        qscheme=torch.per_channel_symmetric if is_per_channel else torch.per_tensor_symmetric, ch_axis=0,
        is_dynamic=False, observer_or_fake_quant_ctr=weight_ctr.with_args(eps=2 ** -12))
    return QuantizationConfig(act, None if is_dynamic else act, weight, None, is_qat)


def _convert_scalars_to_attrs(model: fx.GraphModule) -> fx.GraphModule:
    """add/mul with a Python scalar: the scalar becomes a 0-d buffer _tensor_constant_N, so that
    it can be observed like a tensor."""
    for n in model.graph.nodes:
        if n.op != "call_function" or n.target not in (torch.ops.aten.add.Tensor, torch.ops.aten.mul.Tensor):
            continue
        new_args = []
        for a in n.args:
            if isinstance(a, fx.Node):
                new_args.append(a)
                continue
            i = 0
            while hasattr(model, f"_tensor_constant_{i}"):
                i += 1
            name = f"_tensor_constant_{i}"
            value = torch.tensor(float(a))
            model.register_buffer(name, value)
            with model.graph.inserting_before(n):
                attr = model.graph.create_node("get_attr", name, (), {})
                if "val" in n.meta and hasattr(n.meta["val"], "fake_mode"):
                    attr.meta["val"] = n.meta["val"].fake_mode.from_tensor(value, static_shapes=True)
                new_args.append(attr)
        n.args = tuple(new_args)
    model.recompile()
    return model


class XNNPACKQuantizer(Quantizer):
    """Symmetric int8 quantization of linear, conv, conv_transpose (with fused relu), add, mul
    (with fused relu), cat, adaptive_avg_pool2d and GRU inputs/outputs; shape and layout ops
    share their producer's qparams. Configs by module name, then module type, then global."""

    STATIC_OPS = ["linear_relu", "linear", "conv_relu", "conv", "conv_transpose_relu", "conv_transpose",
                  "adaptive_avg_pool2d", "gru_io_only", "add_relu", "add", "mul_relu", "mul", "cat"]
    DYNAMIC_OPS = ["linear"]

    def __init__(self) -> None:
        super().__init__()
        self.global_config: Optional[QuantizationConfig] = None
        self.operator_type_config: dict = {}
        self.module_type_config: dict[Callable, Optional[QuantizationConfig]] = {}
        self.module_name_config: dict[str, Optional[QuantizationConfig]] = {}

    def set_global(self, quantization_config: QuantizationConfig) -> "XNNPACKQuantizer":
        self.global_config = quantization_config
        return self

    def set_operator_type(self, operator_type, quantization_config: QuantizationConfig) -> "XNNPACKQuantizer":
        self.operator_type_config[operator_type] = quantization_config
        return self

    def set_module_type(self, module_type: Callable, quantization_config: QuantizationConfig) -> "XNNPACKQuantizer":
        self.module_type_config[module_type] = quantization_config
        return self

    def set_module_name(self, module_name: str, quantization_config: Optional[QuantizationConfig]
                        ) -> "XNNPACKQuantizer":
        if quantization_config is None:
            raise ValueError(f"set_module_name({module_name!r}, None): a None config is not supported; leave the "
                             "module out of every config instead")
        self.module_name_config[module_name] = quantization_config
        return self

    def transform_for_annotation(self, model: fx.GraphModule) -> fx.GraphModule:
        return _convert_scalars_to_attrs(model)

    def annotate(self, model: fx.GraphModule) -> fx.GraphModule:
        dynamic = self.global_config is not None and self.global_config.input_activation is not None and \
            self.global_config.input_activation.is_dynamic
        ops = self.DYNAMIC_OPS if dynamic else self.STATIC_OPS
        session = AnnotationSession(model)
        for name, config in self.module_name_config.items():
            session.run(ops, config, module_name_filter(name))
        for tp, config in self.module_type_config.items():
            session.run(ops, config, module_type_filter(tp))
        excluded = [module_type_filter(t) for t in self.module_type_config] + \
            [module_name_filter(m) for m in self.module_name_config]
        session.run(ops, self.global_config, not_in(excluded))
        session.propagate()
        session.write_back()
        return model

    def validate(self, model: fx.GraphModule) -> None:
        pass
