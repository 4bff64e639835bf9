"""pt2q: graph-level quantization for PyTorch 2 exported programs.

Importing pt2q loads its C++ core, which registers the ``torch.ops.pt2q.*`` operators
(see ``pt2q.ops`` for Python signatures and docs).
"""

import torch  # noqa: F401  (libtorch must be loaded before libpt2q)

from pt2q import _C  # noqa: F401  (loads libpt2q: registers torch.ops.pt2q.*)
from pt2q import graph, ops
from pt2q._version import __version__
from pt2q.graph import load, save

__all__ = ["graph", "ops", "save", "load", "__version__"]
