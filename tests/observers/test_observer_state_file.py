"""Observer state files: every observer class round-trips (statistics bit for bit, same qparams,
and the loaded observer keeps calibrating the same way), and damaged or foreign bytes fail with
an error naming the source and observer, never a crash."""

import pytest
import torch

import pt2q.observer
from pt2q._C import observers as O


def calibrated():
    g = torch.Generator().manual_seed(0)
    obs = [
        ("mm", O.Observer("MinMaxObserver", "quint8")),
        ("ma", O.Observer("MovingAverageMinMaxObserver", "qint8", "per_tensor_symmetric", averaging_constant=0.1)),
        ("pc", O.Observer("PerChannelMinMaxObserver", "qint8", "per_channel_symmetric", ch_axis=1,
                          quant_min=-127, quant_max=127)),
        ("mapc", O.Observer("MovingAveragePerChannelMinMaxObserver", "quint8", "per_channel_affine")),
        ("hist", O.Observer("HistogramObserver", "quint8", reduce_range=True)),
        ("fixed", O.Observer("FixedQParamsObserver", "quint8", scale=1 / 256, zero_point=0, quant_min=0,
                             quant_max=255)),
        ("ph", O.Observer("PlaceholderObserver", "int8", quant_min=-128, quant_max=127)),
        ("fresh", O.Observer("HistogramObserver", "qint8")),  # nothing observed yet
    ]
    for _, o in obs[:5]:
        for _ in range(3):
            o.observe(torch.randn(6, 4, 5, generator=g) * 3)
    return obs


def test_round_trip_keeps_everything():
    obs = calibrated()
    back = O.deserialize(O.serialize(obs), "mem")
    assert [n for n, _ in back] == [n for n, _ in obs]
    g = torch.Generator().manual_seed(1)
    more = torch.randn(6, 4, 5, generator=g) * 5
    for (_, a), (_, b) in zip(obs, back):
        assert (a.kind, a.dtype, a.qscheme, a.qrange) == (b.kind, b.dtype, b.qscheme, b.qrange)
        for (n1, t1), (n2, t2) in zip(a.state(), b.state()):
            assert n1 == n2 and t1.dtype == t2.dtype and torch.equal(t1, t2)
        if a.kind == "PlaceholderObserver":
            continue
        assert all(torch.equal(x, y) for x, y in zip(a.calculate_qparams(), b.calculate_qparams()))
        a.observe(more)
        b.observe(more)
        assert all(torch.equal(x, y) for x, y in zip(a.calculate_qparams(), b.calculate_qparams()))


def test_foreign_and_damaged_bytes_fail_cleanly():
    data = O.serialize(calibrated())
    with pytest.raises(RuntimeError, match=r"calib\.bin is not a pt2q observer state file"):
        O.deserialize(b"PT2QGRPH" + data[8:], "calib.bin")
    failures = 0
    for cut in range(9, len(data), max(1, len(data) // 97)):
        try:
            O.deserialize(data[:cut], "cut")
        except RuntimeError as e:
            failures += 1
            assert "cut" in str(e)
    assert failures > 80  # nearly every truncation is detected, and none crashes
    flipped = bytearray(data)
    for i in range(20, len(flipped), 37):
        flipped[i] ^= 0x5A
    try:
        O.deserialize(bytes(flipped), "flip")
    except RuntimeError as e:
        assert "flip" in str(e)


def test_state_that_does_not_fit_the_observer_names_it():
    hist = O.Observer("HistogramObserver", "qint8", bins=16)
    hist.observe(torch.randn(100))
    data = O.serialize([("activation_post_process_7", hist)])
    bad = data.replace(b"HistogramObserver", b"HistogramObservor")
    with pytest.raises(RuntimeError, match=r'f: observer "activation_post_process_7" \(HistogramObservor\): '
                                           r"unknown observer class"):
        O.deserialize(bad, "f")
    # a histogram tensor renamed: the observer's own state check, prefixed with where it is
    bad = data.replace(b"histogram\x12", b"histograx\x12")
    assert bad != data
    with pytest.raises(RuntimeError, match=r'f: observer "activation_post_process_7" \(HistogramObserver\): '
                                           r".*expected min_val, max_val, histogram; got 'histograx'"):
        O.deserialize(bad, "f")


def test_set_state_checks_dtype_and_shape():
    pc = O.Observer("PerChannelMinMaxObserver", "qint8", "per_channel_affine")
    with pytest.raises(RuntimeError, match="must be float32"):
        pc.set_state([("min_val", torch.zeros(3, dtype=torch.int32)), ("max_val", torch.zeros(3, dtype=torch.int32))])
    with pytest.raises(RuntimeError, match="must both be 1-d"):
        pc.set_state([("min_val", torch.zeros(3)), ("max_val", torch.zeros(4))])
    mm = O.Observer("MinMaxObserver", "qint8")
    with pytest.raises(RuntimeError, match="must both be 0-d"):
        mm.set_state([("min_val", torch.zeros(3)), ("max_val", torch.zeros(3))])
    with pytest.raises(RuntimeError, match="expected min_val, max_val; got 'max_val' at position 0"):
        mm.set_state([("max_val", torch.tensor(0.0)), ("min_val", torch.tensor(0.0))])


@pytest.mark.parametrize("make", [lambda: pt2q.observer.MinMaxObserver(),
                                  lambda: pt2q.observer.MovingAverageMinMaxObserver(averaging_constant=0.3),
                                  lambda: pt2q.observer.PerChannelMinMaxObserver(ch_axis=1, dtype=torch.qint8,
                                                                                 qscheme=torch.per_channel_symmetric),
                                  lambda: pt2q.observer.HistogramObserver()],
                         ids=["minmax", "moving_average", "per_channel", "histogram"])
def test_deepcopy_and_pickle_carry_the_statistics(make):
    """A copied or unpickled observer (copy.deepcopy of a prepared model) continues exactly as the
    original: same qparams after more data, against torch.ao's observer fed the same batches."""
    import copy
    import pickle

    torch.manual_seed(0)
    o = make()
    ref = getattr(torch.ao.quantization.observer, type(o).__name__)(
        **{k: getattr(o, k) for k in ("dtype", "qscheme")},
        **({"ch_axis": 1} if "PerChannel" in type(o).__name__ else {}),
        **({"averaging_constant": 0.3} if "MovingAverage" in type(o).__name__ else {}))
    assert copy.deepcopy(o)._unobserved()
    batches = [torch.randn(6, 5) * (1 + i) for i in range(3)]
    o(batches[0])
    ref(batches[0])
    copies = [copy.deepcopy(o), pickle.loads(pickle.dumps(o))]
    for b in batches[1:]:
        for m in [o, ref, *copies]:
            m(b)
    want = ref.calculate_qparams()
    for m in [o, *copies]:
        got = m.calculate_qparams()
        assert all(torch.equal(g, w) for g, w in zip(got, want))
