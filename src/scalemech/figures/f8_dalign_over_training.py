"""F8 (E10): d_align along training, against the step and against the snapshot's train loss."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from . import common
from .aggregate import one_view
from .common import DPI, MEDIAN, _clean, _detection_key, _empty, _estimates, _figure, _finish, _required, _signed


def fig_trajectory(
    trajectory: pd.DataFrame,
    verdicts: pd.DataFrame,
    out: str | Path,
    *,
    view: str = "full",
    split: str = "train",
    dpi: int = DPI,
) -> None:
    """F8 (E10, W1 along training): d_align against the training step (symlog x, so step 0 shows) and,
    in a second row, against the snapshot's train loss (widths compared at equal fit); every insertion
    point with its jackknife interval (filled where it excludes 0), one colour per width, the median where
    resolved; symlog y with a zero line; one column per dataset / family / depth, each family's widths in
    their own legend (on its last column); the verdict of W1 along training under the panels."""
    _required(trajectory, "trajectory", ["step", "train_loss", "view", "split", "d_align", "d_align_lo", "d_align_hi"])
    title = f"E10: d_align along training (view={view}, split={split}; every insertion point; {MEDIAN})"
    notes: list[str] = []
    if trajectory.empty:
        return _empty(out, title, notes, dpi, verdicts)
    frame, view, split = one_view(trajectory, view, split)
    frame = _clean(frame, ["d_align"], notes, why="undetermined: the estimate of ‖μ‖² is ≤ 0")
    columns = [
        (f"{ds} / {fam} / depth {depth:g}", part)
        for (ds, fam, depth), part in frame.groupby(["dataset", "family", "depth"], sort=True)
    ]
    fig, axes = _figure(2, len(columns), width=4.0)
    for c, (name, part) in enumerate(columns):
        for r, (x, label) in enumerate((("step", "training step"), ("train_loss", "train loss (pool)"))):
            ax = axes[r, c]
            _estimates(ax, part, x, "d_align", "width", "width", lo="d_align_lo", hi="d_align_hi")
            if x == "step":
                ax.set_xscale("symlog", linthresh=1)
                ax.xaxis.set_major_formatter(common.OneFormat())
            else:
                ax.invert_xaxis()  # training lowers the loss: progress reads left to right
            last = c == len(columns) - 1 or columns[c + 1][0].rsplit(" / ", 1)[0] != name.rsplit(" / ", 1)[0]
            _finish(ax, label, "d_align (unitless)", name, legend=r == 0 and last)  # one legend per family
            _signed(ax, part["d_align"])
    common._save(fig, out, title, notes, dpi, verdicts, key=_detection_key())


STEM = "F8_dalign_over_training"
TABLES = ["trajectory", "verdicts"]  # the tables ``draw`` reads, in its argument order
draw = fig_trajectory
