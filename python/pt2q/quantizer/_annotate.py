"""Running pt2q's C++ annotators on an FX GraphModule: FX annotations go into the IR, the
annotators add theirs, and the new ones come back as QuantizationAnnotation objects (nodes
already annotated keep their objects, which ComposableQuantizer checks)."""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional

import torch
from torch import fx

from pt2q import _annotations as _ann
from pt2q import graph as _graph
from pt2q._C import quantizers as _cq
from pt2q.quantizer.quantizer import QuantizationAnnotation, SharedQuantizationSpec
from pt2q.quantizer.utils import (
    QuantizationConfig,
    get_bias_qspec,
    get_input_act_qspec,
    get_output_act_qspec,
    get_weight_qspec,
)


class AnnotationSession:
    """The IR mirror of one GraphModule while annotators run on it."""

    def __init__(self, gm: fx.GraphModule, annotation_class=QuantizationAnnotation):
        self.gm = gm
        self.annotation_class = annotation_class
        self.g = _graph.from_fx(gm)
        self.table = _ann.SpecTable()
        self.ir = {n.name: n for n in self.g.nodes()}
        self.before = {}
        for n in gm.graph.nodes:
            text = _ann.annotation_text(n, gm, self.table)
            if text:
                self.ir[n.name].annotation = text
            self.before[n.name] = text

    def ref(self, spec) -> Optional[str]:
        if spec is None:
            return None
        return _ann._ref(spec, self.table, self.gm, "quantization config")

    def run(self, annotators: list[str], config: Optional[QuantizationConfig],
            node_filter: Optional[Callable[[fx.Node], bool]] = None, check: bool = True,
            pattern_filter: str = "", none_claims: bool = False) -> None:
        """Runs `annotators` with `config`'s specs (checked by get_*_qspec unless check=False) on
        the nodes `node_filter` accepts (or on the patterns `pattern_filter` accepts: "global" or an
        operator). A None config does nothing, or claims the patterns unquantized if none_claims."""
        if config is None:
            if none_claims:
                _cq.annotate(self.g, annotators, {}, self._allowed(node_filter), pattern_filter, True)
            return
        if not check:
            roles = {"input_activation": self.ref(config.input_activation),
                     "output_activation": self.ref(config.output_activation), "weight": self.ref(config.weight),
                     "bias": self.ref(config.bias), "transposed_weight": self.ref(config.weight)}
            _cq.annotate(self.g, annotators, roles, self._allowed(node_filter), pattern_filter)
            return
        weight = get_weight_qspec(config)
        transposed = weight
        if weight is not None and weight.qscheme == torch.per_channel_symmetric and weight.ch_axis == 0:
            transposed = dataclasses.replace(weight, ch_axis=1)
        roles = {"input_activation": self.ref(get_input_act_qspec(config)),
                 "output_activation": self.ref(get_output_act_qspec(config)),
                 "weight": self.ref(weight), "bias": self.ref(get_bias_qspec(config)),
                 "transposed_weight": self.ref(transposed)}
        _cq.annotate(self.g, annotators, roles, self._allowed(node_filter), pattern_filter)

    def _allowed(self, node_filter):
        return None if node_filter is None else {n.name for n in self.gm.graph.nodes if node_filter(n)}

    def propagate(self) -> None:
        _cq.propagate(self.g)

    def x86_int8_outputs(self) -> None:
        _cq.x86_int8_outputs(self.g)

    def _spec(self, ref, nodes):
        if ref is None:
            return None
        if ref[0] == "spec":
            return self.table.specs[ref[1]]
        target = nodes[ref[1]] if ref[2] is None else (nodes[ref[1]], nodes[ref[2]])
        return SharedQuantizationSpec(target)

    def write_back(self) -> None:
        """Sets node.meta["quantization_annotation"] for every node whose annotation changed."""
        nodes = {n.name: n for n in self.gm.graph.nodes}
        for name, n in nodes.items():
            text = self.ir[name].annotation if name in self.ir else ""
            if text == self.before.get(name, ""):
                continue
            inputs, output, implicit, annotated, quantized_output = _cq.parse_annotation(text, name)
            a = self.annotation_class(
                input_qspec_map={nodes[a]: self._spec(r, nodes) for a, r in inputs},
                output_qspec=self._spec(output, nodes), allow_implicit_sharing=implicit, _annotated=annotated)
            if quantized_output:
                a._is_output_of_quantized_pattern = True
            n.meta[_ann.Q_ANNOTATION_KEY] = a


def module_name_filter(module_name: str):
    from pt2q.quantizer.utils import get_module_name_filter

    return get_module_name_filter(module_name)


def module_type_filter(tp) -> Callable[[fx.Node], bool]:
    """Accepts the nodes that come from a module of type `tp` (or inside one)."""
    tp_str = tp.__module__ + "." + tp.__qualname__

    def f(n: fx.Node) -> bool:
        types = []
        for _, t in n.meta.get("nn_module_stack", {}).values():
            types.append(t.__module__ + "." + t.__qualname__ if isinstance(t, type) else t)
        return tp_str in types

    return f


def not_in(filters: list) -> Callable[[fx.Node], bool]:
    return lambda n: not any(f(n) for f in filters)
