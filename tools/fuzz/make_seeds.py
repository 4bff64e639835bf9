"""Writes the fuzzers' seed corpora (committed under tools/fuzz/corpus/): every case of
tests/ir/*.ir and every zoo graph as IR text, and the small zoo graphs as .pt2q files.

    python tools/fuzz/make_seeds.py
"""

import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, ROOT)

import pt2q  # noqa: E402
from pt2q._C import graph as G  # noqa: E402
from tests.graph.zoo import ZOO, exported  # noqa: E402

out_ir = os.path.join(ROOT, "tools/fuzz/corpus/ir_parser")
out_bin = os.path.join(ROOT, "tools/fuzz/corpus/graph_file")
os.makedirs(out_ir, exist_ok=True)
os.makedirs(out_bin, exist_ok=True)
ir_dir = os.path.join(ROOT, "tests/ir")
for f in sorted(os.listdir(ir_dir)):
    for i, case in enumerate(open(os.path.join(ir_dir, f)).read().split("# -----")):
        with open(os.path.join(out_ir, f"{f[:-3]}_{i}.ir"), "w") as o:
            o.write(case)
for name in sorted(ZOO):
    gm, _ = exported(name)
    g = pt2q.graph.from_fx(gm)
    with open(os.path.join(out_ir, f"zoo_{name}.ir"), "w") as o:
        o.write(str(g))
    if name in ("mlp", "buffer_mutation", "cnn_bn_pool", "dynamic_batch", "cond"):
        for n in g.nodes():
            if n.kind == "call_module" and not n.users:
                g.erase(n)
        with open(os.path.join(out_bin, f"zoo_{name}.pt2q"), "wb") as o:
            o.write(G.serialize(g))
print(len(os.listdir(out_ir)), "text seeds,", len(os.listdir(out_bin)), "file seeds")
