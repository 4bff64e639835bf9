"""Recreates node.meta["source_fn_stack"], which torch.export no longer records, from the module
stack and the operator, so that torchao's partition-based annotators can run as they were meant
to and be compared with pt2q's operator-based ones."""

import importlib
import operator

import torch
import torch.nn.functional as F
from torch import fx

_FUNCTIONAL = {
    torch.ops.aten.add.Tensor: operator.add, torch.ops.aten.mul.Tensor: operator.mul, torch.ops.aten.cat.default: torch.cat,
    torch.ops.aten.relu.default: F.relu, torch.ops.aten.flatten.using_ints: torch.flatten,
    torch.ops.aten.matmul.default: torch.matmul, torch.ops.aten.linear.default: F.linear,
    torch.ops.aten.conv2d.default: F.conv2d, torch.ops.aten.adaptive_avg_pool2d.default: F.adaptive_avg_pool2d,
}


# Module classes whose forward is the one operator (so dynamo records the module as the source).
_MODULE_OPS = {
    "Linear": {torch.ops.aten.linear.default}, "Conv1d": {torch.ops.aten.conv1d.default},
    "Conv2d": {torch.ops.aten.conv2d.default}, "ReLU": {torch.ops.aten.relu.default},
    "ReLU6": {torch.ops.aten.hardtanh.default}, "Hardtanh": {torch.ops.aten.hardtanh.default},
    "Hardswish": {torch.ops.aten.hardswish.default}, "SiLU": {torch.ops.aten.silu.default},
    "GELU": {torch.ops.aten.gelu.default}, "LeakyReLU": {torch.ops.aten.leaky_relu.default},
    "Tanh": {torch.ops.aten.tanh.default}, "MaxPool2d": {torch.ops.aten.max_pool2d.default},
    "AvgPool2d": {torch.ops.aten.avg_pool2d.default},
    "AdaptiveAvgPool2d": {torch.ops.aten.adaptive_avg_pool2d.default}, "Embedding": {torch.ops.aten.embedding.default},
}


def _resolve(type_str):
    if not isinstance(type_str, str):
        return type_str
    mod, _, name = type_str.rpartition(".")
    try:
        return getattr(importlib.import_module(mod), name)
    except (ImportError, AttributeError):
        return None


def add_source_fn_stack(gm: fx.GraphModule) -> fx.GraphModule:
    for n in gm.graph.nodes:
        if n.op != "call_function":
            continue
        stack = n.meta.get("nn_module_stack") or {}
        source = None
        if stack:
            key, (path, t) = list(stack.items())[-1]
            cls = _resolve(t)
            if isinstance(cls, type) and n.target in _MODULE_OPS.get(cls.__name__, ()):
                source = (key, cls)
        if source is None and n.target in _FUNCTIONAL:
            source = (n.name, _FUNCTIONAL[n.target])
        if source is not None:
            n.meta["source_fn_stack"] = [source]
    return gm
