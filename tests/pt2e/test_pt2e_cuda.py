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


LINEAR_CASES = [  # quantizer, the native op lower_to_native gives
    ("Int8WeightOnlyQuantizer", (), "linear_w8a16"),
    ("Int4WeightOnlyQuantizer", (64,), "linear_w4a16"),
    ("Int8DynActInt8WeightQuantizer", (), "linear_w8a8"),
    ("Int8DynActInt4WeightQuantizer", (32,), "linear_w4a8"),
]


@pytest.mark.parametrize("name,args,op", LINEAR_CASES, ids=[c[0] for c in LINEAR_CASES])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_lowered_linears_run_and_compile_on_cuda(name, args, op, dtype):
    # The lowered model on CUDA runs pt2q's CUDA kernels, torch.compile gives the same bits, and
    # the result is the same flow's on CPU within a few output roundings (the qparams are chosen
    # on each device; the kernels sum in other orders).
    if not torch._C._dispatch_has_kernel_for_dispatch_key(f"pt2q::{op}", "CUDA"):
        pytest.skip("pt2q was built without its CUDA kernels")
    import pt2q.quantizer as qz

    def lowered(device):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 128))
        model = model.to(dtype).to(device)
        x = torch.randn(5, 256, generator=torch.Generator().manual_seed(1)).to(dtype).to(device)
        p = pt2q.prepare_pt2e(torch.export.export(model, (x,)).module(), getattr(qz, name)(*args))
        return pt2q.convert_pt2e(p, lower_to_native=True), x

    low, x = lowered("cuda")
    targets = [str(n.target) for n in low.graph.nodes if n.op == "call_function"]
    assert targets.count(f"pt2q.{op}.default") == 2, targets
    y = low(x)
    assert y.is_cuda and y.dtype == dtype
    torch._dynamo.reset()
    assert torch.equal(torch.compile(low, fullgraph=True)(x), y)
    cpu, xc = lowered("cpu")
    tol = 2e-2 if dtype == torch.bfloat16 else 1e-3
    torch.testing.assert_close(y.cpu(), cpu(xc), rtol=tol, atol=tol)


def test_static_chains_lower_to_the_cuda_kernels():
    # XNNPACK's static graph on CUDA: the chains become pt2q.conv2d_q8 / linear_q8 (CUDA kernels),
    # within one step of the final output quantizer of the q/dq model, as on CPU; compile agrees.
    if not torch._C._dispatch_has_kernel_for_dispatch_key("pt2q::conv2d_q8", "CUDA"):
        pytest.skip("pt2q was built without its CUDA kernels")
    from tests.pt2e.test_lower_static import Net, _xnnpack

    torch.manual_seed(0)
    model, x = Net().eval().cuda(), torch.randn(4, 3, 8, 8, device="cuda")
    p = pt2q.prepare_pt2e(torch.export.export(model, (x,)).module(), _xnnpack())
    for _ in range(4):
        p(torch.randn(4, 3, 8, 8, device="cuda") * 1.5)
    qdq, low = pt2q.convert_pt2e(p), pt2q.convert_pt2e(p, lower_to_native=True)
    targets = [n.target for n in low.graph.nodes if n.op == "call_function"]
    P = torch.ops.pt2q
    assert targets.count(P.conv2d_q8.default) == 3 and targets.count(P.linear_q8.default) == 2, targets
    final = next(n for n in qdq.graph.nodes if n.op == "output").args[0][0]
    y = low(x)
    assert y.is_cuda and float((qdq(x) - y).abs().max()) <= 1.5 * final.args[1]
    torch._dynamo.reset()
    assert torch.equal(torch.compile(low, fullgraph=True)(x), y)


def test_mx_linears_lower_to_the_cuda_kernel():
    if not torch._C._dispatch_has_kernel_for_dispatch_key("pt2q::linear_mx", "CUDA"):
        pytest.skip("pt2q was built without its CUDA kernels")
    from pt2q.quantizer import MXQuantizationConfig
    from tests.pt2e.test_mx_quantizer import MLP, data
    from tests.pt2e.test_mx_quantizer import flow as mx_flow

    x = data((3, 96), 13).cuda()
    p, c = mx_flow(MLP().eval().cuda(), (x,), MXQuantizationConfig(weight="fp4_e2m1", input_activation="int8"))
    low = pt2q.convert_pt2e(p, lower_to_native=True)
    targets = [n.target for n in low.graph.nodes if n.op == "call_function"]
    assert targets.count(torch.ops.pt2q.linear_mx.default) == 2, targets
    want, got = c(x).detach(), low(x).detach()
    assert got.is_cuda
    assert torch.allclose(got, want, rtol=1e-5, atol=1e-6 * float(want.abs().max()))


def test_x86_residual_blocks_lower_to_the_cuda_kernels():
    # X86's conv -> add [-> relu] fusions on CUDA: conv2d_q8 with its residual and the head as
    # conv2d_q8_float (the CPU lowering's graph), within the head's step of the q/dq model on CUDA
    # and mostly identical to it.
    if not torch._C._dispatch_has_kernel_for_dispatch_key("pt2q::conv2d_q8", "CUDA"):
        pytest.skip("pt2q was built without its CUDA kernels")
    from tests.pt2e.test_lower_static import Bottleneck, close_to_qdq, head_step, x86_flow

    qdq, low, x = x86_flow(Bottleneck(), (2, 8, 10, 10), "cuda")
    P = torch.ops.pt2q
    convs = [n for n in low.graph.nodes if n.target == P.conv2d_q8.default]
    assert len(convs) == 5 and sum(1 for n in convs if len(n.args) == 18) == 2
    assert sum(1 for n in low.graph.nodes if n.target == P.conv2d_q8_float.default) == 1  # the head
    assert low(x).is_cuda
    close_to_qdq(qdq, low, [x] + [torch.randn(2, 8, 10, 10, device="cuda") for _ in range(4)], head_step(qdq), 0.1)
