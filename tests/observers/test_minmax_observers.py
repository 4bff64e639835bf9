"""pt2q's C++ MinMax-family observers against torch.ao's, bit for bit: running statistics and
qparams over dtypes, qschemes, reduce_range, customized ranges and adversarial batches."""

import pytest
import torch
import torch.ao.quantization.observer as tao

from pt2q._C.observers import Observer

DTYPES = {"quint8": torch.quint8, "qint8": torch.qint8, "int16": torch.int16, "uint16": torch.uint16}
PER_TENSOR = ["MinMaxObserver", "MovingAverageMinMaxObserver"]
PER_CHANNEL = ["PerChannelMinMaxObserver", "MovingAveragePerChannelMinMaxObserver"]


def batches(seed, shape=(4, 6, 5)):
    g = torch.Generator().manual_seed(seed)
    out = [torch.randn(shape, generator=g) * s for s in (0.01, 1.0, 300.0)]
    out.append(torch.full(shape, 0.75))                                # constant
    out.append(torch.zeros(shape))                                     # all zeros
    out.append(torch.randn(shape, generator=g) * 1e-30)                # scale would fall below eps
    tie = torch.zeros(shape)
    tie.view(-1)[0], tie.view(-1)[1] = -1.0, 3.0                       # zp = -128 - round(-63.75)
    out.append(tie)
    out.append(torch.randn(shape, generator=g).abs() + 1.0)            # strictly positive
    out.append(torch.randn(shape, generator=g).to(torch.bfloat16))     # converted to fp32 first
    return out


def same(a, b):
    assert a.dtype == b.dtype, (a.dtype, b.dtype)
    assert a.shape == b.shape, (a.shape, b.shape)
    if a.dtype.is_floating_point:
        assert torch.equal(a.view(torch.int32), b.view(torch.int32)), (a, b)
    else:
        assert torch.equal(a, b), (a, b)


def check(cls, dtype, qscheme, ranges, reduce_range, ch_axis=None):
    if reduce_range and dtype == "quint8" and qscheme == "per_tensor_symmetric":
        # torch.ao refuses it; so does pt2q
        with pytest.raises(NotImplementedError):
            getattr(tao, cls)(dtype=torch.quint8, qscheme=torch.per_tensor_symmetric, reduce_range=True)
        with pytest.raises(RuntimeError, match="cannot reduce the range of symmetric quantization to quint8"):
            Observer(cls, dtype, qscheme, reduce_range=True)
        return
    kwargs = dict(dtype=DTYPES[dtype], qscheme=getattr(torch, qscheme), reduce_range=reduce_range)
    if ranges:
        kwargs.update(quant_min=ranges[0], quant_max=ranges[1])
    if ch_axis is not None:
        kwargs["ch_axis"] = ch_axis
    ref = getattr(tao, cls)(**kwargs)
    mine = Observer(cls, dtype, qscheme, quant_min=ranges[0] if ranges else None,
                    quant_max=ranges[1] if ranges else None, reduce_range=reduce_range,
                    ch_axis=ch_axis if ch_axis is not None else 0)
    for i, x in enumerate(batches(hash((cls, dtype, qscheme)) & 0xFFFF)):
        ref(x)
        mine.observe(x)
        same(mine.min_val, ref.min_val)
        same(mine.max_val, ref.max_val)
        s, z = ref.calculate_qparams()
        ms, mz = mine.calculate_qparams()
        same(ms, s)
        same(mz, z)


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("reduce_range", [False, True])
@pytest.mark.parametrize("qscheme", ["per_tensor_affine", "per_tensor_symmetric"])
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("cls", PER_TENSOR)
def test_per_tensor_matches_torch_ao(cls, dtype, qscheme, reduce_range):
    check(cls, dtype, qscheme, None, reduce_range)


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("ranges", [(-127, 127), (0, 127), (-8, 7), (0, 15)])
@pytest.mark.parametrize("qscheme", ["per_tensor_affine", "per_tensor_symmetric"])
def test_customized_ranges_match_torch_ao(ranges, qscheme):
    dtype = "quint8" if ranges[0] == 0 else "qint8"
    for reduce_range in (False, True):
        check("MinMaxObserver", dtype, qscheme, ranges, reduce_range)


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("ch_axis", [0, 1, 2, -1])
@pytest.mark.parametrize("qscheme", ["per_channel_affine", "per_channel_symmetric", "per_channel_affine_float_qparams"])
@pytest.mark.parametrize("cls", PER_CHANNEL)
def test_per_channel_matches_torch_ao(cls, qscheme, ch_axis):
    dtype = "quint8" if qscheme == "per_channel_affine_float_qparams" else "qint8"
    check(cls, dtype, qscheme, None, False, ch_axis)


def test_nothing_observed_gives_the_neutral_qparams():
    for cls, q in (("MinMaxObserver", "per_tensor_affine"), ("PerChannelMinMaxObserver", "per_channel_affine")):
        s, z = Observer(cls, "qint8", q).calculate_qparams()
        assert torch.equal(s, torch.tensor([1.0])) and torch.equal(z, torch.tensor([0]))


def test_merge_equals_observing_everything():
    xs = batches(3)
    for cls, q in (("MinMaxObserver", "per_tensor_affine"), ("PerChannelMinMaxObserver", "per_channel_symmetric")):
        whole, a, b = (Observer(cls, "qint8", q) for _ in range(3))
        for x in xs:
            whole.observe(x)
        for x in xs[:4]:
            a.observe(x)
        for x in xs[4:]:
            b.observe(x)
        a.merge(b)
        same(a.min_val, whole.min_val)
        same(a.max_val, whole.max_val)
        for p, q2 in zip(a.calculate_qparams(), whole.calculate_qparams()):
            same(p, q2)


def test_errors_name_what_is_wrong():
    with pytest.raises(RuntimeError, match="unknown observer class 'HistogramObserverX'"):
        Observer("HistogramObserverX")
    with pytest.raises(RuntimeError, match=r"the range \[1, 10\] must include 0"):
        Observer("MinMaxObserver", "quint8", quant_min=1, quant_max=10)
    with pytest.raises(RuntimeError, match="takes a per-tensor qscheme"):
        Observer("MinMaxObserver", "qint8", "per_channel_affine")
    with pytest.raises(ValueError, match="unknown qscheme 'per_tensor_afine'"):
        Observer("MinMaxObserver", "qint8", "per_tensor_afine")
    a = Observer("PerChannelMinMaxObserver", "qint8", "per_channel_affine")
    a.observe(torch.randn(3, 4))
    b = Observer("PerChannelMinMaxObserver", "qint8", "per_channel_affine")
    b.observe(torch.randn(5, 4))
    with pytest.raises(RuntimeError, match="3 channels vs 5"):
        a.merge(b)
    with pytest.raises(RuntimeError, match="4 channels now, 3 before"):
        a.observe(torch.randn(4, 4))
    with pytest.raises(RuntimeError, match="a MinMaxObserver cannot merge a PerChannelMinMaxObserver"):
        Observer("MinMaxObserver").merge(a)


@pytest.mark.parametrize("dtype", ["quint8", "qint8"])
def test_zero_point_rounds_half_to_even(dtype):
    # range [-3, 507]: scale = 510 / 255 = 2 exactly, min / scale = -1.5, a tie that
    # round-half-to-even sends to -2 (round-half-up would give -1).
    x = torch.tensor([-3.0, 0.0, 507.0])
    ref = tao.MinMaxObserver(dtype=DTYPES[dtype])
    ref(x)
    mine = Observer("MinMaxObserver", dtype)
    mine.observe(x)
    s, z = ref.calculate_qparams()
    ms, mz = mine.calculate_qparams()
    same(ms, s)
    same(mz, z)
    assert float(s) == 2.0 and int(z) == (-128 if dtype == "qint8" else 0) + 2
