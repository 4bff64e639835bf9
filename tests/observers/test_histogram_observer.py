"""pt2q's C++ HistogramObserver against torch.ao's, bit for bit: running min/max and histogram
after every batch (including batches that widen the range, carry infinities, are constant or
sit exactly on bin edges), the search's quantization error for arbitrary bin ranges, and the
final qparams; plus merge, state round trips and the errors torch.ao does not give."""

import warnings

import pytest
import torch
import torch.ao.quantization.observer as tao

from pt2q._C.observers import Observer

DTYPES = {"quint8": torch.quint8, "qint8": torch.qint8, "int16": torch.int16}


def bits(t):
    return t.view(torch.int32) if t.dtype == torch.float32 else t


def same(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
    assert torch.equal(bits(a), bits(b)), (a, b)


def pair(dtype="qint8", qscheme="per_tensor_affine", quant_min=None, quant_max=None, reduce_range=False, bins=2048):
    kw = dict(dtype=DTYPES[dtype], qscheme=getattr(torch, qscheme), reduce_range=reduce_range, bins=bins)
    if quant_min is not None:
        kw.update(quant_min=quant_min, quant_max=quant_max)
    return (tao.HistogramObserver(**kw),
            Observer("HistogramObserver", dtype, qscheme, quant_min=quant_min, quant_max=quant_max,
                     reduce_range=reduce_range, bins=bins))


def assert_state(ref, mine):
    s = dict(mine.state())
    same(s["min_val"], ref.min_val)
    same(s["max_val"], ref.max_val)
    same(s["histogram"], ref.histogram)


def assert_qparams(ref, mine):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rs, rz = ref.calculate_qparams()
    ms, mz = mine.calculate_qparams()
    same(ms, rs)
    assert torch.equal(mz.long(), rz.long()) and mz.shape == rz.shape, (mz, rz)


def stream(kind, seed):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    if kind == "stationary":
        return [r(4, 300) for _ in range(6)]
    if kind == "widening":
        return [r(1000) * (1 + 0.5 * i) + 0.1 * i for i in range(6)]
    if kind == "shrinking":
        return [r(1000) / (1 + i) for i in range(5)]
    if kind == "heavy_tail":
        return [r(5000).exp() for _ in range(4)] + [-r(50).exp() * 100]
    if kind == "integers_on_edges":
        # values on the bin edges of a 2048-bin histogram over [-8, 8] and their neighbours
        e = torch.linspace(-8, 8, 2049)
        return [e, torch.nextafter(e, torch.tensor(9.0)), torch.nextafter(e, torch.tensor(-9.0)), e[::7]]
    if kind == "constant_first":
        return [torch.full((100,), 0.5), torch.full((10,), 0.5), r(300), torch.full((3,), -7.0)]
    if kind == "all_zero":
        return [torch.zeros(64), torch.zeros(8), r(64) * 1e-3]
    if kind == "tiny_range":
        return [1.0 + r(500) * 1e-6, 1.0 + r(500) * 1e-7]
    if kind == "subnormal":
        return [r(300) * 1e-39, r(300) * 1e-41]
    if kind == "negative_only":
        return [-r(400).abs() - 3, -r(400).abs() * 2 - 1]
    if kind == "bf16":
        return [r(700).to(torch.bfloat16), (r(700) * 3).to(torch.bfloat16)]
    if kind == "fp16":
        return [r(700).to(torch.float16), r(700).to(torch.float32)]
    if kind == "strided":
        return [r(64, 48).t(), r(64, 48)[:, ::3] * 2]
    raise ValueError(kind)


KINDS = ["stationary", "widening", "shrinking", "heavy_tail", "integers_on_edges", "constant_first", "all_zero",
         "tiny_range", "subnormal", "negative_only", "bf16", "fp16", "strided"]
CONFIGS = [("qint8", "per_tensor_affine", None, None, False),
           ("qint8", "per_tensor_symmetric", -127, 127, False),
           ("quint8", "per_tensor_affine", None, None, True),
           ("quint8", "per_tensor_symmetric", 0, 127, False),
           ("int16", "per_tensor_affine", None, None, False)]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: "-".join(str(v) for v in c))
def test_matches_torch_ao_after_every_batch(kind, config):
    ref, mine = pair(*config)
    for i, x in enumerate(stream(kind, hash((kind, config)) & 0xFFFF)):
        ref(x)
        mine.observe(x)
        assert_state(ref, mine)
    assert_qparams(ref, mine)


@pytest.mark.parametrize("seed", range(12))
def test_random_streams(seed):
    g = torch.Generator().manual_seed(1000 + seed)
    config = CONFIGS[seed % len(CONFIGS)]
    ref, mine = pair(*config, bins=[2048, 2048, 512, 100][seed % 4])
    for _ in range(8):
        n = int(torch.randint(1, 20000, (1,), generator=g))
        scale = float(torch.rand(1, generator=g) * 10) ** 3
        shift = float(torch.randn(1, generator=g)) * scale
        x = torch.randn(n, generator=g) * scale + shift
        ref(x)
        mine.observe(x)
    assert_state(ref, mine)
    assert_qparams(ref, mine)


def test_large_batch_takes_the_exact_fallback():
    # 2^24 elements: per-bin counts could pass fp32's exact range, so pt2q defers to torch.histc
    ref, mine = pair()
    x = torch.randn(1 << 24, generator=torch.Generator().manual_seed(5))
    x[0] = 0.0
    for t in (x, torch.zeros(1 << 24)):
        ref(t)
        mine.observe(t)
    assert_state(ref, mine)
    assert_qparams(ref, mine)


@pytest.fixture
def four_threads():
    old = torch.get_num_threads()
    torch.set_num_threads(4)  # several chunks of the counting pass, also on a one-core machine
    yield
    torch.set_num_threads(old)


def widening_batch(where, n=200_000, seed=0):
    """A batch inside [-4, 4] but for values past the range at `where`: the first element, the
    last (the other threads' chunk, the scalar tail), one in the middle, or many."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, generator=g).clamp(-3.9, 3.9)
    if where == "first":
        x[0] = 5.0
    elif where == "last":
        x[-1] = -6.5
    elif where == "middle":
        x[n // 2 + 3] = 4.25
    elif where == "many":
        x[::97] *= 1.7
    elif where == "tail_of_a_chunk":
        x[(1 << 15) - 1] = 7.0  # last element of the first parallel_for chunk
    return x


@pytest.mark.parametrize("where", ["first", "last", "middle", "many", "tail_of_a_chunk"])
def test_a_batch_that_widens_mid_pass(four_threads, where):
    # The counting pass stops at the first value outside the running range and its min / max
    # replace aminmax: the state must still be torch.ao's after every batch.
    ref, mine = pair()
    base = torch.cat([torch.tensor([-4.0, 4.0]), torch.randn(1000, generator=torch.Generator().manual_seed(3))])
    for x in (base, widening_batch(where), widening_batch("middle", seed=1) * 0.5, widening_batch(where, seed=2) * 1.3):
        ref(x)
        mine.observe(x)
        assert_state(ref, mine)
    assert_qparams(ref, mine)


@pytest.mark.parametrize("bins", [2048, 256, 100])
def test_many_small_widenings(bins):
    # The calibration stream bench_flow times: randn scaled by 1.00-1.30, so every few batches
    # widen the range by a few per cent and the running histogram (fractions of 1/16 after the
    # first carry, and counts past 2^24 / 16 in the middle bins) is carried again and again.
    g = torch.Generator().manual_seed(bins)
    ref, mine = pair(bins=bins)
    for i in range(40):
        x = torch.randn(8, 4096, generator=g) * (1 + 0.05 * (i % 7)) * (1 + 0.002 * i)
        ref(x)
        mine.observe(x)
        assert_state(ref, mine)
    assert_qparams(ref, mine)


def test_buffers_change_in_place_like_torch_ao():
    # torch.ao updates min_val / max_val / histogram in place, so a reference taken before
    # calibration stays current; the first batch, one inside the range, a widening one.
    from pt2q.observer import HistogramObserver

    ref = tao.HistogramObserver(dtype=torch.qint8)
    mine = HistogramObserver(dtype=torch.qint8)
    held = {name: getattr(mine, name) for name in ("histogram", "min_val", "max_val")}
    held_ref = {name: getattr(ref, name) for name in ("histogram", "min_val", "max_val")}
    g = torch.Generator().manual_seed(4)
    for x in (torch.randn(5000, generator=g), torch.randn(300, generator=g) * 0.5, torch.randn(5000, generator=g) * 3):
        ref(x)
        mine(x)
        for name in held:
            same(held_ref[name], getattr(ref, name))  # torch.ao's own behaviour
            same(held[name], getattr(ref, name))


@pytest.mark.parametrize("zero", ["min", "max"])
def test_a_zero_extreme_of_either_sign_in_a_widening_batch(four_threads, zero):
    # ReLU outputs hold 0.0 and can hold -0.0; a widening batch whose min (or max) is zero keeps
    # aminmax's choice of sign.
    ref, mine = pair()
    g = torch.Generator().manual_seed(11)
    first = torch.rand(5000, generator=g) + 0.5
    wide = torch.rand(100_000, generator=g) * 3
    wide[::5] = 0.0
    wide[1::7] = -0.0
    if zero == "max":
        first, wide = -first, -wide
    for x in (first, wide, wide * 0.5):
        ref(x)
        mine.observe(x)
        assert_state(ref, mine)
    assert_qparams(ref, mine)


def test_infinities_are_dropped_as_torch_ao_does():
    ref, mine = pair()
    x = torch.randn(100)
    x[3], x[7] = float("inf"), float("-inf")
    with pytest.warns(UserWarning, match="torch.inf detected"):
        ref(x)
    with pytest.warns(UserWarning, match="HistogramObserver: torch.inf detected"):  # C++'s, in Python
        mine.observe(x)
    assert_state(ref, mine)
    wide = torch.randn(70_000) * 9  # an infinity in a widening batch of several chunks
    wide[40_000] = float("inf")
    with pytest.warns(UserWarning):
        ref(wide)
    with pytest.warns(UserWarning, match="HistogramObserver: torch.inf detected"):
        mine.observe(wide)
    assert_state(ref, mine)
    only_inf = torch.tensor([float("inf"), float("-inf")])
    with pytest.warns(UserWarning):
        ref(only_inf)
    with pytest.warns(UserWarning, match="HistogramObserver: torch.inf detected"):
        mine.observe(only_inf)
    assert_state(ref, mine)
    assert_qparams(ref, mine)


@pytest.mark.parametrize("dtype", ["qint8", "int16"])
def test_quantization_error_matches_for_every_kind_of_bin_range(dtype):
    ref, mine = pair(dtype)
    g = torch.Generator().manual_seed(7)
    for x in (torch.randn(50000, generator=g), torch.randn(3000, generator=g) * 4 + 1):
        ref(x)
        mine.observe(x)
    pairs = [(0, 2047), (0, 0), (2047, 2047), (1023, 1024), (5, 2040)]
    pairs += [tuple(sorted(torch.randint(0, 2048, (2,), generator=g).tolist())) for _ in range(40)]
    for s, e in pairs:
        assert mine._quantization_error(s, e) == ref._compute_quantization_error(s, e), (s, e)


def test_uninitialized_gives_torch_ao_defaults():
    ref, mine = pair()
    assert_qparams(ref, mine)


def test_nan_is_an_error_naming_the_observer():
    _, mine = pair()
    mine.observe(torch.randn(10))
    x = torch.randn(10)
    x[4] = float("nan")
    before = dict(mine.state())
    with pytest.raises(RuntimeError, match="HistogramObserver: the observed tensor holds NaN"):
        mine.observe(x)
    after = dict(mine.state())
    for k in before:
        same(after[k], before[k])  # nothing half-updated
    _, fresh = pair()
    with pytest.raises(RuntimeError, match="NaN"):
        fresh.observe(torch.tensor([float("nan"), 1.0]))


def test_rejects_what_torch_ao_rejects():
    with pytest.raises(RuntimeError, match="per_tensor"):
        Observer("HistogramObserver", "qint8", "per_channel_affine")
    with pytest.raises(RuntimeError, match="bins must be positive"):
        Observer("HistogramObserver", "qint8", bins=0)


def test_merge_of_shards_equals_one_observer_when_ranges_agree():
    g = torch.Generator().manual_seed(3)
    shards = []
    for _ in range(4):
        x = torch.randn(4000, generator=g)
        x[0], x[1] = -5.0, 6.0  # every shard spans the same range, so histograms just add
        shards.append(x)
    whole = Observer("HistogramObserver", "qint8")
    for x in shards:
        whole.observe(x)
    a, b = Observer("HistogramObserver", "qint8"), Observer("HistogramObserver", "qint8")
    for x in shards[:2]:
        a.observe(x)
    for x in shards[2:]:
        b.observe(x)
    a.merge(b)
    for (k, u), (_, v) in zip(a.state(), whole.state()):
        same(u, v)
    same(a.calculate_qparams()[0], whole.calculate_qparams()[0])


def test_merge_into_a_wider_range_keeps_mass_and_range():
    g = torch.Generator().manual_seed(4)
    a, b = Observer("HistogramObserver", "qint8"), Observer("HistogramObserver", "qint8")
    a.observe(torch.randn(3000, generator=g))
    b.observe(torch.randn(5000, generator=g) * 3 + 2)
    empty = Observer("HistogramObserver", "qint8")
    a.merge(empty)  # merging nothing changes nothing
    a.merge(b)
    s = dict(a.state())
    assert float(s["histogram"].sum()) == pytest.approx(8000)
    assert float(s["min_val"]) == min(float(dict(b.state())["min_val"]), float(s["min_val"]))
    assert float(s["max_val"]) == float(dict(b.state())["max_val"])
    with pytest.raises(RuntimeError, match="cannot merge a MinMaxObserver"):
        a.merge(Observer("MinMaxObserver", "qint8"))
    with pytest.raises(RuntimeError, match="2048 bins vs 100"):
        a.merge(Observer("HistogramObserver", "qint8", bins=100))


def test_state_round_trip_and_checks():
    a = Observer("HistogramObserver", "quint8")
    a.observe(torch.randn(2000))
    b = Observer("HistogramObserver", "quint8")
    b.set_state(a.state())
    same(b.calculate_qparams()[0], a.calculate_qparams()[0])
    with pytest.raises(RuntimeError, match="histogram of 2048 bins, this observer has 64"):
        Observer("HistogramObserver", "quint8", bins=64).set_state(a.state())
    with pytest.raises(RuntimeError, match="expected min_val, max_val, histogram; got 2 tensors"):
        b.set_state(a.state()[:2])


def test_a_range_wider_than_fp32_is_an_error_not_a_crash():
    _, mine = pair()
    with pytest.raises(RuntimeError, match=r"range \[-3e\+38, 3e\+38\] is wider than fp32 can represent"):
        mine.observe(torch.tensor([-3e38, 3e38, 1.0]))
    mine.observe(torch.tensor([-3e38, 1.0]))
    with pytest.raises(RuntimeError, match="wider than fp32"):
        mine.observe(torch.tensor([3e38]))
