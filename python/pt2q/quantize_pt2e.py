"""prepare_pt2e and convert_pt2e: torchao.quantization.pt2e's entry points over pt2q's C++ passes.

The model is never changed in place: each entry point works on the pt2q IR of the model
(pt2q.graph.from_fx) and returns a new GraphModule, so an error leaves the caller's model as it was.
"""

from __future__ import annotations

import operator
import warnings

import torch
from torch import fx

from pt2q import _annotations as _ann
from pt2q import graph as _graph
from pt2q import observer as _obs
from pt2q._C import prepare as _cprep
from pt2q.export_utils import disallow_eval_train

__all__ = ["prepare_pt2e", "prepare_qat_pt2e", "convert_pt2e"]


def _check_exported(model, who: str) -> None:
    if isinstance(model, torch.export.ExportedProgram):
        raise TypeError(f"{who} takes the GraphModule of an exported program: pass `exported_program.module()`, "
                        "not the ExportedProgram itself")
    if not isinstance(model, fx.GraphModule):
        raise TypeError(f"{who} takes the GraphModule of `torch.export.export(model, args).module()`, "
                        f"got {type(model).__qualname__}")
    for n in model.graph.nodes:
        if n.op == "call_module" and not n.target.startswith(("activation_post_process_", "_guards_fn")):
            raise TypeError(f"{who}: node %{n.name} calls the module `{n.target}`; an exported graph calls "
                            "operators only (symbolically traced or FX-prepared models are not exported "
                            "programs: use `torch.export.export(model, args).module()`)")


def _copy_through_ir(model: fx.GraphModule, passes: list[str]) -> fx.GraphModule:
    """A copy of `model` with `passes` run on it, for the quantizer to transform and annotate.
    Lazy: its Python code is generated only if the quantizer calls it or reads it, since the
    prepared model is built afresh from its graph."""
    g = _graph.from_fx(model)
    if passes:
        g.run_passes(passes)
    return _graph.to_fx(g, lazy=True)


def _key(gm_nodes: dict, key):
    node, user = key
    return gm_nodes[node] if user is None else (gm_nodes[node], gm_nodes[user])


def _create_observers(gm: fx.GraphModule, keys, group, group_spec, table: _ann.SpecTable) -> dict:
    """EdgeOrNode (FX objects) -> observer, one instance per group, in torchao's creation order
    (derived specs last, so that what they derive from exists)."""
    nodes = {n.name: n for n in gm.graph.nodes}
    fx_keys = [_key(nodes, k) for k in keys]
    by_group: dict[int, object] = {}
    made: dict = {}

    for derived_pass in (False, True):
        for k, gid in zip(fx_keys, group):
            spec = None if group_spec[gid] is None else table.specs[group_spec[gid]]
            if (_ann._kind(spec) == "derived") != derived_pass:
                continue
            if gid not in by_group:
                try:
                    by_group[gid] = _ann.make_observer(spec, made)
                except KeyError as e:
                    raise _ann.AnnotationError(f"a DerivedQuantizationSpec derives from {e.args[0]}, which no "
                                               "annotation quantizes") from None
            made[k] = by_group[gid]
    return {k: made[k] for k in fx_keys}


# Higher-order loops whose body torchao quantizes as a model of its own: (op name, argument index
# of the body's get_attr). cond's branches are not quantized, as in torchao.
_LOOP_BODIES = (("scan", 0), ("while_loop", 1))


def _loop_bodies(gm: fx.GraphModule) -> dict[str, fx.Node]:
    """The get_attr paths of the scan combine_fn and while_loop body_fn subgraphs of `gm`, scans
    first (torchao's order), each with the loop node that runs it."""
    paths: dict[str, fx.Node] = {}
    for name, index in _LOOP_BODIES:
        hop = getattr(torch.ops.higher_order, name, None)
        for n in gm.graph.nodes:
            if hop is not None and n.op == "call_function" and n.target is hop:
                body = n.args[index]
                if isinstance(body, fx.Node) and body.op == "get_attr" and body.target not in paths:
                    paths[body.target] = n
    return paths


def _replace_submodule(gm: fx.GraphModule, path: str, module: torch.nn.Module) -> None:
    *parents, leaf = path.split(".")
    owner = gm.get_submodule(".".join(parents)) if parents else gm
    setattr(owner, leaf, module)


def prepare_pt2e(model: fx.GraphModule, quantizer) -> fx.GraphModule:
    """Annotates `model` (from ``torch.export.export(m, args).module()``) with `quantizer` and
    inserts observers (``activation_post_process_N`` submodules), ready for calibration.

    Same steps and results as torchao's: eval BatchNorms folded into the conv/linear before them,
    then ``quantizer.transform_for_annotation``, ``annotate``, ``validate``, observer sharing
    and insertion, ``prepare_obs_or_fq_callback``; then the bodies of ``scan`` and
    ``while_loop`` are prepared the same way, each as a model of its own. Works with pt2q's
    quantizers and with torchao ``Quantizer`` objects (their torchao/torch.ao observers become
    pt2q's C++ ones)."""
    _check_exported(model, "prepare_pt2e")
    prepared = _prepare_graph(model, quantizer)
    for path in _loop_bodies(prepared):
        _replace_submodule(prepared, path, prepare_pt2e(model.get_submodule(path), quantizer))
    return prepared


def _prepare_graph(model: fx.GraphModule, quantizer) -> fx.GraphModule:
    _obs.register_with_foreign_bases()
    original_meta = dict(model.meta)
    gm = _copy_through_ir(model, ["fold-batch-norm"])
    gm = quantizer.transform_for_annotation(gm)
    quantizer.annotate(gm)
    quantizer.validate(gm)
    try:
        g, table = _ann.annotated_ir(gm)
        keys, group, group_spec = _cprep.compute_sharing(g)
    except RuntimeError as e:
        raise _ann.AnnotationError(str(e).split("\n")[0]) from None
    obs_map = _create_observers(gm, keys, group, group_spec, table)
    callback = getattr(quantizer, "prepare_obs_or_fq_callback", None)
    if callback is not None:
        callback(gm, obs_map)
    instances: list = []
    index: dict[int, int] = {}
    instance_of = []
    for k, obs in obs_map.items():
        if obs is None:
            continue
        if id(obs) not in index:
            index[id(obs)] = len(instances)
            instances.append(obs)
        node, user = (k[0].name, k[1].name) if isinstance(k, tuple) else (k.name, None)
        instance_of.append((node, user, index[id(obs)]))
    taken = {a for a in dir(gm) if a.startswith("activation_post_process_")}
    buffers = {name for name, _ in gm.named_buffers(remove_duplicate=False)}
    inserted = _cprep.insert_observers(g, instance_of, taken, buffers)
    observed = {n.name: n.args[0].name for n in g.nodes() if n.kind == "call_module"}
    for node, attr, inst in inserted:
        obs = instances[inst]
        setattr(gm, attr, obs)
        if isinstance(obs, torch.nn.Module):
            seen = obs.__dict__.setdefault("_pt2q_observing", [])
            if observed.get(node) not in seen:
                seen.append(observed.get(node))
    prepared = _graph.to_fx(g)
    _fake_values_for_new_constants(prepared)
    _remap_annotations(prepared)
    prepared.meta.update(original_meta)
    return disallow_eval_train(prepared)


def _fake_values_for_new_constants(gm: fx.GraphModule) -> None:
    """A constant prepare added (the conv bias a folded BatchNorm creates where the conv had
    none) gets the meta["val"] torchao gives it, a fake tensor of the graph's fake mode, so that
    every node of the prepared graph has its value's metadata, as torchao's do."""
    fake_mode = next((v.fake_mode for n in gm.graph.nodes
                      if isinstance(v := n.meta.get("val"), torch._subclasses.FakeTensor)), None)
    if fake_mode is None:
        return
    for n in gm.graph.nodes:
        if n.op == "get_attr" and "val" not in n.meta:
            value = operator.attrgetter(n.target)(gm)
            if isinstance(value, torch.Tensor):
                n.meta["val"] = fake_mode.from_tensor(value, static_shapes=True)


def _remap_annotations(gm: fx.GraphModule) -> None:
    """The annotations copied into the prepared graph still name the nodes of the graph they were
    made on; point them (input_qspec_map keys, SharedQuantizationSpec edges and nodes) at the
    prepared graph's nodes of the same names, as torchao's in-place prepare leaves them."""
    nodes = {n.name: n for n in gm.graph.nodes}
    same = lambda x: nodes.get(x.name, x) if isinstance(x, fx.Node) else x  # noqa: E731
    specs: dict = {}

    def spec(s):
        if s is None or not hasattr(s, "edge_or_node"):
            return s
        if id(s) not in specs:
            target = s.edge_or_node
            target = tuple(same(t) for t in target) if isinstance(target, tuple) else same(target)
            specs[id(s)] = type(s)(edge_or_node=target)
        return specs[id(s)]

    done = set()
    for n in gm.graph.nodes:
        qa = n.meta.get(_ann.Q_ANNOTATION_KEY)
        if qa is None or id(qa) in done:
            continue
        done.add(id(qa))
        qmap = getattr(qa, "input_qspec_map", None)
        if qmap:
            qa.input_qspec_map = {same(k): spec(v) for k, v in qmap.items()}
        if getattr(qa, "output_qspec", None) is not None:
            qa.output_qspec = spec(qa.output_qspec)


def prepare_qat_pt2e(model: fx.GraphModule, quantizer) -> fx.GraphModule:
    """Quantization-aware training is not in pt2q yet."""
    raise NotImplementedError("prepare_qat_pt2e: quantization-aware training is not supported by pt2q yet; use "
                              "prepare_pt2e (post-training quantization), or torchao's prepare_qat_pt2e and "
                              "torchao's convert_pt2e")


_BATCH_NORMS = ("aten.batch_norm.default", "aten._native_batch_norm_legit.default",
                "aten._native_batch_norm_legit_no_training.default", "aten.cudnn_batch_norm.default")
_CONVS = ("aten.conv1d.default", "aten.conv2d.default", "aten.conv3d.default", "aten.convolution.default")


def _fake_quantize_class(module) -> bool:
    return any(c.__name__ == "FakeQuantizeBase" for c in type(module).__mro__)


def _conv_above(node: fx.Node, hops: int = 4):
    """The conv that feeds `node` through its first inputs within a few hops (QAT's conv-BN
    pattern puts a division by the BN scale and the bias add in between), or None."""
    for _ in range(hops):
        if not node.args or not isinstance(node.args[0], fx.Node):
            return None
        node = node.args[0]
        if node.op == "call_function" and str(node.target) in _CONVS:
            return node
    return None


def _check_not_qat_conv_bn(model: fx.GraphModule) -> None:
    """torchao's prepare_qat_pt2e leaves each conv + BatchNorm as a conv on a scaled weight, a
    division back and a BatchNorm, and its convert_pt2e folds that BatchNorm into the conv
    (_fold_conv_bn_qat), in training or eval mode. pt2q's convert does not: in training mode the
    result would normalize with batch statistics, in eval mode it keeps float ops between the
    quantized conv and its output that torchao's graph does not have. Refuse instead."""
    if not any(_fake_quantize_class(m) for m in model.modules()):
        return
    for node in model.graph.nodes:
        if node.op != "call_function" or str(node.target) not in _BATCH_NORMS:
            continue
        conv = _conv_above(node)
        if conv is not None:
            raise NotImplementedError(
                f"convert_pt2e: BatchNorm %{node.name} after conv %{conv.name} in a model with fake-quantize "
                "modules is how torchao's prepare_qat_pt2e leaves a conv + BatchNorm; pt2q's convert does not fold "
                "it into the conv (torchao's _fold_conv_bn_qat) yet, so its graph would not be torchao's (and in "
                "training mode would normalize with batch statistics). Convert this model with torchao's "
                "convert_pt2e. The model is unchanged.")


def convert_pt2e(model: fx.GraphModule, use_reference_representation: bool = False,
                 fold_quantize: bool = True, *, lower_to_native: bool = False) -> fx.GraphModule:
    """torchao's convert_pt2e. pt2q's own keyword `lower_to_native=True` also rewrites linears
    with dequantized constant int8/int4 weights into pt2q's native ops (``pt2q.linear_w8a16`` /
    ``linear_w4a16``, or ``linear_w8a8`` / ``linear_w4a8`` behind a per-token dynamic input; the
    weight packed now); chains it does not match stay quantize/dequantize (docs/pt2e.md)."""
    from pt2q._convert import ConvertError, convert

    if not isinstance(use_reference_representation, bool):
        raise ValueError("Unexpected argument type for `use_reference_representation`, please make sure you're "
                         f"using keyword args, got {type(use_reference_representation).__name__}")
    if not isinstance(fold_quantize, bool):
        raise ValueError(f"fold_quantize must be a bool, got {type(fold_quantize).__name__}")
    if lower_to_native and (use_reference_representation or not fold_quantize):
        raise ValueError("lower_to_native=True needs fold_quantize=True (the weights are packed from their "
                         "folded int8 codes) and use_reference_representation=False")
    _check_exported(model, "convert_pt2e")
    _check_not_qat_conv_bn(model)
    with warnings.catch_warnings():
        converted = convert(model, use_reference_representation, fold_quantize, lower_to_native)
    for path, loop in _loop_bodies(converted).items():  # each prepared body is converted as a model of its own
        try:
            body = convert_pt2e(model.get_submodule(path), use_reference_representation, fold_quantize,
                                lower_to_native=lower_to_native)
        except ConvertError as e:
            if loop.target is torch.ops.higher_order.scan and "saw no data" in str(e):
                raise ConvertError(f"in the combine_fn of %{loop.name} ({path}): {e}. torch runs a scan's body "
                                   "as a graph traced from it, without its observer modules, so observers inside "
                                   "a scan record nothing during calibration (torchao's prepare_pt2e fails on "
                                   "such models); quantize the loop body outside scan, or keep it float") from None
            raise
        _replace_submodule(converted, path, body)
    return converted
