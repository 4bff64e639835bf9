"""Calibration state of a prepared model: save it, load it, or merge another process's into it,
so that calibration can be split over processes or machines (observer state files,
proto/observer_state.proto). Observers are named by their first activation_post_process_N."""

from __future__ import annotations

import os

from torch import fx

from pt2q._C import observers as _cobs

__all__ = ["save_calibration", "load_calibration"]


def _observers(model: fx.GraphModule) -> dict:
    out, seen = {}, set()
    for n in model.graph.nodes:
        if n.op != "call_module" or not str(n.target).startswith("activation_post_process_"):
            continue
        obs = getattr(model, n.target)
        if id(obs) in seen:
            continue
        seen.add(id(obs))
        if hasattr(obs, "_obs"):  # pt2q's C++-backed observers; others have no state to carry
            out[n.target] = obs
    return out


def save_calibration(model: fx.GraphModule, path: str | os.PathLike) -> int:
    """Writes the statistics of every pt2q observer of `model`; returns how many."""
    obs = _observers(model)
    with open(path, "wb") as f:
        f.write(_cobs.serialize([(name, o._obs) for name, o in obs.items()]))
    return len(obs)


def load_calibration(model: fx.GraphModule, path: str | os.PathLike, merge: bool = False) -> int:
    """Loads statistics saved by save_calibration into the same-named observers of `model`
    (prepared the same way): replacing theirs, or, with merge=True, combining them (min/max
    observers exactly; histograms carried into the union range). Checks every observer before
    changing any; returns how many were loaded."""
    with open(path, "rb") as f:
        loaded = _cobs.deserialize(f.read(), str(path))
    mine = _observers(model)
    for name, o in loaded:
        if name not in mine:
            raise ValueError(f"{path}: observer {name} is not in this model (it has {sorted(mine)})")
        if o.kind != mine[name]._obs.kind or o.qrange != mine[name]._obs.qrange:
            raise ValueError(f"{path}: observer {name} is a {o.kind} {o.qrange}, the model's is a "
                             f"{mine[name]._obs.kind} {mine[name]._obs.qrange}")
    for name, o in loaded:
        target = mine[name]
        if merge:
            target._obs.merge(o)
        else:
            target._obs.set_state(o.state())
        target._sync()
    return len(loaded)
