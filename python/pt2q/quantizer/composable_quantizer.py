"""ComposableQuantizer: several quantizers applied in order, none allowed to undo another's work."""

from __future__ import annotations

import torch

from pt2q.quantizer.quantizer import Q_ANNOTATION_KEY, Quantizer

__all__ = ["ComposableQuantizer"]


class ComposableQuantizer(Quantizer):
    """Runs each quantizer's transform_for_annotation, then each annotate, in list order; a later
    quantizer that replaces or removes an earlier one's annotation is an error."""

    def __init__(self, quantizers: list):
        super().__init__()
        self.quantizers = quantizers
        self._graph_annotations: dict = {}

    def _record_and_validate_annotations(self, gm: torch.fx.GraphModule, quantizer) -> None:
        for n in gm.graph.nodes:
            if Q_ANNOTATION_KEY in n.meta:
                if n in self._graph_annotations and self._graph_annotations[n] is not n.meta[Q_ANNOTATION_KEY]:
                    raise RuntimeError(f"Quantizer {type(quantizer).__name__} has changed annotations on node {n}")
                self._graph_annotations[n] = n.meta[Q_ANNOTATION_KEY]
            elif n in self._graph_annotations:
                raise RuntimeError(f"Quantizer {type(quantizer).__name__} has removed annotations on node {n}")

    def annotate(self, model: torch.fx.GraphModule) -> torch.fx.GraphModule:
        for quantizer in self.quantizers:
            quantizer.annotate(model)
            self._record_and_validate_annotations(model, quantizer)
        return model

    def transform_for_annotation(self, model: torch.fx.GraphModule) -> torch.fx.GraphModule:
        for quantizer in self.quantizers:
            model = quantizer.transform_for_annotation(model)
        return model

    def validate(self, model: torch.fx.GraphModule) -> None:
        pass
