"""pt2q-opt from the shell: pass listing, pipelines, --print-ir-after-all, stdin, errors, and the
rewrite driver's debug log (PT2Q_LOG=rewrite)."""

import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OPT = os.path.join(ROOT, "build", "tools", "pt2q-opt", "pt2q-opt")

GRAPH = """graph @g(%x: f32[4]):
  %a = aten.neg(%x)
  %b = aten.neg(%a)
  %unused = aten.relu(%x)
  return (%b,)
"""

pytestmark = pytest.mark.skipif(not os.path.exists(OPT), reason="pt2q-opt is not built (build/ missing)")


def run(*args, stdin=GRAPH, env=None):
    return subprocess.run([OPT, *args], input=stdin, capture_output=True, text=True,
                          env=dict(os.environ, **(env or {})), timeout=60)


def test_lists_the_registered_passes():
    out = run("--list-passes").stdout
    assert "dead-code-elimination\t" in out and "simplify\t" in out


def test_pipeline_from_stdin_with_ir_after_each_pass():
    r = run("-", "--passes=simplify,dead-code-elimination", "--print-ir-after-all")
    assert r.returncode == 0, r.stderr
    assert "# IR after simplify" in r.stdout and "# IR after dead-code-elimination" in r.stdout
    final = r.stdout.split("# IR after dead-code-elimination\n")[1]
    assert final == "graph @g(%x: f32[4]):\n  return (%x,)\n"


def test_unknown_pass_names_the_known_ones():
    r = run("-", "--passes=simplfy")
    assert r.returncode == 1
    assert "unknown pass 'simplfy'; the passes are: dead-code-elimination, duplicate-dq, fold-batch-norm, fold-quantize, lower-to-native, port-qdq-metadata, reference-representation, simplify" in r.stderr


def test_rewrite_log_gives_the_reason_of_each_failed_match():
    r = run("-", "--passes=simplify", stdin=GRAPH.replace("return (%b,)", "return (%b, %a)"),
            env={"PT2Q_LOG": "rewrite"})
    assert "[rewrite] neg-neg at %b: no match: %a (pattern %a) is also used by %output outside the match" in r.stderr
    assert run("-", "--passes=simplify").stderr == ""  # silent without the flag


def test_bad_input_is_an_error_with_position():
    r = run("-", stdin="graph @g(%x):\n  %y = aten.relu(%q)\n  return (%y,)\n")
    assert r.returncode == 1 and "<stdin>" not in r.stdout
    assert "-:2:18: expected a value defined above, got %q" in r.stderr


def test_reads_and_writes_pt2q_files(tmp_path):
    import torch

    import pt2q
    from tests.graph.zoo import exported

    gm, _ = exported("mlp")
    src = tmp_path / "mlp.pt2q"
    pt2q.save(gm, src)
    out = tmp_path / "out.pt2q"
    r = run(str(src), "--passes=simplify,dead-code-elimination", "-o", str(out))
    assert r.returncode == 0, r.stderr
    back = pt2q.load(out)
    x = torch.randn(4, 16)
    assert torch.equal(back(x), gm(x))
    text = run(str(out)).stdout
    assert text.startswith("graph @GraphModule(%x: f32[4, 16]):") and "aten.linear" in text


IR_DIR = os.path.join(ROOT, "tests", "ir")


@pytest.mark.parametrize("name", sorted(f for f in os.listdir(IR_DIR) if f.endswith(".ir")))
def test_ir_files_through_the_binary(name):
    # The same cases as tests/graph/ir_file_test.cpp, but run by pt2q-opt with its RUN line's
    # arguments, each case's output checked with torch's FileCheck.
    import torch

    path = os.path.join(IR_DIR, name)
    text = open(path).read()
    run_line = next(line for line in text.splitlines() if line.startswith("# RUN:"))
    args = [a for a in run_line.split()[3:] if a != "%s"]
    r = subprocess.run([OPT, path, *args], capture_output=True, text=True, timeout=60)
    outputs = r.stdout.split("# -----\n")
    cases = text.split("\n# -----\n")
    assert len(outputs) == len(cases), r.stdout
    for case, out in zip(cases, outputs):
        if "CHECK" in case:
            torch.testing.FileCheck().run(case, out)


def test_reads_quantize_ops_printed_by_python():
    """A Python process prints quantized_decomposed ops bare (torch.ao registers them there);
    pt2q-opt, where the dispatcher does not know them, reads them as opaque calls."""
    text = """graph @g(%x: f32[4]):
  %q = quantized_decomposed.quantize_per_tensor(%x, 0.5, 3, -128, 127, torch.int8)
  %dq = quantized_decomposed.dequantize_per_tensor(%q, 0.5, 3, -128, 127, torch.int8)
  return (%dq,)
"""
    r = run("-", "--passes=dead-code-elimination", stdin=text)
    assert r.returncode == 0, r.stderr
    assert 'call_opaque "quantized_decomposed.quantize_per_tensor"(%x, 0.5, 3, -128, 127, torch.int8)' in r.stdout
    r = run("-", stdin=text.replace("quantized_decomposed.quantize", "quantized_decompose.quantize"))
    assert r.returncode == 1 and "expected an operator the dispatcher knows" in r.stderr
