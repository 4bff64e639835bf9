"""pt2q: graph-level quantization for PyTorch 2 exported programs.

Importing pt2q loads its C++ core, which registers the ``torch.ops.pt2q.*`` operators
(see ``pt2q.ops`` for Python signatures and docs).
"""

import torch  # noqa: F401  (libtorch must be loaded before libpt2q)

from pt2q import _C  # noqa: F401  (loads libpt2q: registers torch.ops.pt2q.*)
from pt2q import graph, observer, ops, quantizer
from pt2q._version import __version__
from pt2q.calibration import load_calibration, save_calibration
from pt2q.export_utils import (
    allow_exported_model_train_eval,
    move_exported_model_to_eval,
    move_exported_model_to_train,
)
from pt2q.graph import load, save
from pt2q.quantize_pt2e import convert_pt2e, prepare_pt2e, prepare_qat_pt2e
from pt2q.report import report

__all__ = ["graph", "ops", "observer", "quantizer", "save", "load", "prepare_pt2e", "prepare_qat_pt2e",
           "convert_pt2e", "move_exported_model_to_eval", "move_exported_model_to_train",
           "allow_exported_model_train_eval", "save_calibration", "load_calibration", "report", "__version__"]
