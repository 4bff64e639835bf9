"""MXQuantizer through prepare_pt2e / convert_pt2e: for every format, the prepared model equals
the float model with `mx_fake_quantize` applied by hand to the same edges (same axes) bit for
bit, and the converted model (packed MX weights, fake-quantized activations) equals the prepared
one bit for bit; weights are stored as codes + E8M0 scales; specs print in the IR and round-trip
through .pt2q files; configs by module name / type / global; statistics against a plain
reference; export, compile; errors."""

import math
import os

import pytest
import torch
from torch import nn

import pt2q
from pt2q import _annotations as _ann
from pt2q._C import graph as _cgraph
from pt2q.observer_mx import EXP_MIN, MXFakeQuantize
from pt2q.quantizer import MXQuantizationConfig, MXQuantizationSpec, MXQuantizer

FQ = torch.ops.pt2q.mx_fake_quantize
FORMATS = ["int8", "fp8_e4m3", "fp8_e5m2", "fp6_e2m3", "fp6_e3m2", "fp4_e2m1", "int4", "bfp16", "bfp12"]
ELEM = {"bfp16": "int8", "bfp12": "int4"}
# emax of each element format (OCP: the scale is 2^(floor(log2 amax) - emax) in floor mode)
EMAX = {"int8": 0, "int4": 0, "int2": 0, "fp8_e4m3": 8, "fp8_e5m2": 15, "fp6_e3m2": 4, "fp6_e2m3": 2, "fp4_e2m1": 2}
ELEM_MAX = {"int8": 127 / 64, "int4": 1.75, "int2": 1.0, "fp8_e4m3": 448.0, "fp8_e5m2": 57344.0, "fp6_e3m2": 28.0,
            "fp6_e2m3": 7.5, "fp4_e2m1": 6.0}


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(96, 64), nn.Linear(64, 40)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(48, 40, 3, padding=1)
        self.conv1d = nn.Conv1d(40, 24, 3)
        self.fc = nn.Linear(14, 10)

    def forward(self, x):
        y = torch.relu(self.conv(x))  # [B, 40, 8, 8]
        y = self.conv1d(y.flatten(2)[..., :16])  # [B, 24, 14]
        return self.fc(y)


class Attention(nn.Module):
    def forward(self, q, k):
        s = torch.matmul(q, k.transpose(-1, -2))
        return torch.bmm(s.flatten(0, 1), k.flatten(0, 1))


def flow(model, args, config, quantizer=None):
    p = pt2q.prepare_pt2e(torch.export.export(model, args).module(),
                          quantizer or MXQuantizer().set_global(config))
    p(*args)
    return p, pt2q.convert_pt2e(p)


def fq(x, spec_or_fmt, axis, config):
    fmt = ELEM.get(spec_or_fmt, spec_or_fmt)
    return FQ(x, fmt, config.block_size, axis, config.rounding, config.scale_mode, config.flush_fp32_subnorms,
              config.seed)


def mlp_by_hand(m, x, c):
    a = lambda t, axis: t if c.input_activation is None else fq(t, c.input_activation, axis, c)  # noqa: E731
    w = lambda t, axis: t if c.weight is None else fq(t, c.weight, axis, c)  # noqa: E731
    h = torch.relu(nn.functional.linear(a(x, -1), w(m.fc1.weight, -1), m.fc1.bias))
    return nn.functional.linear(a(h, -1), w(m.fc2.weight, -1), m.fc2.bias)


def data(shape, seed):
    """Blocks of widely different magnitudes, some zero blocks and ties-prone values."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g) * torch.exp2(torch.randint(-12, 12, shape, generator=g).float())
    x.view(-1)[:32] = 0.0
    x.view(-1)[32:64] = torch.arange(32) * 0.25
    return x


@pytest.mark.parametrize("fmt", FORMATS)
def test_mlp_prepared_equals_hand_fake_quant_and_converted_equals_prepared(fmt):
    torch.manual_seed(0)
    m = MLP().eval()
    x = data((5, 96), 1)
    config = MXQuantizationConfig(weight=fmt, input_activation=fmt)
    p, c = flow(m, (x,), config)
    want = mlp_by_hand(m, x, config)
    for model in (p, c):
        got = model(x)
        assert torch.equal(got, want), (got - want).abs().max()
    # the converted model holds no float copy of the weights: packed codes + uint8 E8M0 scales
    targets = [n.target for n in c.graph.nodes if n.op == "call_function"]
    assert targets.count(torch.ops.pt2q.mx_dequantize.default) == 2
    assert targets.count(torch.ops.pt2q.mx_fake_quantize.default) == 2
    assert not any(t.shape in ((64, 96), (40, 64)) and t.dtype == torch.float32 for t in c.state_dict().values())


def test_weight_storage_is_the_packed_mx_size():
    """MXFP4 at block 32: 4 bits per code + 8 bits per 32 elements = 4.25 bits per weight."""
    m = nn.Sequential(nn.Linear(256, 128, bias=False)).eval()
    _, c = flow(m, (torch.randn(2, 256),), MXQuantizationConfig(weight="fp4_e2m1"))
    nbytes = sum(t.numel() * t.element_size() for t in c.state_dict().values())
    assert nbytes * 8 == 128 * 256 * 4.25
    codes, scales = torch.ops.pt2q.mx_quantize(m[0].weight, "fp4_e2m1")
    assert sorted((t.dtype, tuple(t.shape)) for t in c.state_dict().values()) == \
        sorted([(codes.dtype, tuple(codes.shape)), (scales.dtype, tuple(scales.shape))])
    assert any(torch.equal(t, codes) for t in c.state_dict().values())
    assert any(torch.equal(t, scales) for t in c.state_dict().values())


@pytest.mark.parametrize("weight,act,out", [("fp4_e2m1", "int8", None), ("fp6_e2m3", "fp8_e4m3", "fp8_e4m3"),
                                            ("bfp12", "bfp12", "bfp12")])
def test_conv_blocks_along_input_channels(weight, act, out):
    torch.manual_seed(1)
    m = ConvNet().eval()
    x = data((2, 48, 8, 8), 2)
    config = MXQuantizationConfig(weight=weight, input_activation=act, output_activation=out)
    p, c = flow(m, (x,), config)
    f = lambda t, fmt, axis: t if fmt is None else fq(t, fmt, axis, config)  # noqa: E731
    y = f(nn.functional.conv2d(f(x, act, 1), f(m.conv.weight, weight, 1), m.conv.bias, padding=1), out, 1)
    y = torch.relu(y)
    y = f(nn.functional.conv1d(f(y.flatten(2)[..., :16], act, 1), f(m.conv1d.weight, weight, 1), m.conv1d.bias),
          out, 1)
    want = f(nn.functional.linear(f(y, act, -1), f(m.fc.weight, weight, -1), m.fc.bias), out, -1)
    assert torch.equal(p(x), want)
    assert torch.equal(c(x), want)


def test_matmul_and_bmm_quantize_both_operands_along_the_reduction_axis():
    q, k = data((2, 3, 16, 64), 3), data((2, 3, 16, 64), 4)
    config = MXQuantizationConfig(input_activation="fp8_e5m2", block_size=16)
    p, c = flow(Attention(), (q, k), config)
    s = torch.matmul(fq(q, "fp8_e5m2", -1, config), fq(k.transpose(-1, -2), "fp8_e5m2", -2, config))
    want = torch.bmm(fq(s.flatten(0, 1), "fp8_e5m2", -1, config), fq(k.flatten(0, 1), "fp8_e5m2", -2, config))
    assert torch.equal(p(q, k), want)
    assert torch.equal(c(q, k), want)


def test_rounding_scale_mode_block_size_and_seeded_stochastic_rounding():
    torch.manual_seed(2)
    m = MLP().eval()
    x = data((3, 96), 5)
    for config in (MXQuantizationConfig(weight="int8", input_activation="fp4_e2m1", rounding="even",
                                        scale_mode="rceil", block_size=16),
                   MXQuantizationConfig(weight="fp6_e3m2", input_activation="int4", rounding="floor",
                                        scale_mode="ceil", block_size=0, flush_fp32_subnorms=True),
                   MXQuantizationConfig(weight="fp4_e2m1", input_activation="int8", rounding="stochastic", seed=7)):
        p, c = flow(m, (x,), config)
        want = mlp_by_hand(m, x, config)
        assert torch.equal(p(x), want) and torch.equal(c(x), want), config


def test_a_spec_per_role_keeps_its_own_parameters():
    m = MLP().eval()
    x = data((4, 96), 6)
    w = MXQuantizationSpec("fp4_e2m1", block_size=64, scale_mode="even")
    config = MXQuantizationConfig(weight=w, input_activation="int8")
    p, c = flow(m, (x,), config)
    wq = lambda t: FQ(t, "fp4_e2m1", 64, -1, "nearest", "even", False, None)  # noqa: E731
    h = torch.relu(nn.functional.linear(fq(x, "int8", -1, config), wq(m.fc1.weight), m.fc1.bias))
    want = nn.functional.linear(fq(h, "int8", -1, config), wq(m.fc2.weight), m.fc2.bias)
    assert torch.equal(c(x), want)


def test_module_name_then_type_then_global():
    m = MLP().eval()
    x = data((2, 96), 7)
    q = (MXQuantizer().set_global(MXQuantizationConfig(weight="int8"))
         .set_module_type(nn.Linear, MXQuantizationConfig(weight="fp8_e4m3"))
         .set_module_name("fc2", MXQuantizationConfig(weight="fp4_e2m1")))
    _, c = flow(m, (x,), None, q)
    formats = [n.args[2] for n in c.graph.nodes if n.target == torch.ops.pt2q.mx_dequantize.default]
    assert formats == ["fp8_e4m3", "fp4_e2m1"]
    q = MXQuantizer().set_global(MXQuantizationConfig(weight="int8")).set_module_name("fc1", None)
    _, c = flow(m, (x,), None, q)
    formats = [n.args[2] for n in c.graph.nodes if n.target == torch.ops.pt2q.mx_dequantize.default]
    assert formats == ["int8"]
    assert torch.equal(c(x), nn.functional.linear(torch.relu(m.fc1(x)), fq(m.fc2.weight, "int8", -1,
                                                                            MXQuantizationConfig()), m.fc2.bias))


def test_sharing_compares_the_mx_parameters():
    """linear -> linear with no op between: fc1's output spec and fc2's input spec are one edge;
    identical MX specs share one module, different ones keep two (sameQuantizationAttrs)."""
    m = nn.Sequential(nn.Linear(32, 32), nn.Linear(32, 32)).eval()
    x = torch.randn(2, 32)

    def count(config):
        p = pt2q.prepare_pt2e(torch.export.export(m, (x,)).module(), MXQuantizer().set_global(config))
        return len({id(mod) for mod in p.modules() if isinstance(mod, MXFakeQuantize)})

    assert count(MXQuantizationConfig(input_activation="int8", output_activation="int8")) == 3
    assert count(MXQuantizationConfig(input_activation="int8", output_activation="fp8_e4m3")) == 4
    assert count(MXQuantizationConfig(input_activation="int8", output_activation="int8", block_size=16)) == 3
    a = MXQuantizationSpec("int8", block_size=32)
    b = MXQuantizationSpec("int8", block_size=16)
    cfg = MXQuantizationConfig(input_activation=a, output_activation=b)
    assert count(cfg) == 4


def test_specs_print_in_the_ir_and_round_trip_through_pt2q_files(tmp_path):
    m = MLP().eval()
    gm = torch.export.export(m, (torch.randn(2, 96),)).module()
    MXQuantizer().set_global(MXQuantizationConfig(weight="fp4_e2m1", input_activation="bfp12",
                                                  scale_mode="rceil")).annotate(gm)
    g, _ = _ann.annotated_ir(gm)
    text = {n.name: n.annotation for n in g.nodes() if n.annotation}
    assert "elem_format='fp4_e2m1', block_size=32, axis=-1, rounding='nearest', scale_mode='rceil'" in text["linear"]
    assert "elem_format='int4'" in text["linear"]
    path = str(tmp_path / "annotated.pt2q")
    _cgraph.save(g, path)
    back = {n.name: n.annotation for n in _cgraph.load(path).nodes() if n.annotation}
    assert back == text


def test_converted_model_exports_compiles_and_saves(tmp_path):
    m = MLP().eval()
    x = data((3, 96), 8)
    _, c = flow(m, (x,), MXQuantizationConfig(weight="fp4_e2m1", input_activation="fp8_e4m3"))
    want = c(x)
    assert torch.equal(torch.export.export(c, (x,)).module()(x), want)
    assert torch.equal(torch.compile(c)(x), want)
    pt2q.save(c, str(tmp_path / "c.pt2q"))
    assert torch.equal(pt2q.load(str(tmp_path / "c.pt2q"))(x), want)


def test_fold_quantize_false_keeps_mx_quantize_on_the_float_weight():
    m = MLP().eval()
    x = data((2, 96), 9)
    p = pt2q.prepare_pt2e(torch.export.export(m, (x,)).module(),
                          MXQuantizer().set_global(MXQuantizationConfig(weight="fp6_e2m3")))
    c = pt2q.convert_pt2e(p, fold_quantize=False)
    targets = [n.target for n in c.graph.nodes if n.op == "call_function"]
    assert targets.count(torch.ops.pt2q.mx_quantize.default) == 2
    assert torch.equal(c(x), p(x))


# ---- statistics ---------------------------------------------------------------------------------

def reference_stats(xs, fmt, block):
    """Plain-Python per-block statistics for floor scale mode along the last axis."""
    hist, sat, under, sig, noise, zero_blocks = {}, 0, 0, 0.0, 0.0, 0
    for x in xs:
        y = FQ(x, fmt, block, -1, "nearest", "floor", False, None)
        rows, cols = x.reshape(-1, x.shape[-1]).tolist(), y.reshape(-1, x.shape[-1]).tolist()
        for row, qrow in zip(rows, cols):
            for b in range(0, len(row), block):
                blk, qb = row[b:b + block], qrow[b:b + block]
                amax = max(abs(v) for v in blk)
                if amax == 0:
                    zero_blocks += 1
                    continue
                e = math.frexp(amax)[1] - 1
                hist[e] = hist.get(e, 0) + 1
                scale = 2.0 ** max(e - EMAX[fmt], -127)
                sat += sum(abs(v) > ELEM_MAX[fmt] * scale for v in blk)
                under += sum(v != 0 and q == 0 for v, q in zip(blk, qb))
                sig += sum(v * v for v in blk)
                noise += sum((v - q) ** 2 for v, q in zip(blk, qb))
    return hist, sat, under, sig, noise, zero_blocks


@pytest.mark.parametrize("fmt", ["int8", "fp8_e4m3", "fp4_e2m1", "fp6_e3m2", "int4"])
def test_block_statistics_match_a_plain_reference(fmt):
    mod = MXFakeQuantize(fmt, block_size=16, observe=True)
    xs = [data((3, 64), 10), data((2, 64), 11) * 1e3, torch.zeros(1, 64)]
    for x in xs:
        mod(x)
    hist, sat, under, sig, noise, zero_blocks = reference_stats(xs, fmt, 16)
    got = {i + EXP_MIN: int(v) for i, v in enumerate(mod.exp_hist) if v}
    assert got == hist
    assert (mod.saturated, mod.underflowed, mod.zero_blocks) == (sat, under, zero_blocks)
    assert mod.calls == 3 and mod.elements == 6 * 64 and mod.blocks == 6 * 4
    assert mod.signal_power == pytest.approx(sig, rel=1e-12) and mod.noise_power == pytest.approx(noise, rel=1e-12)
    assert mod.sqnr_db() == pytest.approx(10 * math.log10(sig / noise), rel=1e-12)
    if fmt == "fp4_e2m1":
        assert sat > 0  # floor scales saturate the top of each FP4 block (microxcaling #4)


def test_nan_blocks_are_counted_not_measured():
    mod = MXFakeQuantize("int8", block_size=4, observe=True)
    mod(torch.tensor([[1.0, float("nan"), 2.0, 3.0, 1.0, 2.0, 3.0, 4.0]]))
    assert (mod.nan_blocks, mod.blocks, int(mod.exp_hist.sum())) == (1, 2, 1)
    assert math.isfinite(mod.signal_power) and math.isfinite(mod.noise_power)


def test_statistics_are_off_by_default_and_the_report_reads_them(tmp_path):
    m = MLP().eval()
    x = data((4, 96), 12)
    p, _ = flow(m, (x,), MXQuantizationConfig(weight="int8", input_activation="int8"))
    assert all(mod.calls == 0 for mod in p.modules() if isinstance(mod, MXFakeQuantize))
    assert "no MX module" in str(pt2q.report(p))
    p, _ = flow(m, (x,), MXQuantizationConfig(weight="fp4_e2m1", input_activation="int8", observe=True))
    p(x)
    r = pt2q.report(p)
    assert len(r.rows) == 4 and all(row["calls"] == 2 for row in r.rows)
    by_obs = {row["observes"]: row for row in r.rows}
    assert by_obs["fc1_weight"]["format"] == "fp4_e2m1" and by_obs["x"]["format"] == "int8"
    text = str(r)
    assert text.count("\n") == 5 and "SQNR dB" in text and "fc2_weight" in text
    png = str(tmp_path / "r.png")
    try:
        import matplotlib  # noqa: F401
        assert r.plot(png) and os.path.getsize(png) > 0
    except ImportError:
        assert r.plot(png) is False and not os.path.exists(png)


# ---- errors ---------------------------------------------------------------------------------------

def test_bad_parameters_name_the_argument():
    with pytest.raises(ValueError, match=r"MXQuantizationSpec: elem_format must be one of .* got 'fp5'"):
        MXQuantizationSpec("fp5")
    with pytest.raises(ValueError, match=r"block_size must be an int >= 0"):
        MXQuantizationSpec("int8", block_size=-1)
    with pytest.raises(ValueError, match=r"rounding must be one of"):
        MXQuantizationConfig(weight="int8", rounding="up")
    with pytest.raises(ValueError, match=r"scale_mode must be one of"):
        MXQuantizationConfig(weight="int8", scale_mode="max")
    with pytest.raises(ValueError, match=r"weight must be a format name, an MXQuantizationSpec or None"):
        MXQuantizationConfig(weight=8)
    with pytest.raises(ValueError, match=r"ops must be drawn from"):
        MXQuantizationConfig(weight="int8", ops=("linear", "softmax"))
    with pytest.raises(TypeError, match=r"MXQuantizer takes an MXQuantizationConfig or None"):
        MXQuantizer().set_global({"weight": "int8"})
    with pytest.raises(ValueError, match=r"pt2q.report: the model has no MX fake-quant modules"):
        pt2q.report(MLP())
    with pytest.raises(ValueError, match=r"MXFakeQuantize: MX fake quantization takes a floating-point tensor"):
        MXFakeQuantize("int8")(torch.ones(4, dtype=torch.int32))


# ---- lower_to_native ------------------------------------------------------------------------------

class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.q, self.k = nn.Linear(64, 32), nn.Linear(64, 32, bias=False)

    def forward(self, x):
        return self.q(x) * self.k(x)


@pytest.mark.parametrize("weight,act", [("fp4_e2m1", "int8"), ("int8", None), ("fp6_e2m3", "fp8_e4m3"),
                                        ("fp8_e5m2", "fp4_e2m1"), ("bfp12", "bfp16")])
def test_lower_to_native_turns_every_mx_linear_into_linear_mx(weight, act):
    m = MLP().eval()
    x = data((3, 96), 13)
    p, c = flow(m, (x,), MXQuantizationConfig(weight=weight, input_activation=act))
    lowered = pt2q.convert_pt2e(p, lower_to_native=True)
    targets = [n.target for n in lowered.graph.nodes if n.op == "call_function"]
    assert targets.count(torch.ops.pt2q.linear_mx.default) == 2
    assert torch.ops.pt2q.mx_dequantize.default not in targets and torch.ops.aten.linear.default not in targets
    assert torch.ops.pt2q.mx_fake_quantize.default not in targets  # moved into the op
    want, got = c(x).detach(), lowered(x).detach()
    # each output: the same products as the converted model's F.linear, summed in another order
    assert torch.allclose(got, want, rtol=1e-5, atol=1e-6 * float(want.abs().max()))
    for n in lowered.graph.nodes:
        if n.target == torch.ops.pt2q.linear_mx.default:
            assert n.args[3] == ELEM.get(weight, weight) and n.args[6] == (None if act is None else ELEM.get(act, act))
    assert torch.allclose(torch.export.export(lowered, (x,)).module()(x), got, rtol=0, atol=0)


def test_lowering_keeps_a_shared_fake_quant_and_leaves_stochastic_rounding_outside():
    m = TwoHeads().eval()
    x = data((2, 64), 14)
    p, c = flow(m, (x,), MXQuantizationConfig(weight="int4", input_activation="int8"))
    lowered = pt2q.convert_pt2e(p, lower_to_native=True)
    targets = [n.target for n in lowered.graph.nodes if n.op == "call_function"]
    assert targets.count(torch.ops.pt2q.linear_mx.default) == 2
    assert torch.allclose(lowered(x), c(x), rtol=1e-5, atol=1e-6)
    cfg = MXQuantizationConfig(weight="int4", input_activation="int8", rounding="stochastic", seed=3)
    p, c = flow(m, (x,), cfg)
    lowered = pt2q.convert_pt2e(p, lower_to_native=True)
    fq_nodes = [n for n in lowered.graph.nodes if n.target == torch.ops.pt2q.mx_fake_quantize.default]
    assert len(fq_nodes) == 1  # the input's (stochastic): kept in the graph, the op gets its output
    assert all(n.args[6] is None for n in lowered.graph.nodes if n.target == torch.ops.pt2q.linear_mx.default)
    assert torch.allclose(lowered(x), c(x), rtol=1e-5, atol=1e-6)


def test_bf16_model_lowers_and_conv_stays():
    m = ConvNet().eval().to(torch.bfloat16)
    x = data((2, 48, 8, 8), 15).to(torch.bfloat16)
    p, c = flow(m, (x,), MXQuantizationConfig(weight="fp4_e2m1", input_activation="int8"))
    lowered = pt2q.convert_pt2e(p, lower_to_native=True)
    targets = [n.target for n in lowered.graph.nodes if n.op == "call_function"]
    assert targets.count(torch.ops.pt2q.linear_mx.default) == 1  # the linear; the convs stay q/dq
    assert targets.count(torch.ops.pt2q.mx_dequantize.default) == 2
    want, got = c(x).float(), lowered(x).float()
    assert torch.allclose(got, want, rtol=2 ** -7, atol=2 ** -7 * float(want.abs().max()))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(64, 64)
        self.ln = nn.LayerNorm(64)

    def forward(self, x, y):
        h = self.fc(x) + y
        return self.ln(h * y)


def test_opt_in_add_mul_layer_norm_inputs():
    m = Block().eval()
    x, y = data((3, 64), 16), data((3, 64), 17)
    config = MXQuantizationConfig(weight="fp8_e4m3", input_activation="int8",
                                  ops=("linear", "add", "mul", "layer_norm"))
    p, c = flow(m, (x, y), config)
    f = lambda t: fq(t, "int8", -1, config)  # noqa: E731
    h = nn.functional.linear(f(x), fq(m.fc.weight, "fp8_e4m3", -1, config), m.fc.bias)
    h = f(h) + f(y)
    want = nn.functional.layer_norm(f(f(h) * f(y)), (64,), m.ln.weight, m.ln.bias, m.ln.eps)
    assert torch.equal(p(x, y), want) and torch.equal(c(x, y), want)
    # without the opt-in, only the linear is quantized
    _, c2 = flow(m, (x, y), MXQuantizationConfig(weight="fp8_e4m3", input_activation="int8"))
    h = nn.functional.linear(f(x), fq(m.fc.weight, "fp8_e4m3", -1, config), m.fc.bias) + y
    assert torch.equal(c2(x, y), m.ln(h * y))
