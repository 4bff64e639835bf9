"""pt2q.report: a per-layer table of what the MX fake-quant modules of a prepared model recorded
during calibration (those made with `observe=True`), and a PNG of their block-exponent
histograms when matplotlib is installed."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from pt2q.observer_mx import EXP_MIN, MXFakeQuantize

_COLUMNS = ("module", "observes", "format", "block", "axis", "calls", "elements", "SQNR dB", "saturated %",
            "underflow %", "NaN blocks", "zero blocks", "block exp range")


@dataclass
class Report:
    """`rows`: one dict per observing MX module (keys: _COLUMNS, plus "exp_hist", the block
    counts per block-max exponent from EXP_MIN). str() is the table."""

    rows: list = field(default_factory=list)

    def __str__(self) -> str:
        if not self.rows:
            return "(no MX module with observe=True saw data)"
        cells = [[_cell(r[c]) for c in _COLUMNS] for r in self.rows]
        widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(_COLUMNS)]
        line = lambda vals: "| " + " | ".join(v.ljust(w) for v, w in zip(vals, widths)) + " |"  # noqa: E731
        return "\n".join([line(_COLUMNS), "|" + "|".join("-" * (w + 2) for w in widths) + "|"] +
                         [line(r) for r in cells])

    def plot(self, path: str) -> bool:
        """Writes the block-exponent histograms (one row per module) to `path` as a PNG; False
        (and nothing written) when matplotlib is not installed."""
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            return False
        fig, axes = plt.subplots(len(self.rows), 1, figsize=(8, 1.6 * max(1, len(self.rows))), squeeze=False)
        for ax, r in zip(axes[:, 0], self.rows):
            hist = r["exp_hist"]
            nz = [i for i, v in enumerate(hist) if v]
            lo, hi = (nz[0], nz[-1]) if nz else (0, 0)
            ax.bar([EXP_MIN + i for i in range(lo, hi + 1)], hist[lo:hi + 1], width=0.9)
            ax.set_title(f"{r['module']} ({r['observes']}): {r['format']}, SQNR {_cell(r['SQNR dB'])} dB",
                         fontsize=8)
            ax.tick_params(labelsize=7)
        axes[-1, 0].set_xlabel("block-max exponent floor(log2 max|x|)")
        fig.tight_layout()
        fig.savefig(path, dpi=100)
        plt.close(fig)
        return True


def _cell(v) -> str:
    if isinstance(v, float):
        return "inf" if math.isinf(v) else ("nan" if math.isnan(v) else f"{v:.2f}")
    return str(v)


def report(model: torch.nn.Module) -> Report:
    """The statistics of every MXFakeQuantize in `model` (a model from prepare_pt2e with an
    MXQuantizer whose config has observe=True), in module order."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"pt2q.report takes a prepared model (torch.nn.Module), got {type(model).__name__}")
    rows = []
    for name, m in model.named_modules():
        if not isinstance(m, MXFakeQuantize) or not m.observe:
            continue
        pct = lambda k: 100.0 * k / m.elements if m.elements else 0.0  # noqa: E731
        hist = m.exp_hist.tolist()
        nz = [i + EXP_MIN for i, v in enumerate(hist) if v]
        rows.append({"module": name, "observes": ", ".join(getattr(m, "_pt2q_observing", []) or ["?"]),
                     "format": m.elem_format, "block": m.block_size, "axis": m.axis, "calls": m.calls,
                     "elements": m.elements, "SQNR dB": m.sqnr_db() if m.calls else math.nan,
                     "saturated %": pct(m.saturated), "underflow %": pct(m.underflowed),
                     "NaN blocks": m.nan_blocks, "zero blocks": m.zero_blocks,
                     "block exp range": f"{nz[0]}..{nz[-1]}" if nz else "-", "exp_hist": hist})
    if not any(isinstance(m, MXFakeQuantize) for m in model.modules()):
        raise ValueError("pt2q.report: the model has no MX fake-quant modules; prepare it with "
                         "prepare_pt2e(model, MXQuantizer().set_global(MXQuantizationConfig(..., observe=True)))")
    return Report(rows)
