"""The MX kernels this CPU can run besides its best ones (AVX2: cpu/mx_simd_avx2.h and
cpu/x86_avx2/linear_mx_avx2.cpp; generic: the scalar loops), each through the same suites as the
default: the million-element spec comparison, the codes and mx_dequantize on every axis, the whole
kernel grid (all bit for bit) and linear_mx (within its fp32 summation bound). Each ISA runs in a
fresh process with PT2Q_CPU_ISA set (the kernels are chosen once per process)."""

import os
import subprocess
import sys

import pytest

import pt2q

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SUITES = ["tests/mx/test_mx_fake_quantize.py", "tests/mx/test_mx_codes.py", "tests/mx/test_mx_cpu_kernel_grid.py",
          "tests/kernels/test_linear_mx.py"]
# The op-registration checks (opcheck, compile, export) do not depend on the kernels; the tests
# that start processes under other ISAs themselves are left to the default run.
DESELECT = "not opcheck and not compile and not export and not without_the_vector_kernels"

RUNNER = r"""
import sys, pytest, pt2q
assert pt2q._C.info.mx_cpu_kernels() == sys.argv[1], pt2q._C.info.mx_cpu_kernels()
sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "-k", sys.argv[2]] + sys.argv[3:]))
"""


@pytest.mark.parametrize("isa", ["generic", "avx2"])
def test_table_matches_the_spec_suites(isa):
    if isa not in pt2q._C.info.available_mx_cpu_kernels():
        pytest.skip(f"this CPU cannot run {isa}")
    env = dict(os.environ, PT2Q_CPU_ISA=isa, PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-c", RUNNER, isa, DESELECT] + SUITES, cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=1200)
    assert out.returncode == 0, (out.stdout[-4000:], out.stderr[-2000:])
    assert " passed" in out.stdout and " failed" not in out.stdout, out.stdout[-2000:]
