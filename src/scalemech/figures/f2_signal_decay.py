"""F2 (claim D2): the first-order signal (‖μ‖² and the new block's gradient norm) against depth."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from . import common
from .aggregate import choose
from .common import (
    DPI,
    MEDIAN,
    _clean,
    _depth_panels,
    _detection_key,
    _empty,
    _estimates,
    _figure,
    _finish,
    _required,
    _signed,
)

SIGNALS = {
    "mu_sq": ("‖μ‖² (activation-gradient mean)", "mu_sq_lo", "mu_sq_hi"),
    "block_grad_norm": ("‖∇θ L‖, new block at θ = 0", None, None),
}


def fig_signal(
    signal: pd.DataFrame, verdicts: pd.DataFrame, out: str | Path, *, split: str = "test", dpi: int = DPI
) -> None:
    """F2 (claim D2): ‖μ‖² (with its jackknife interval) and the inserted block's gradient norm vs depth (log
    x, ticks at the depths) on ``split``, every insertion point and seed of every model, one colour per
    width (each family its own scale), the median where resolved (``resolved_medians``); symlog y with a
    zero line (negative estimates of ‖μ‖² stay in). One row per dataset/family with more than one depth
    (``_depth_panels``); D2's verdict under the panels."""
    _required(signal, "signal", ["point_index", "split", "mu_sq", "mu_sq_lo", "mu_sq_hi", "block_grad_norm"])
    title = f"Claim D2: does the first-order signal decay with depth? ({split} split; every insertion point; {MEDIAN})"
    notes: list[str] = []
    if signal.empty:
        return _empty(out, title, notes, dpi, verdicts)
    panels = _depth_panels(signal[signal["split"] == choose(signal, "split", split)], notes)
    if not panels:
        return _empty(out, title, notes, dpi, verdicts)
    fig, axes = _figure(len(panels), len(SIGNALS), width=4.2, height=3.0)
    for r, (name, part) in enumerate(panels):
        for c, (quantity, (label, lo, hi)) in enumerate(SIGNALS.items()):
            kept = _clean(part, [quantity], notes, why="no estimate")
            _estimates(axes[r, c], kept, "depth", quantity, "width", "width", lo=lo, hi=hi, logx=True)
            _finish(axes[r, c], "depth (layers, log scale)", label, name, logx=True, xticks=kept["depth"],
                    legend=c == len(SIGNALS) - 1)  # fmt: skip
            _signed(axes[r, c], kept[quantity])
    common._save(fig, out, title, notes, dpi, verdicts, key=_detection_key())


STEM = "F2_signal_decay"
TABLES = ["signal", "verdicts"]  # the tables ``draw`` reads, in its argument order
draw = fig_signal
