"""FX annotations (QuantizationAnnotation objects, pt2q's or torchao's) <-> the printed form the
IR carries (quantizers/annotation.h), and observer construction from specs (contract §2.4)."""

from __future__ import annotations

import copy
import dataclasses
import functools

import torch
from torch import fx

from pt2q import observer as _obs

Q_ANNOTATION_KEY = "quantization_annotation"
_SHARING_ATTRS = ("dtype", "is_dynamic", "quant_min", "quant_max", "qscheme", "ch_axis", "scale", "zero_point",
                  # MXQuantizationSpec's parameters (affine specs have none of them)
                  "elem_format", "block_size", "axis", "rounding", "scale_mode", "flush_fp32_subnorms", "seed")


class AnnotationError(ValueError, AssertionError):
    """An annotation that prepare_pt2e cannot use; the message names the node. Also an
    AssertionError, which is what torchao raises for these (a tensor keyword argument, a node of
    another graph, unresolvable sharing), so code that catches torchao's error catches pt2q's."""


def _kind(spec) -> str:
    if spec is None:
        return "none"
    if hasattr(spec, "edge_or_node"):
        return "shared"
    if hasattr(spec, "derived_from"):
        return "derived"
    if hasattr(spec, "observer_or_fake_quant_ctr"):
        return "spec"
    if hasattr(spec, "scale") and hasattr(spec, "zero_point"):
        return "fixed"
    raise AnnotationError(f"{spec!r} is not a quantization spec (QuantizationSpec, SharedQuantizationSpec, "
                          "DerivedQuantizationSpec, FixedQParamsQuantizationSpec or None)")


class SpecTable:
    """Spec objects by id (identity), so that the IR can refer to them."""

    def __init__(self):
        self.specs: list = []
        self._ids: dict[int, int] = {}

    def id_of(self, spec) -> int:
        key = id(spec)
        if key not in self._ids:
            self._ids[key] = len(self.specs)
            self.specs.append(spec)
        return self._ids[key]


def _value(v) -> str:
    return str(v) if isinstance(v, (torch.dtype, torch.qscheme)) else repr(v)


def _check_node(n, gm: fx.GraphModule, where: str, copied: dict | None = None) -> fx.Node:
    """`n` itself, or with `copied` (gm's nodes by name, for a graph copied with its annotations)
    gm's node of n's name."""
    if not isinstance(n, fx.Node):
        raise AnnotationError(f"{where}: {n!r} is not a node (only nodes of the graph can be annotated)")
    if n.graph is not gm.graph:
        if copied is not None and n.name in copied:
            return copied[n.name]
        raise AnnotationError(f"{where}: %{n.name} is a node of another graph")
    return n


def _ref(spec, table: SpecTable, gm: fx.GraphModule, where: str, copied: dict | None = None) -> str:
    kind = _kind(spec)
    if kind == "none":
        return "none"
    if kind == "shared":
        target = spec.edge_or_node
        if isinstance(target, tuple):
            if len(target) != 2:
                raise AnnotationError(f"{where}: SharedQuantizationSpec needs a node or a (producer, consumer) edge")
            a, b = (_check_node(t, gm, where, copied) for t in target)
            return f"shared(%{a.name}, %{b.name})"
        return f"shared(%{_check_node(target, gm, where, copied).name})"
    attrs = ", ".join(f"{a}={_value(getattr(spec, a))}" for a in _SHARING_ATTRS if hasattr(spec, a))
    return f"spec#{table.id_of(spec)}{{{attrs}}}"


def annotation_text(node: fx.Node, gm: fx.GraphModule, table: SpecTable, copied: dict | None = None) -> str:
    """The printed form of node.meta["quantization_annotation"] ("" when there is none). `copied`:
    see _check_node."""
    qa = node.meta.get(Q_ANNOTATION_KEY)
    if qa is None:
        return ""
    where = f"annotation of node %{node.name}"
    parts = []
    qmap = getattr(qa, "input_qspec_map", None) or {}
    for arg, spec in qmap.items():
        arg = _check_node(arg, gm, where, copied)
        parts.append(f"in %{arg.name} = {_ref(spec, table, gm, where, copied)}")
    out = getattr(qa, "output_qspec", None)
    if out is not None:
        parts.append(f"out = {_ref(out, table, gm, where, copied)}")
    if not getattr(qa, "allow_implicit_sharing", True):
        parts.append("implicit_sharing = false")
    if getattr(qa, "_annotated", False):
        parts.append("annotated")
    if getattr(qa, "_is_output_of_quantized_pattern", False):
        parts.append("quantized_output")
    return "; ".join(parts)


def annotated_ir(gm: fx.GraphModule, annotations_from: fx.GraphModule | None = None):
    """(the pt2q IR of `gm` with each node's annotation in printed form, the spec table). The
    annotations are read from `annotations_from` when given (a model `gm` was copied from: a
    copied graph's meta still points at the original's nodes), matched to `gm`'s nodes by name.
    There, an annotation's nodes may also belong to a graph `annotations_from` itself was copied
    from (``copy.deepcopy`` of a prepared model shares its annotations with the original): they
    stand for its nodes of the same names, as torchao's convert, which never reads them, allows."""
    from pt2q import graph as _graph

    source = gm if annotations_from is None else annotations_from
    copied = None if annotations_from is None else {n.name: n for n in source.graph.nodes}
    g = _graph.from_fx(gm)
    table = SpecTable()
    by_name = {n.name: n for n in g.nodes()}
    for n in source.graph.nodes:
        text = annotation_text(n, source, table, copied)
        if text and n.name in by_name:
            by_name[n.name].annotation = text
    return g, table


def is_valid_annotation(qa) -> bool:
    return qa is not None and (len(getattr(qa, "input_qspec_map", None) or {}) > 0 or
                               getattr(qa, "output_qspec", None) is not None)


# --- observer constructors -------------------------------------------------------------------

_FOREIGN_MODULES = ("torchao.quantization.pt2e.observer", "torch.ao.quantization.observer")
_NATIVE = {c: getattr(_obs, c) for c in ("MinMaxObserver", "MovingAverageMinMaxObserver", "PerChannelMinMaxObserver",
                                         "MovingAveragePerChannelMinMaxObserver", "HistogramObserver",
                                         "PlaceholderObserver", "FixedQParamsObserver")}


def _unwrap(ctr):
    """(class or callable, bound keywords innermost first merged, callable args) of a ctor."""
    keywords: list[dict] = []
    callable_args: dict = {}
    f = ctr
    while True:
        p = getattr(f, "p", None)
        if isinstance(p, functools.partial):
            keywords.append(dict(p.keywords))
            callable_args = {**getattr(f, "callable_args", {}), **callable_args}
            f = p.func
        elif isinstance(f, functools.partial):
            keywords.append(dict(f.keywords))
            f = f.func
        else:
            break
    merged: dict = {}
    for kw in reversed(keywords):
        merged.update(kw)
    return f, merged, callable_args


def ctor_class_name(ctr) -> str:
    f, _, _ = _unwrap(ctr)
    return getattr(f, "__name__", type(f).__name__)


def native_ctor(ctr):
    """torchao's or torch.ao's observer constructor mapped onto pt2q's C++-backed class of the same
    name (bound arguments kept); anything else is returned as it is."""
    f, kw, callable_args = _unwrap(ctr)
    name = getattr(f, "__name__", "")
    if isinstance(f, type) and f.__module__ in _FOREIGN_MODULES and name in _NATIVE:
        w = _NATIVE[name].with_args(**kw)
        return w.with_callable_args(**callable_args) if callable_args else w
    return ctr


def make_observer(spec, made: dict):
    """The observer for a group whose spec is `spec` (torchao's _create_obs_or_fq_from_qspec).
    `made` maps the EdgeOrNode keys created so far to their observers."""
    kind = _kind(spec)
    if kind == "none":
        return None
    if kind == "derived":
        return _obs.DerivedObserverOrFakeQuantize(
            dtype=spec.dtype, obs_or_fqs=[made[k] for k in spec.derived_from],
            derive_qparams_fn=spec.derive_qparams_fn, quant_min=spec.quant_min, quant_max=spec.quant_max,
            qscheme=spec.qscheme, ch_axis=spec.ch_axis)
    kwargs = copy.deepcopy(_fields(spec))
    if kind == "fixed":
        return _obs.FixedQParamsObserver(**kwargs)
    kwargs.pop("observer_or_fake_quant_ctr")
    ctr = spec.observer_or_fake_quant_ctr
    if "PerChannel" not in ctor_class_name(ctr):
        kwargs.pop("ch_axis", None)
    ctr = native_ctor(ctr)
    if hasattr(ctr, "with_args"):
        return ctr.with_args(**kwargs)()
    return functools.partial(ctr, **kwargs)()  # a plain class or function: called with the spec's arguments


def _fields(spec) -> dict:
    if dataclasses.is_dataclass(spec):
        return {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)}
    return dict(vars(spec))
