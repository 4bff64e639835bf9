"""Each CPU ISA's kernels (generic, AVX2, AVX-512, and AVX-512 with AVX512_BF16 for the MX
ops), selected with PT2Q_CPU_ISA in a fresh process, give the same bits as the reference
through the public ops."""

import os
import subprocess
import sys

import pytest

import pt2q

SCRIPT = r"""
import sys, torch, pt2q
from pt2q import ops
from tests.kernels.inputs import adversarial
ref = pt2q._C.reference
assert pt2q._C.info.cpu_isa() == sys.argv[1].replace("avx512_bf16", "avx512"), pt2q._C.info.cpu_isa()
assert pt2q._C.info.mx_cpu_kernels() == sys.argv[1], pt2q._C.info.mx_cpu_kernels()
for dt in (torch.float32, torch.bfloat16, torch.float16):
    for shape, block in (((33, 70), [1, 70]), ((33, 70), [33, 1]), ((8, 96), [1, 32]), ((1, 9001), [1, 9001])):
        x = adversarial(shape, dt, specials=False)
        s, z = ops.choose_qparams_affine(x, "asymmetric", block, torch.int8)
        rs, rz = ref.choose_qparams_affine(x, "asymmetric", block, torch.int8)
        assert torch.equal(s, rs) and torch.equal(z, rz)
        x = adversarial(shape, dt, gen_seed=9)
        for qdt in (torch.int8, torch.uint8, torch.int16, torch.int32):
            zz = z.clamp(*((0, 255) if qdt == torch.uint8 else (-128, 127)))
            q = ops.quantize_affine(x, block, s, zz, qdt)
            assert torch.equal(q, ref.quantize_affine(x, block, s, zz, qdt)), (dt, shape, qdt)
            d = ops.dequantize_affine(q, block, s, zz, qdt, output_dtype=dt)
            assert torch.equal(d, ref.dequantize_affine(q, block, s, zz, qdt, output_dtype=dt)), (dt, qdt)
        f = torch.ops.pt2q.fake_quantize_affine_cachemask(x, block, s, z, torch.int8, None, None, "int")
        r = ref.fake_quantize_affine_cachemask(x, block, s, z, torch.int8)
        assert torch.equal(f[0], r[0]) and torch.equal(f[1], r[1])
from tests.mx.inputs import mx_inputs
mxx = torch.from_numpy(mx_inputs(512, 24, seed=4)).reshape(96, 128)
# plus blocks scaled into the fp32 subnormal range, where narrowing to bf16 must not flush
mxx[::3] *= torch.logspace(-140, -100, 128, base=2.0)
for dt in (torch.float32, torch.bfloat16, torch.float16):
    for fmt in ("int8", "fp8_e4m3", "fp4_e2m1", "int5"):
        for rounding in ("nearest", "even", "floor", "stochastic"):
            for axis, block in ((-1, 32), (0, 32), (-1, 7), (0, 0)):
                xx = mxx.to(dt)
                got = torch.ops.pt2q.mx_fake_quantize(xx, fmt, block, axis, rounding, "floor", False, 5)
                want = ref.mx_fake_quantize(xx, fmt, block, axis, rounding, "floor", False, 5)
                assert torch.equal(torch.isnan(got), torch.isnan(want)), (dt, fmt, rounding, axis)
                ok = ~torch.isnan(got)
                assert torch.equal(got[ok].view(torch.int16 if dt != torch.float32 else torch.int32),
                                   want[ok].view(torch.int16 if dt != torch.float32 else torch.int32)), (dt, fmt, rounding, axis)
                if rounding in ("nearest", "stochastic"):
                    c, sc = torch.ops.pt2q.mx_quantize(xx, fmt, block, axis, rounding, "floor", False, 5)
                    rc, rsc = ref.mx_quantize(xx, fmt, block, axis, rounding, "floor", False, 5)
                    assert torch.equal(sc, rsc) and torch.equal(c.view(torch.uint8) if c.element_size() == 1 else c,
                                                                rc.view(torch.uint8) if rc.element_size() == 1 else rc)
p = torch.randint(-8, 8, (5, 600), dtype=torch.int8)
assert torch.equal(ops.pack_int4(p, "high_first"), ref.pack_int4(p, "high_first"))
print("ok", sys.argv[1])
"""


@pytest.mark.parametrize("stream", ["0", "1"])
@pytest.mark.parametrize("isa", ["generic", "avx2", "avx512", "avx512_bf16"])
def test_isa_matches_reference(isa, stream):
    if isa not in pt2q._C.info.available_mx_cpu_kernels():
        pytest.skip(f"this CPU cannot run {isa}")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    # PT2Q_STREAMING_STORES=1 sends these small outputs through the streaming-store path too.
    env = dict(os.environ, PT2Q_CPU_ISA=isa, PYTHONPATH=root, PT2Q_STREAMING_STORES=stream)
    out = subprocess.run([sys.executable, "-c", SCRIPT, isa], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert f"ok {isa}" in out.stdout


def test_unknown_isa_name_is_an_error():
    env = dict(os.environ, PT2Q_CPU_ISA="sse9")
    code = "import torch, pt2q; pt2q.ops.quantize_affine(torch.ones(4), [4], torch.ones(1), None, torch.int8)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode != 0 and "PT2Q_CPU_ISA must be generic, avx2, avx512 or avx512_bf16, got 'sse9'" in out.stderr
