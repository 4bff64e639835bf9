"""What the CUDA test files share: the skip of a machine without a GPU, or a pt2q built without the
CUDA kernel a file tests (the CPU-only CI machines), and the names of the kernels a call ran."""

import pytest
import torch


def needs_cuda_kernel(op):
    """A pytestmark entry: skip unless a GPU is present and `op` ("pt2q::name") has a CUDA kernel."""
    has = torch.cuda.is_available() and torch._C._dispatch_has_kernel_for_dispatch_key(op, "CUDA")
    return pytest.mark.skipif(not has, reason=f"needs a GPU and pt2q built with its CUDA kernels ({op})")


def cuda_kernel_names(fn):
    """The names of the CUDA kernels fn() ran, by the profiler. Under compute-sanitizer the profiler
    sees no kernels at all: the calling test is then skipped at this point (so its numeric checks
    should come first)."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    names = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    if not names:
        pytest.skip("the CUDA profiler records no kernels here (compute-sanitizer)")
    return names
