"""Per-node overhead of pt2q's C++ interpreter against torch.fx.Interpreter and against calling
the GraphModule (FX's generated Python code), on graphs whose ops cost almost nothing.

    python benchmarks/graph/bench_interpreter.py

A chain of N cheap ops (aten.add.Tensor on a 1-element tensor) is run by each; the time per
node is (time of the N-node graph - time of the 1-node graph) / (N - 1), so fixed call costs
cancel. Also a real model (the zoo's TransformerEncoderLayer) end to end.
"""

import os
import subprocess
import sys
import time

import torch
import torch.fx as fx

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import pt2q  # noqa: E402
from pt2q._C.graph import Interpreter  # noqa: E402
from pt2q.graph import from_fx  # noqa: E402


def chain(n):
    g = fx.Graph()
    x = g.placeholder("x")
    v = x
    for _ in range(n):
        v = g.call_function(torch.ops.aten.add.Tensor, (v, x))
    g.output((v,))
    return fx.GraphModule(torch.nn.Module(), g)


def best_time(fn, reps=7, min_s=0.2):
    fn()
    t0 = time.perf_counter()
    fn()
    iters = max(1, int(min_s / max(time.perf_counter() - t0, 1e-7)))
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        best = min(best, (time.perf_counter() - t0) / iters)
    return best


def runners(gm, x):
    interp = Interpreter(from_fx(gm))
    fx_interp = fx.Interpreter(gm)
    return {
        "GraphModule call (FX codegen)": lambda: gm(x),
        "torch.fx.Interpreter": lambda: fx_interp.run(x),
        "pt2q Interpreter (C++)": lambda: interp.run(x),
    }


def main():
    torch.set_num_threads(1)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
    print(f"# pt2q {pt2q.__version__} ({commit}), torch {torch.__version__}, 1 thread")
    x = torch.ones(1)
    n = 400
    small, big = runners(chain(1), x), runners(chain(n), x)
    rows = {}
    for name in small:
        t1, tn = best_time(small[name]), best_time(big[name])
        rows[name] = ((tn - t1) / (n - 1), tn)
    base = rows["GraphModule call (FX codegen)"][0]
    print(f"| runner | per node (us) | {n}-node graph (us) | per node vs GraphModule |")
    print("|---|---|---|---|")
    for name, (per, total) in rows.items():
        print(f"| {name} | {per * 1e6:.3f} | {total * 1e6:.1f} | {per / base:.2f}x |")
    # The bare op through the Python dispatcher binding, for scale.
    op = best_time(lambda: torch.ops.aten.add.Tensor(x, x))
    print(f"| one aten.add.Tensor call from Python | {op * 1e6:.3f} | | {op / base:.2f}x |")

    from tests.graph.zoo import exported
    gm, args = exported("transformer_encoder")
    interp = Interpreter(from_fx(gm))
    fx_interp = fx.Interpreter(gm)
    nodes = len(gm.graph.nodes)
    print(f"\n| TransformerEncoderLayer ({nodes} nodes), input {tuple(args[0].shape)} | time (us) |")
    print("|---|---|")
    for name, fn in (("GraphModule call", lambda: gm(*args)), ("torch.fx.Interpreter", lambda: fx_interp.run(*args)),
                     ("pt2q Interpreter (C++)", lambda: interp.run(*args))):
        print(f"| {name} | {best_time(fn) * 1e6:.1f} |")


if __name__ == "__main__":
    main()
