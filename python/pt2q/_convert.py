"""convert_pt2e's steps: observers -> quantize/dequantize (C++), DuplicateDQ, weight folding."""

from __future__ import annotations

import copy

import torch
from torch import fx

from pt2q import _annotations as _ann
from pt2q import graph as _graph
from pt2q._C import convert as _cconv
from pt2q.observer_mx import MXFakeQuantize
from pt2q.export_utils import disallow_eval_train

_SUPPORTED_QDTYPES = (torch.quint8, torch.qint8, torch.qint32, torch.uint8, torch.int8, torch.uint16, torch.int16,
                      torch.int32, torch.float8_e5m2, torch.float8_e4m3fn)
_UNDERLYING = {torch.quint8: torch.uint8, torch.qint8: torch.int8, torch.qint32: torch.int32}
_PER_CHANNEL = (torch.per_channel_affine, torch.per_channel_symmetric, torch.per_channel_affine_float_qparams)


class ConvertError(ValueError):
    """convert_pt2e cannot convert the model; the message names the observer and node."""


def _is_observer(m) -> bool:
    return isinstance(m, torch.nn.Module) and hasattr(m, "calculate_qparams") and hasattr(m, "dtype")


def _unobserved(obs) -> bool:
    check = getattr(obs, "_unobserved", None)
    if callable(check):
        return check()
    mn = getattr(obs, "min_val", None)
    if isinstance(mn, torch.Tensor):
        return mn.numel() == 0 or (mn.dim() == 0 and bool(mn == float("inf")))
    return False


def _dtype_name(d: torch.dtype) -> str:
    return str(_UNDERLYING.get(d, d)).replace("torch.", "")


def _converts_itself(m) -> bool:
    """torchao's affine observers rewrite the graph themselves (`convert(model, node)`)."""
    return isinstance(m, torch.nn.Module) and callable(getattr(m, "convert", None)) and \
        hasattr(m, "calculate_qparams")


def _self_convert(model: fx.GraphModule) -> fx.GraphModule:
    """A copy of `model` in which every self-converting observer has converted itself, in graph
    order as torchao does; the caller's model is left as it was."""
    modules = dict(model.named_modules(remove_duplicate=False))
    if not any(n.op == "call_module" and _converts_itself(modules.get(n.target)) for n in model.graph.nodes):
        return model
    model = copy.deepcopy(model)
    modules = dict(model.named_modules(remove_duplicate=False))
    for n in list(model.graph.nodes):
        if n.op == "call_module" and _converts_itself(modules.get(n.target)):
            obs = modules[n.target]
            if getattr(obs, "block_size", "unset") is None:
                raise ConvertError(f"{n.target} (observing %{n.args[0].name}): the observer saw no data; run "
                                   "calibration data through the prepared model before convert_pt2e")
            obs.convert(model, n)
    model.recompile()
    return model


def _record(obs, where: str) -> dict:
    dtype = obs.dtype
    is_dynamic = bool(getattr(obs, "is_dynamic", False))
    if dtype in _SUPPORTED_QDTYPES and not is_dynamic:
        if _unobserved(obs):
            raise ConvertError(f"{where}: the observer saw no data; run calibration data through the prepared "
                               "model before convert_pt2e")
        scale, zp = obs.calculate_qparams()
        rec = {"dtype": _dtype_name(dtype), "quant_min": int(obs.quant_min), "quant_max": int(obs.quant_max)}
        if getattr(obs, "qscheme", None) in _PER_CHANNEL and getattr(obs, "group_size", None):
            rec.update(kind="per_group", scale=scale, zero_point=zp, group_size=int(obs.group_size))
        elif getattr(obs, "qscheme", None) in _PER_CHANNEL:
            rec.update(kind="per_channel", scale=scale, zero_point=zp, axis=int(obs.ch_axis))
        else:
            rec.update(kind="per_tensor", scale=float(scale), zero_point=int(zp))
        return rec
    if is_dynamic and getattr(obs, "per_token", False):
        return {"kind": "dynamic_per_token", "dtype": _dtype_name(dtype), "quant_min": int(obs.quant_min),
                "quant_max": int(obs.quant_max)}
    if is_dynamic:
        qscheme = getattr(obs, "qscheme", torch.per_tensor_affine)
        if qscheme not in (torch.per_tensor_affine, torch.per_tensor_symmetric):
            raise ConvertError(f"{where}: dynamic quantization needs a per-tensor qscheme, got {qscheme}")
        if _UNDERLYING.get(dtype, dtype) not in (torch.int8, torch.uint8):
            raise ConvertError(f"{where}: dynamic quantization supports int8 and uint8 only, got {dtype}")
        if obs.quant_min is None or obs.quant_max is None:
            raise ConvertError(f"{where}: a dynamic observer needs quant_min and quant_max")
        eps = getattr(obs, "eps", torch.finfo(torch.float32).eps)
        return {"kind": "dynamic", "dtype": _dtype_name(dtype), "quant_min": int(obs.quant_min),
                "quant_max": int(obs.quant_max), "eps": float(eps), "symmetric": qscheme == torch.per_tensor_symmetric}
    if dtype == torch.float16:
        return {"kind": "float16"}
    return {"kind": "remove"}


def _attr(model: fx.GraphModule, path: str):
    """What a get_attr node's dotted path names on `model` (None when it names nothing)."""
    value = model
    for part in path.split("."):
        value = getattr(value, part, None)
    return value


def _observe_constant_weights(model: fx.GraphModule, modules: dict) -> None:
    """Observers that calibration never reached but that observe a constant (a weight, as in
    weight-only and dynamic schemes) see it now, on a copy: such schemes need no calibration."""
    for n in model.graph.nodes:
        obs = modules.get(n.target) if n.op == "call_module" else None
        src = n.args[0] if n.args else None
        if not _is_observer(obs) or not _unobserved(obs) or not isinstance(src, fx.Node) or src.op != "get_attr":
            continue
        value = _attr(model, src.target)
        if isinstance(value, torch.Tensor):
            modules[n.target] = copy.deepcopy(obs)
            modules[n.target](value)


def convert(model: fx.GraphModule, use_reference_representation: bool, fold_quantize: bool,
            lower_to_native: bool = False) -> fx.GraphModule:
    import torch.ao.quantization.fx._decomposed  # noqa: F401  (registers torch.ops.quantized_decomposed)

    if use_reference_representation:
        import torch._higher_order_ops.out_dtype  # noqa: F401  (registers torch.ops.higher_order.out_dtype)
    original, model = model, _self_convert(model)
    modules = dict(model.named_modules(remove_duplicate=False))
    _observe_constant_weights(model, modules)
    # The device of the model's own constants (observers keep their statistics on the CPU).
    devices = set()
    for n in model.graph.nodes:
        if n.op == "get_attr" and isinstance(t := _attr(model, n.target), torch.Tensor):
            devices.add(t.device)
    device = devices.pop() if len(devices) == 1 else torch.device("cpu")
    records: dict[str, dict] = {}
    for n in model.graph.nodes:
        if n.op == "call_module" and n.target not in records and isinstance(modules.get(n.target), MXFakeQuantize):
            records[n.target] = modules[n.target].conversion_record()
        elif n.op == "call_module" and n.target not in records and _is_observer(modules.get(n.target)):
            where = f"{n.target} (observing %{n.args[0].name})"
            records[n.target] = _record(modules[n.target], where)
            rec, src = records[n.target], n.args[0]
            if rec["kind"] == "per_group" and rec["scale"].dim() == 1 and src.op == "get_attr":
                # Statistics loaded from a calibration file leave the observer without the weight's
                # row count: the observed constant has it.
                rows = _attr(model, src.target).shape[0]
                rec["scale"], rec["zero_point"] = rec["scale"].reshape(rows, -1), rec["zero_point"].reshape(rows, -1)
            for key in ("scale", "zero_point"):  # per-channel buffers live where the model does
                if isinstance(records[n.target].get(key), torch.Tensor):
                    records[n.target][key] = records[n.target][key].to(device)
    g, _ = _ann.annotated_ir(model, annotations_from=original)
    taken = {a for a in dir(model) if a.startswith(("_scale_", "_zero_point_", "_frozen_param"))}
    taken |= set(modules)
    _cconv.observers_to_qdq(g, records, taken)
    annotated = {n.name for n in model.graph.nodes if _ann.is_valid_annotation(n.meta.get(_ann.Q_ANNOTATION_KEY))}
    _cconv.duplicate_dq(g, annotated)
    _cconv.port_metadata(g)
    if fold_quantize:
        _cconv.fold_quantize(g, taken)
    if use_reference_representation:
        _cconv.reference_representation(g)
    if lower_to_native:
        _cconv.lower_to_native(g, taken)
    converted = _graph.to_fx(g)
    converted.meta.update(model.meta)
    converted.meta.pop("_observed_graph_module_attrs", None)
    return disallow_eval_train(converted)
