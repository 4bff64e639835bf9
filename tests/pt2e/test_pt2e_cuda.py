"""The PT2E flow on a model that lives on the GPU: calibration data on CUDA, the converted
model's qparam buffers on CUDA, and results close to the same flow on CPU."""

import copy

import pytest
import torch

import pt2q
from pt2q.quantizer import XNNPACKQuantizer, get_symmetric_quantization_config
from tests.pt2e.models import calibration_batches, make

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]


def flow(model, args, device):
    model = copy.deepcopy(model).to(device)
    args = tuple(a.to(device) for a in args)
    m = torch.export.export(model, args).module()
    q = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
    p = pt2q.prepare_pt2e(m, q)
    for b in calibration_batches(args):
        p(*(x.to(device) for x in b))
    return pt2q.convert_pt2e(p), args


def test_cuda_model_quantizes_like_cpu():
    model, args, _ = make("cnn_bn_pool")
    cuda, cuda_args = flow(model, args, "cuda")
    cpu, cpu_args = flow(model, args, "cpu")
    for n in cuda.graph.nodes:
        if n.op == "get_attr":
            t = cuda
            for part in n.target.split("."):
                t = getattr(t, part)
            assert t.device.type == "cuda", n.target
    torch.testing.assert_close(cuda(*cuda_args).cpu(), cpu(*cpu_args), atol=0.05, rtol=0.05)
