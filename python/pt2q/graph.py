"""The pt2q IR from Python, and the bridge to and from ``torch.fx``.

    g = pt2q.graph.from_fx(gm)        # FX GraphModule -> pt2q IR (tensors shared, not copied)
    print(g)                          # the text form (docs/ir_text.md)
    gm2 = pt2q.graph.to_fx(g)         # pt2q IR -> FX GraphModule

Anything the IR does not model is carried opaquely: call_function targets that are not dispatcher
operators (``operator.getitem``, higher-order operators such as ``torch.cond``), submodules
(``call_module``), and every node's original FX meta (FakeTensor values included), so
``to_fx(from_fx(gm))`` gives back the same graph. The branches of higher-order operators (FX
GraphModules reached by ``get_attr``) become subgraphs of the IR.
"""

from __future__ import annotations

import json
import operator
from typing import Any, Callable, Dict

import torch
import torch.fx as fx
from torch.fx._lazy_graph_module import _LazyGraphModule

from pt2q._C import graph as _C

Graph = _C.Graph
Node = _C.Node
Literal = _C.Literal
parse = _C.parse

__all__ = ["Graph", "Node", "Literal", "parse", "from_fx", "to_fx", "save", "load"]


class IRConversionError(ValueError):
    """A graph holds something the pt2q IR or the FX bridge cannot represent; names the node."""


def _opaque_name(target: Callable) -> str:
    if isinstance(target, torch._ops.HigherOrderOperator):
        return f"torch.ops.higher_order.{target.name()}"
    module = getattr(target, "__module__", None) or type(target).__module__
    return f"{module}.{getattr(target, '__qualname__', getattr(target, '__name__', repr(target)))}"


def _single_overload(target) -> bool:
    return isinstance(target, torch._ops.OpOverloadPacket) and target.overloads() == ["default"]


def _operator_name(target) -> str | None:
    if isinstance(target, torch._ops.OpOverload):
        ns, rest = target.name().split("::")
        return f"{ns}.{rest}"
    return None


def _type_of(val) -> tuple | None:
    if isinstance(val, torch.Tensor):
        dims = [d if isinstance(d, int) else (int(d) if not isinstance(d, torch.SymInt) else Literal("sym", str(d)))
                for d in val.shape]
        return ("tensor", str(val.dtype).split(".")[1], dims, None)
    if isinstance(val, torch.SymInt):
        return ("sym_int", None, None, str(val))
    if isinstance(val, torch.SymFloat):
        return ("sym_float", None, None, str(val))
    if isinstance(val, torch.SymBool):
        return ("sym_bool", None, None, str(val))
    return None


def _module_type(t) -> str:
    if isinstance(t, str):
        return t
    return f"{getattr(t, '__module__', '')}.{getattr(t, '__qualname__', repr(t))}"


def _to_ir_arg(a, env: Dict[fx.Node, Any], node: fx.Node):
    if isinstance(a, fx.Node):
        return env[a]
    if isinstance(a, list):
        return [_to_ir_arg(x, env, node) for x in a]
    if isinstance(a, tuple):
        return tuple(_to_ir_arg(x, env, node) for x in a)
    if a is None or isinstance(a, (bool, int, float, str)):
        return a
    if isinstance(a, torch.dtype):
        return Literal("dtype", str(a).split(".")[1])
    if isinstance(a, torch.device):
        return Literal("device", str(a))
    if isinstance(a, torch.layout):
        return Literal("layout", str(a).split(".")[1])
    if isinstance(a, torch.memory_format):
        return Literal("memory_format", str(a).split(".")[1])
    if isinstance(a, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return Literal("sym", str(a))
    if isinstance(a, torch._ops.OpOverload):  # e.g. out_dtype's operator
        return Literal("op", _operator_name(a))
    raise IRConversionError(f"node %{node.name} ({node.op} {node.target}): the pt2q IR cannot hold an argument "
                            f"of type {type(a).__qualname__}: {a!r}")


def from_fx(gm: fx.GraphModule) -> Graph:
    """The pt2q IR of an FX ``GraphModule`` (e.g. ``torch.export.export(...).module()``).

    Constants (``get_attr`` targets that are tensors) are shared with ``gm``, not copied. The IR
    keeps placeholders first; FX also allows ``get_attr`` nodes before them (exported modules put
    their parameters there), and those are placed after the placeholders, which changes no value.
    """
    if not isinstance(gm, fx.GraphModule):
        raise IRConversionError(f"from_fx expects a torch.fx.GraphModule, got {type(gm).__qualname__}")
    g = Graph()
    g.name = type(gm).__name__
    opaque: Dict[str, Callable] = {}
    fx_meta: Dict[str, dict] = {}
    py_values: Dict[str, Any] = {}
    packets: Dict[str, Any] = {}
    env: Dict[fx.Node, Node] = {}
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            p = g.add_placeholder(n.name)
            if n.args:
                p.set_args((_to_ir_arg(n.args[0], env, n),))
            new = p
        elif n.op == "output":
            new = g.set_output(_to_ir_arg(n.args[0], env, n))
        elif n.op == "get_attr":
            new = g.create("get_attr", n.target, name=n.name)
            value = operator.attrgetter(n.target)(gm)
            if isinstance(value, torch.Tensor):
                g.set_constant(n.target, value)
            elif isinstance(value, fx.GraphModule):  # a higher-order op's branch or body
                g.set_subgraph(n.target, from_fx(value))
        elif n.op == "call_module":
            new = g.create("call_module", n.target, _to_ir_arg(tuple(n.args), env, n),
                           {k: _to_ir_arg(v, env, n) for k, v in n.kwargs.items()}, n.name)
        elif n.op == "call_function":
            name = _operator_name(n.target)
            if name is None and _single_overload(n.target):
                # e.g. torchao's affine observers insert torch.ops.torchao.quantize_affine: the IR
                # calls its one overload (passes can run it), and to_fx gives the packet back.
                name = _operator_name(n.target.default)
                packets[n.name] = n.target
            if name is None:
                name = _opaque_name(n.target)
            new = g.create("call_function", name, _to_ir_arg(tuple(n.args), env, n),
                           {k: _to_ir_arg(v, env, n) for k, v in n.kwargs.items()}, n.name)
            if new.is_opaque:
                prior = opaque.setdefault(name, n.target)
                if prior is not n.target:
                    raise IRConversionError(f"node %{n.name}: two different callables are both named {name}")
        else:
            raise IRConversionError(f"node %{n.name}: unknown FX node kind {n.op}")
        if new.name != n.name:
            raise IRConversionError(f"node %{n.name}: the name is not usable in the IR (became %{new.name})")
        env[n] = new
        _set_meta(new, n)
        _keep_quantization_tag(new, n, py_values)
        fx_meta[n.name] = n.meta
    if not any(n.op == "output" for n in gm.graph.nodes):
        # FX runs a graph without an output node (e.g. one built by Graph.graph_copy, which does
        # not copy it) as returning None; the IR says so.
        g.set_output(None)
    _keep_calling_convention(gm, g)
    g.verify()
    g._opaque = opaque
    g._root = gm
    g._fx_meta = fx_meta
    g._py_values = py_values
    g._packets = packets
    return g


_IN_SPEC, _OUT_SPEC, _ORIG_ARGS = "pytree_in_spec", "pytree_out_spec", "pytree_orig_args"


def _keep_calling_convention(gm: fx.GraphModule, g: Graph) -> None:
    # An exported module flattens its inputs and rebuilds its outputs with pytree specs; they
    # ride on the output node as JSON (treespec_dumps: data, not code) so that files keep them.
    info = getattr(gm.graph._codegen, "pytree_info", None)
    if info is None:
        return
    from torch.utils._pytree import treespec_dumps

    extra = dict(g.output.extra)
    extra[_ORIG_ARGS] = json.dumps(list(info.orig_args))
    if info.in_spec is not None:
        extra[_IN_SPEC] = treespec_dumps(info.in_spec)
    if info.out_spec is not None:
        extra[_OUT_SPEC] = treespec_dumps(info.out_spec)
    g.output.extra = list(extra.items())


def _calling_convention(g: Graph):
    extra = dict(g.output.extra) if g.output is not None else {}
    if _ORIG_ARGS not in extra:
        return None
    from torch.fx.graph import _PyTreeCodeGen, _PyTreeInfo
    from torch.utils._pytree import treespec_loads

    spec = lambda k: treespec_loads(extra[k]) if k in extra else None  # noqa: E731
    return _PyTreeCodeGen(_PyTreeInfo(json.loads(extra[_ORIG_ARGS]), spec(_IN_SPEC), spec(_OUT_SPEC)))


def _set_meta(new: Node, n: fx.Node) -> None:
    val = n.meta.get("val")
    if isinstance(val, (list, tuple)):
        types = [_type_of(v) or ("tensor", None, None, None) for v in val]
        new.types = types
        new.tuple_output = True
    else:
        t = _type_of(val)
        if t is not None:
            new.types = [t]
    stack = n.meta.get("nn_module_stack")
    if stack:
        new.nn_module_stack = [(str(k), str(v[0]), _module_type(v[1])) for k, v in stack.items()]
    trace = n.meta.get("stack_trace")
    if trace:
        new.stack_trace = trace


_QUANTIZATION_TAG = "quantization_tag"


def _keep_quantization_tag(new: Node, n: fx.Node, py_values: Dict[str, Any]) -> None:
    """convert ports node meta "quantization_tag" onto quantize/dequantize nodes (torchao's
    PortNodeMetaForQDQ). The IR carries it in `extra`: a string as itself, any other value as a
    token that to_fx maps back to the object."""
    tag = n.meta.get(_QUANTIZATION_TAG)
    if tag is None:
        return
    if not isinstance(tag, str):
        token = f"<python object {len(py_values)}>"
        py_values[token] = tag
        tag = token
    new.extra = [kv for kv in new.extra if kv[0] != _QUANTIZATION_TAG] + [(_QUANTIZATION_TAG, tag)]


def _overload(target: str) -> torch._ops.OpOverload:
    ns, name, *overload = target.split(".")
    return getattr(getattr(getattr(torch.ops, ns), name), overload[0] if overload else "default")


def _resolve(g: Graph, n: Node) -> Callable:
    if not n.is_opaque:
        return _overload(n.target)
    table = getattr(g, "_opaque", {})
    if n.target in table:
        return table[n.target]
    if n.target.startswith("torch.ops.higher_order."):  # a registry lookup, not code from a file
        return getattr(torch.ops.higher_order, n.target.rsplit(".", 1)[1])
    if n.target.startswith("_operator.") and hasattr(operator, n.target.split(".", 1)[1]):
        return getattr(operator, n.target.split(".", 1)[1])
    raise IRConversionError(f"node %{n.name}: no Python callable is known for the opaque target {n.target}")


def _to_fx_arg(a, env: Dict[str, fx.Node], n: Node):
    if isinstance(a, Node):
        return env[a.name]
    if isinstance(a, list):
        return [_to_fx_arg(x, env, n) for x in a]
    if isinstance(a, tuple):
        return tuple(_to_fx_arg(x, env, n) for x in a)
    if isinstance(a, Literal):
        if a.kind == "device":
            return torch.device(a.text)
        if a.kind in ("dtype", "layout", "memory_format"):
            return getattr(torch, a.text)
        if a.kind == "op":
            return _overload(a.text)
        raise IRConversionError(f"node %{n.name}: a symbolic size {a.text!r} as an argument has no FX value")
    return a


def _parent_of(root: torch.nn.Module, path: str):
    """(module holding `path`, last component), creating empty modules along the way."""
    *parents, leaf = path.split(".")
    m = root
    for p in parents:
        if not hasattr(m, p):
            m.add_module(p, torch.nn.Module())
        m = getattr(m, p)
    return m, leaf


def _has_attr_path(root: torch.nn.Module, path: str) -> bool:
    try:
        operator.attrgetter(path)(root)
        return True
    except AttributeError:
        return False


def _del_attr_path(root: torch.nn.Module, path: str) -> None:
    *parents, leaf = path.split(".")
    m = operator.attrgetter(".".join(parents))(root) if parents else root
    delattr(m, leaf)


def _set_attr_path(root: torch.nn.Module, path: str, value: torch.Tensor) -> None:
    m, leaf = _parent_of(root, path)
    if isinstance(value, torch.nn.Parameter):
        m.register_parameter(leaf, value)
    elif value.requires_grad:  # parameters come back from files as tensors that require grad
        m.register_parameter(leaf, torch.nn.Parameter(value))
    elif isinstance(getattr(m, leaf, None), torch.nn.Parameter):
        m.register_parameter(leaf, torch.nn.Parameter(value, requires_grad=getattr(m, leaf).requires_grad))
    else:
        m.register_buffer(leaf, value)


def _fx_order(g: Graph, fx_meta: dict) -> list:
    """The IR's nodes in the order of the FX graph they came from. The IR keeps placeholders
    first; export puts parameters before them. So the nodes ahead of the first original node that
    FX had after the placeholders are split into an early part (FX's parameters and what passes
    added among them) and a late part (the placeholders, what depends on them, and new constants
    a pass added right before that first node), each in IR order, which keeps it topological."""
    nodes = g.nodes()
    index = {name: i for i, name in enumerate(fx_meta)}
    places = [index[n.name] for n in nodes if n.kind == "placeholder" and n.name in index]
    if not places:
        return nodes
    last_place = max(places)
    cut = next((i for i, n in enumerate(nodes) if n.kind != "placeholder" and index.get(n.name, -1) > last_place),
               len(nodes))
    prefix = nodes[:cut]
    dependent: set = set()
    for n in prefix:
        if n.kind == "placeholder" or any(x.name in dependent for x in n.inputs):
            dependent.add(n.name)
    # New constants a pass put right before that first node (e.g. a folded conv's bias); a node
    # that consumes an earlier, early one (an observer after a weight) ends the run, and so does a
    # folded weight (`_frozen_param`), which stands where its weight's observer stood, as in
    # torchao's constant folding (the last weight's, e.g. a tied one's, would otherwise trail).
    trailing: set = set()
    for n in reversed(prefix):
        if n.name in index or n.name in dependent or (n.kind == "get_attr" and n.target.startswith("_frozen_param")):
            break
        trailing.add(n.name)
    for i, n in enumerate(prefix):
        if n.name in trailing and any(x.name not in trailing for x in n.inputs):
            trailing -= {m.name for m in prefix[: i + 1]}
    late_names = dependent | trailing
    early = [n for n in prefix if n.name not in late_names]
    # Each late node right after the last placeholder it depends on, as if inserted after it.
    anchor: dict = {}
    for n in prefix:
        if n.name not in late_names:
            continue
        if n.kind == "placeholder":
            anchor[n.name] = (index.get(n.name, last_place), 0)
        else:
            deps = [anchor[x.name][0] for x in n.inputs if x.name in anchor]
            anchor[n.name] = (max(deps) if deps else float("inf"), 1)
    late = sorted((n for n in prefix if n.name in late_names), key=lambda n: anchor[n.name])
    return early + late + nodes[cut:]


def to_fx(g: Graph, *, lazy: bool = False) -> fx.GraphModule:
    """An FX ``GraphModule`` running ``g``. Nodes keep their names; nodes that came from FX keep
    their original meta; constants are the graph's tensors (shared).

    ``lazy=True`` defers generating its Python code (about 11 ms on a 2000-node graph, per
    ``recompile()``) until the module is first called or its code is read: for a module that is
    only inspected and edited, as prepare's annotation copy is."""
    module_cls = _LazyGraphModule if lazy else fx.GraphModule
    fg = fx.Graph()
    env: Dict[str, fx.Node] = {}
    fx_meta = getattr(g, "_fx_meta", {})
    py_values = getattr(g, "_py_values", {})
    packets = getattr(g, "_packets", {})
    for n in _fx_order(g, fx_meta):
        args = tuple(_to_fx_arg(a, env, n) for a in n.args)
        kwargs = {k: _to_fx_arg(v, env, n) for k, v in n.kwargs.items()}
        if n.kind == "placeholder":
            new = fg.create_node("placeholder", n.name, args, name=n.name)
        elif n.kind == "output":
            new = fg.output(args[0] if args else None)
        elif n.kind == "call_function":
            target = packets.get(n.name) if n.name in packets and not n.is_opaque else None
            if target is None or _operator_name(target.default) != n.target:
                target = _resolve(g, n)
            new = fg.create_node("call_function", target, args, kwargs, name=n.name)
        else:
            new = fg.create_node(n.kind, n.target, args, kwargs, name=n.name)
        if new.name != n.name and n.kind != "output":
            raise IRConversionError(f"node %{n.name}: FX renamed it to {new.name}")
        if n.name in fx_meta:
            new.meta = dict(fx_meta[n.name])
        elif n.nn_module_stack:
            new.meta["nn_module_stack"] = {k: (p, t) for k, p, t in n.nn_module_stack}
        if (n.kind == "call_module" and n.target.startswith("activation_post_process_") and "val" not in new.meta
                and args and isinstance(args[0], fx.Node) and "val" in args[0].meta):
            new.meta["val"] = args[0].meta["val"]  # an observer returns its input (torch 2.11's loops read it)
        # what passes may have ported onto the node (port-qdq-metadata)
        if n.stack_trace:
            new.meta["stack_trace"] = n.stack_trace
        for key, value in n.extra:
            if key == _QUANTIZATION_TAG:
                new.meta[key] = py_values.get(value, value)
        env[n.name] = new
    root = getattr(g, "_root", None)
    if isinstance(root, fx.GraphModule):
        # The calling convention (an exported module flattens and rebuilds pytrees) goes with it.
        fg._codegen = root.graph._codegen
    elif (codegen := _calling_convention(g)) is not None:  # e.g. a graph loaded from a file
        fg._codegen = codegen
    if root is None:
        root = torch.nn.Module()
        for path, t in g.constants().items():
            _set_attr_path(root, path, t)
        for path, sub in g.subgraphs().items():
            m, leaf = _parent_of(root, path)
            m.add_module(leaf, to_fx(sub))
        gm = module_cls(root, fg, class_name=g.name)
    else:
        # Constants a pass added (e.g. folded weights) are not on `root`: GraphModule would fail to
        # copy them, so they are set afterwards; constants no node uses any more are left behind.
        used = {n.target for n in g.nodes() if n.kind == "get_attr"}
        fresh = {p for p in used if p in g.constants() and not _has_attr_path(root, p)}
        placeholders = {}
        for p in fresh:
            placeholders[p] = g.constants()[p]
            _set_attr_path(root, p, placeholders[p])
        try:
            gm = module_cls(root, fg, class_name=type(root).__name__)
        finally:
            for p in fresh:
                _del_attr_path(root, p)
        for path, t in g.constants().items():
            if path in used and operator.attrgetter(path)(gm) is not t:
                _set_attr_path(gm, path, t)
    if hasattr(root, "meta"):
        gm.meta.update(root.meta)
    return gm


def save(gm: fx.GraphModule | Graph, path: str) -> None:
    """Writes ``gm`` (an FX GraphModule or a pt2q Graph) and its constant tensors to a ``.pt2q``
    file: data only, no code. ``torch.export``'s input-guard module (an unused ``_guards_fn``
    call_module) is Python code, so it is left out; any other submodule call is an error."""
    g = from_fx(gm) if isinstance(gm, fx.GraphModule) else gm
    constants = g.constants()
    subgraphs = g.subgraphs()
    for n in g.nodes():
        if n.kind == "get_attr" and n.target not in constants and n.target not in subgraphs:
            raise IRConversionError(f"node %{n.name}: get_attr \"{n.target}\" is neither a tensor nor a graph "
                                    "(a Python module), which a .pt2q file does not hold")
        if n.kind == "call_module":
            if n.target == "_guards_fn" and not n.users:
                g.erase(n)
            else:
                raise IRConversionError(f"node %{n.name}: call_module \"{n.target}\" runs Python code, which a .pt2q "
                                        "file does not hold")
    _C.save(g, str(path))


def load(path: str) -> fx.GraphModule:
    """Reads a ``.pt2q`` file into an FX GraphModule (constants registered on it). Loading never
    runs code from the file; a bad file fails with an error naming it."""
    return to_fx(_C.load(str(path)))
