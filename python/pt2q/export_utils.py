"""Train/eval switching for exported models (torchao.quantization.pt2e's export_utils).

model.train()/eval() cannot change an exported graph, so prepare_pt2e and convert_pt2e make them
raise; move_exported_model_to_eval/train flip the train flag of the ops whose behaviour depends
on it (dropout and batch norm) in place, keeping every other argument: unlike torchao's pattern
replacement, a BatchNorm's momentum and eps and a Dropout's p survive (pytorch/ao#2980, #4107).
"""

from __future__ import annotations

import types

import torch
from torch import fx

__all__ = ["move_exported_model_to_eval", "move_exported_model_to_train", "allow_exported_model_train_eval"]

_EXPORTED_TRAINING_ATTR = "_exported_training"

_ERROR = """
        Calling train() or eval() is not supported for exported models.
        Please call `pt2q.move_exported_model_to_train(model)` (or eval) instead.

        If you cannot replace the calls to `model.train()` and `model.eval()`, you may override
        the behavior for these methods by calling `pt2q.allow_exported_model_train_eval(model)`,
        which does the above automatically for you. Note that this has limited effect on switching
        behavior between train and eval modes, and should be used only for special ops such as dropout
        and batchnorm.
        """

# op -> (position of its train flag, its name as a keyword)
_TRAIN_FLAG = {
    torch.ops.aten.dropout.default: (2, "train"),
    torch.ops.aten.feature_dropout.default: (2, "train"),
    torch.ops.aten.batch_norm.default: (5, "training"),
}


def _set_training(model: fx.GraphModule, training: bool) -> None:
    changed = False
    for n in model.graph.nodes:
        if n.op != "call_function" or n.target not in _TRAIN_FLAG:
            continue
        pos, name = _TRAIN_FLAG[n.target]
        if name in n.kwargs:
            n.update_kwarg(name, training)
        else:
            n.update_arg(pos, training)
        changed = True
    if changed:
        model.recompile()


def move_exported_model_to_eval(model: fx.GraphModule) -> fx.GraphModule:
    """Dropout off, batch norm on running statistics. Idempotent."""
    if not getattr(model, _EXPORTED_TRAINING_ATTR, True):
        return model
    setattr(model, _EXPORTED_TRAINING_ATTR, False)
    _set_training(model, False)
    return model


def move_exported_model_to_train(model: fx.GraphModule) -> fx.GraphModule:
    """Dropout on, batch norm on batch statistics. Idempotent."""
    if getattr(model, _EXPORTED_TRAINING_ATTR, False):
        return model
    setattr(model, _EXPORTED_TRAINING_ATTR, True)
    _set_training(model, True)
    return model


def allow_exported_model_train_eval(model: fx.GraphModule) -> fx.GraphModule:
    """Makes model.train()/eval() call the two functions above."""

    def _train(self, mode: bool = True):
        return move_exported_model_to_train(self) if mode else move_exported_model_to_eval(self)

    def _eval(self):
        return move_exported_model_to_eval(self)

    model.train = types.MethodType(_train, model)
    model.eval = types.MethodType(_eval, model)
    return model


def disallow_eval_train(model: fx.GraphModule) -> fx.GraphModule:
    def _train(self, mode: bool = True):
        raise NotImplementedError(_ERROR)

    def _eval(self, mode: bool = True):
        raise NotImplementedError(_ERROR)

    model.train = types.MethodType(_train, model)
    model.eval = types.MethodType(_eval, model)
    return model
