"""What the CUDA test files share: the skip of a machine without a GPU, or a pt2q built without the
CUDA kernel a file tests (the CPU-only CI machines)."""

import pytest
import torch


def needs_cuda_kernel(op):
    """A pytestmark entry: skip unless a GPU is present and `op` ("pt2q::name") has a CUDA kernel."""
    has = torch.cuda.is_available() and torch._C._dispatch_has_kernel_for_dispatch_key(op, "CUDA")
    return pytest.mark.skipif(not has, reason=f"needs a GPU and pt2q built with its CUDA kernels ({op})")
