"""Runs a pt2q quantizer under torchao's prepare_pt2e: torchao type-checks its spec classes, so
the annotations are rewritten with torchao's spec classes and observer constructors (same
fields, same observer class names and bound arguments), keeping which specs are the same object."""

import dataclasses
import warnings

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import torchao.quantization.pt2e.observer as ao_obs
    from torchao.quantization.pt2e import quantizer as ao_q

from pt2q import _annotations as _ann


def _ao_ctor(ctr):
    f, kw, _ = _ann._unwrap(ctr)
    name = getattr(f, "__name__", "")
    if isinstance(f, type) and f.__module__ == "pt2q.observer" and hasattr(ao_obs, name):
        return getattr(ao_obs, name).with_args(**kw)
    return ctr


class AoAdapter(ao_q.Quantizer):
    def __init__(self, inner):
        self.inner = inner
        self.memo = {}

    def _spec(self, s):
        if s is None:
            return None
        if id(s) in self.memo:
            return self.memo[id(s)]
        kind = _ann._kind(s)
        fields = {f.name: getattr(s, f.name) for f in dataclasses.fields(s)}
        if kind == "shared":
            out = ao_q.SharedQuantizationSpec(**fields)
        elif kind == "derived":
            out = ao_q.DerivedQuantizationSpec(**fields)
        elif kind == "fixed":
            out = ao_q.FixedQParamsQuantizationSpec(**fields)
        else:
            fields["observer_or_fake_quant_ctr"] = _ao_ctor(fields["observer_or_fake_quant_ctr"])
            out = ao_q.QuantizationSpec(**fields)
        self.memo[id(s)] = out
        return out

    def transform_for_annotation(self, model):
        return self.inner.transform_for_annotation(model)

    def annotate(self, model):
        self.inner.annotate(model)
        converted = {}
        for n in model.graph.nodes:
            qa = n.meta.get("quantization_annotation")
            if qa is None:
                continue
            if id(qa) not in converted:
                converted[id(qa)] = ao_q.QuantizationAnnotation(
                    input_qspec_map={k: self._spec(v) for k, v in qa.input_qspec_map.items()},
                    output_qspec=self._spec(qa.output_qspec), allow_implicit_sharing=qa.allow_implicit_sharing,
                    _annotated=qa._annotated)
            n.meta["quantization_annotation"] = converted[id(qa)]
        return model

    def validate(self, model):
        self.inner.validate(model)

    def prepare_obs_or_fq_callback(self, model, edge_or_node_to_obs_or_fq):
        cb = getattr(self.inner, "prepare_obs_or_fq_callback", None)
        if cb is None:
            return
        before = dict(edge_or_node_to_obs_or_fq)
        cb(model, edge_or_node_to_obs_or_fq)
        for k, v in edge_or_node_to_obs_or_fq.items():
            if before.get(k) is not v and type(v).__module__ == "pt2q.observer" and hasattr(ao_obs, type(v).__name__):
                if type(v).__name__ == "FixedQParamsObserver":
                    edge_or_node_to_obs_or_fq[k] = ao_obs.FixedQParamsObserver(
                        scale=float(v.scale), zero_point=int(v.zero_point), dtype=v.dtype, qscheme=v.qscheme,
                        quant_min=v.quant_min, quant_max=v.quant_max)
