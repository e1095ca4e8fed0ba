"""F7 (E8): the gain of an inserted zero-init block over the same extra training, against relative depth
(the final snapshot's rows of E11's ``growth`` table, whose arms are E8's)."""

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

GAIN, GAIN_SE = "gain_tokens", "gain_tokens_se"  # L(control, equal steps) − L(grown) and its paired SE


def fig_expansion(growth: pd.DataFrame, verdicts: pd.DataFrame, out: str | Path, *, dpi: int = DPI) -> None:
    """F7 (E8, the Paper D mechanism behind D3): at the final snapshot, the gain L_test(control) −
    L_test(grown) of each model × insertion point with its ±2 SE bar (the E8 rule's), against the point's
    relative depth l/L, one colour per width (``_estimates``: filled where the bar excludes 0); × marks
    points where fallback was used. One panel per dataset/family, each with its own widths' legend; E8's
    verdict under the panels."""
    _required(growth, "growth", ["snapshot", "point_index", GAIN, GAIN_SE, "fallback"])
    title = "E8, Paper D mechanism: does an inserted zero-init block beat the same extra training? (gain ± 2 SE)"
    notes: list[str] = []
    final = growth[growth["snapshot"] == "final"]
    frame = _at_relative_depth(_clean(final, [GAIN, GAIN_SE], notes), notes)
    if frame.empty:
        return _empty(out, title, notes, dpi, verdicts)
    margin = 2 * frame[GAIN_SE]
    frame = frame.assign(gain=frame[GAIN], gain_lo=frame[GAIN] - margin, gain_hi=frame[GAIN] + margin)
    panels = _panels(frame)
    fig, axes = _figure(1, len(panels), width=4.6, height=3.4)
    for c, (name, part) in enumerate(panels):
        ax = axes[0, c]
        _estimates(ax, part, "relative_depth", "gain", "width", "width", lo="gain_lo", hi="gain_hi", two_sided=True)
        fell = part[part["fallback"].fillna(False).astype(bool)]
        ax.scatter(fell["relative_depth"], fell["gain"], marker="x", s=60, color="black", zorder=3)
        ax.axhline(0, color="black", linewidth=1)
        _finish(ax, RELATIVE, "gain (nats): test loss of\ncontrol − grown model", name)
    fallback = [Line2D([], [], color="black", linestyle="none", marker="x", label="fallback used")]
    common._save(fig, out, title, notes, dpi, verdicts, key=_detection_key() + fallback)


STEM = "F7_expansion"
TABLES = ["growth", "verdicts"]  # the tables ``draw`` reads, in its argument order
draw = fig_expansion
