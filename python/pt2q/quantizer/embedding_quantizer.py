"""EmbeddingQuantizer: embedding tables stored as uint8 per row with float qparams."""

from __future__ import annotations

import torch
from torch import fx

from pt2q import observer as _obs
from pt2q.quantizer._annotate import AnnotationSession
from pt2q.quantizer.quantizer import QuantizationSpec, Quantizer
from pt2q.quantizer.utils import OperatorConfig, QuantizationConfig

__all__ = ["EmbeddingQuantizer", "get_embedding_operators_config"]


def get_embedding_operators_config() -> OperatorConfig:
    weight = QuantizationSpec(dtype=torch.uint8, qscheme=torch.per_channel_affine_float_qparams, ch_axis=0,
                              observer_or_fake_quant_ctr=_obs.PerChannelMinMaxObserver.with_args(eps=2 ** -12))
    return OperatorConfig(config=QuantizationConfig(None, None, weight, None),
                          operators=[[torch.nn.Embedding], [torch.nn.functional.embedding]])


class EmbeddingQuantizer(Quantizer):
    """Quantizes the weight of every aten.embedding (uint8, per row, float zero points)."""

    def annotate(self, model: fx.GraphModule) -> fx.GraphModule:
        session = AnnotationSession(model)
        session.run(["embedding"], get_embedding_operators_config().config, check=False)
        session.write_back()
        return model

    def validate(self, model: fx.GraphModule) -> None:
        pass

    @classmethod
    def get_supported_operators(cls) -> list[OperatorConfig]:
        return [get_embedding_operators_config()]
