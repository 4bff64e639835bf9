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
    # in place: `x += y`, F.relu(x, inplace=True), ...
    torch.ops.aten.add_.Tensor: operator.iadd, torch.ops.aten.mul_.Tensor: operator.imul,
    torch.ops.aten.relu_.default: F.relu_, torch.ops.aten.hardtanh_.default: F.hardtanh_,
    torch.ops.aten.matmul.default: torch.matmul, torch.ops.aten.linear.default: F.linear,
    torch.ops.aten.conv2d.default: F.conv2d, torch.ops.aten.adaptive_avg_pool2d.default: F.adaptive_avg_pool2d,
}


# Module classes whose forward is the one operator (so dynamo records the module as the source).
# inplace=True forms export as the in-place operator (nn.ReLU(inplace=True) -> aten.relu_).
A = torch.ops.aten
_MODULE_OPS = {
    "Linear": {A.linear.default}, "Conv1d": {A.conv1d.default}, "Conv2d": {A.conv2d.default},
    "ReLU": {A.relu.default, A.relu_.default}, "ReLU6": {A.hardtanh.default, A.hardtanh_.default},
    "Hardtanh": {A.hardtanh.default, A.hardtanh_.default}, "Hardswish": {A.hardswish.default, A.hardswish_.default},
    "SiLU": {A.silu.default, A.silu_.default}, "GELU": {A.gelu.default},
    "LeakyReLU": {A.leaky_relu.default, A.leaky_relu_.default},
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
            _, (_, t) = list(stack.items())[-1]
            cls = _resolve(t)
            if isinstance(cls, type) and n.target in _MODULE_OPS.get(cls.__name__, ()):
                # dynamo names each call of a module apart (a module called twice, as
                # torchvision's BasicBlock calls its relu, makes two partitions): these modules
                # are one operator, so a call is a node.
                source = (n.name, cls)
        if source is None and n.target in _FUNCTIONAL:
            source = (n.name, _FUNCTIONAL[n.target])
        if source is not None:
            n.meta["source_fn_stack"] = [source]
    return gm
