"""F4 (claim W1): d_align, d_∥ and d_2 against width."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.lines import Line2D

from . import common
from .aggregate import one_view
from .common import (
    DPI,
    MEDIAN,
    _clean,
    _detection_key,
    _empty,
    _estimates,
    _figure,
    _finish,
    _panels,
    _required,
    _signed,
)

UNBOUNDED_KEY = [Line2D([], [], color="black", marker="^", linestyle="none", label="+∞ (along the top edge)")]


def _unbounded(ax: Axes, frame: pd.DataFrame, x: str, y: str, notes: list[str]) -> bool:
    """Rows of ``frame`` (all ``y`` = +∞: a denominator estimate ≤ 0, no detectable spread) as black
    triangles along the top edge of ``ax`` at their ``x``, with a note; whether there were any."""
    if frame.empty:
        return False
    ax.plot(
        frame[x],
        np.full(len(frame), 0.96),  # axes coordinates: just inside the top edge
        transform=ax.get_xaxis_transform(),
        linestyle="none",
        marker="^",
        color="black",
        zorder=3,
    )
    notes.append(f"{len(frame)} row(s) with {y} = +∞ (denominator estimate ≤ 0) drawn as ▲ along the top edge")
    return True


DIMENSIONS = {"d_align": "d_align = min(d_∥, d_2)", "d_par": "d_∥ = ‖μ‖⁴ / μᵀΣμ", "d_2": "d_2 = ‖μ‖⁴ / tr(Σ²)"}


def fig_dalign(
    dalign: pd.DataFrame,
    verdicts: pd.DataFrame,
    out: str | Path,
    *,
    view: str = "full",
    split: str = "train",
    dpi: int = DPI,
) -> None:
    """F4 (claim W1): d_align, d_∥, d_2 vs width (log x, symlog y with a zero line), every insertion
    point and seed with its jackknife interval, one colour per depth, the median where resolved over
    all of them; one row per dataset/family (each its own depths' colours). NaN (the ‖μ‖² estimate ≤ 0) is
    counted in a note; W1's verdict under the panels."""
    bounds = [f"{q}_{b}" for q in DIMENSIONS for b in ("lo", "hi")]
    _required(dalign, "dalign", ["point_index", "view", "split", *DIMENSIONS, *bounds])
    title = f"Claim W1: does d_align grow with width? (view={view}, split={split}; every insertion point; {MEDIAN})"
    notes: list[str] = []
    if dalign.empty:
        return _empty(out, title, notes, dpi, verdicts)
    frame, view, split = one_view(dalign, view, split)
    if frame.empty:
        raise ValueError(f"dalign has no rows with view={view!r} and split={split!r} together")
    panels = _panels(frame)
    fig, axes = _figure(len(panels), len(DIMENSIONS), width=4.0)
    unbounded = False
    for r, (name, part) in enumerate(panels):
        for c, (quantity, label) in enumerate(DIMENSIONS.items()):
            infinite = np.isposinf(part[quantity].astype(float))
            unbounded |= _unbounded(axes[r, c], part[infinite], "width", quantity, notes)
            kept = _clean(part[~infinite], [quantity], notes, why="undetermined: the estimate of ‖μ‖² is ≤ 0")
            _estimates(
                axes[r, c],
                kept,
                "width",
                quantity,
                "depth",
                "depth",
                lo=f"{quantity}_lo",
                hi=f"{quantity}_hi",
                logx=True,
            )
            last = c == len(DIMENSIONS) - 1  # one legend per row: its family's depths
            _finish(axes[r, c], "width", label, name, logx=True, xticks=part["width"], legend=last)
            _signed(axes[r, c], kept[quantity])
    common._save(fig, out, title, notes, dpi, verdicts, key=_detection_key() + (UNBOUNDED_KEY if unbounded else []))


STEM = "F4_dalign_vs_width"
TABLES = ["dalign", "verdicts"]  # the tables ``draw`` reads, in its argument order
draw = fig_dalign
