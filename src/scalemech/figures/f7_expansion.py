"""F7 (E8): the gain of an inserted zero-init block over the same extra training, against relative depth."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from matplotlib.lines import Line2D

from . import common
from .common import (
    DPI,
    RELATIVE,
    _at_relative_depth,
    _clean,
    _detection_key,
    _empty,
    _estimates,
    _figure,
    _finish,
    _panels,
    _required,
)

GAIN_SE = "se_test_selected_minus_control"  # evaluation SE of the gain (E8's verdict reads ±2 of it)


def expansion_gain(expansion: pd.DataFrame) -> pd.DataFrame:
    """``expansion`` with ``gain`` = L_test(control) − L_test(selected) (> 0: the inserted block beat the
    same extra training of the old model) and its ±2 SE bounds ``gain_lo``/``gain_hi``."""
    gain = expansion["test_loss_control"] - expansion["test_loss_selected"]
    margin = 2 * expansion[GAIN_SE]
    return expansion.assign(gain=gain, gain_lo=gain - margin, gain_hi=gain + margin)


def fig_expansion(expansion: pd.DataFrame, out: str | Path, *, dpi: int = DPI) -> None:
    """F7 (E8, the Paper D mechanism behind D3): the gain L_test(control) − L_test(selected) of each model
    × insertion point with its ±2 SE bar (the E8 rule's), against the point's relative depth l/L, one
    colour per width (``_estimates``: filled where the bar excludes 0); × marks points where fallback
    was used."""
    _required(
        expansion,
        "expansion",
        ["point_index", "test_loss_selected", "test_loss_control", "fallback", GAIN_SE],
    )
    title = "E8, Paper D mechanism: does an inserted zero-init block beat the same extra training? (gain ± 2 SE)"
    notes: list[str] = []
    frame = _at_relative_depth(_clean(expansion, ["test_loss_control", "test_loss_selected", GAIN_SE], notes), notes)
    if frame.empty:
        return _empty(out, title, notes, dpi)
    frame = expansion_gain(frame)
    panels = _panels(frame)
    fig, axes = _figure(1, len(panels), width=4.6, height=3.4)
    for c, (name, part) in enumerate(panels):
        ax = axes[0, c]
        _estimates(ax, part, "relative_depth", "gain", "width", "width", lo="gain_lo", hi="gain_hi", two_sided=True)
        fell = part[part["fallback"].fillna(False).astype(bool)]
        ax.scatter(fell["relative_depth"], fell["gain"], marker="x", s=60, color="black", zorder=3)
        ax.axhline(0, color="black", linewidth=1)
        fallback = [Line2D([], [], color="black", linestyle="none", marker="x", label="fallback used")]
        _finish(
            ax,
            RELATIVE,
            "gain (nats): test loss of\ncontrol − selected expanded model",
            name,
            extra=_detection_key() + fallback,
            outside=True,
            legend=c == len(panels) - 1,
        )
    common._save(fig, out, title, notes, dpi)


STEM = "F7_expansion"
TABLES = ["expansion"]  # the tables ``draw`` reads, in its argument order
draw = fig_expansion
