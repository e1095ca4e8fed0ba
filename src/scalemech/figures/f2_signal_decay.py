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


def fig_signal(signal: pd.DataFrame, out: str | Path, *, split: str = "test", dpi: int = DPI) -> None:
    """F2 (claim D2): ‖μ‖² (with its jackknife interval) and the inserted block's gradient norm vs depth (log
    x, ticks at the depths) on ``split``, every insertion point and seed of every model, one colour per
    width, the median where resolved (``resolved_medians``); symlog y with a zero line (negative
    estimates of ‖μ‖² stay in). Families with one depth are left out (``_depth_panels``)."""
    _required(signal, "signal", ["point_index", "split", "mu_sq", "mu_sq_lo", "mu_sq_hi", "block_grad_norm"])
    title = f"Claim D2: does the first-order signal decay with depth? ({split} split; every insertion point; {MEDIAN})"
    notes: list[str] = []
    if signal.empty:
        return _empty(out, title, notes, dpi)
    panels = _depth_panels(signal[signal["split"] == choose(signal, "split", split)], notes)
    if not panels:
        return _empty(out, title, notes, dpi)
    fig, axes = _figure(len(SIGNALS), len(panels), width=4.0)
    for c, (name, part) in enumerate(panels):
        for r, (quantity, (label, lo, hi)) in enumerate(SIGNALS.items()):
            kept = _clean(part, [quantity], notes, why="no estimate")
            _estimates(axes[r, c], kept, "depth", quantity, "width", "width", lo=lo, hi=hi, logx=True)
            _finish(
                axes[r, c],
                "depth (layers, log scale)",
                label,
                name,
                logx=True,
                xticks=kept["depth"],
                extra=_detection_key() if lo else (),
                outside=True,
            )
            _signed(axes[r, c], kept[quantity])
    common._save(fig, out, title, notes, dpi)


STEM = "F2_signal_decay"
TABLES = ["signal"]  # the tables ``draw`` reads, in its argument order
draw = fig_signal
