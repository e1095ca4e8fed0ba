"""F9 (W1 at the paper's widths): the llamas' d_align against width at each snapshot step, beside
Paper W's two values."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from matplotlib.lines import Line2D

from . import common
from .aggregate import one_view
from .common import DPI, _clean, _detection_key, _empty, _estimates, _figure, _finish, _required, _signed
from .paper_values import PAPER_W_DALIGN


def fig_dalign_paper_widths(
    trajectory: pd.DataFrame,
    verdicts: pd.DataFrame,
    out: str | Path,
    *,
    view: str = "full",
    split: str = "train",
    dpi: int = DPI,
) -> None:
    """F9 (W1 at the paper's widths): d_align of the llamas against width (log x), one colour per E10
    snapshot step, every insertion point and seed with its jackknife interval, a line through the median
    at each width; Paper W's two values (3.9 at 512, 9.5 at 3072) marked as black stars; symlog y with a
    zero line; one panel per dataset / depth; the verdict of W1 at the paper's widths under the panels."""
    _required(trajectory, "trajectory", ["step", "view", "split", "d_align", "d_align_lo", "d_align_hi"])
    title = f"Claim W1 at the paper's widths: d_align vs width at each training step (view={view}, split={split})"
    notes: list[str] = []
    llamas = trajectory[trajectory["family"] == "llama"]
    if llamas.empty:
        return _empty(out, title, notes, dpi, verdicts)
    frame, view, split = one_view(llamas, view, split)
    frame = _clean(frame, ["d_align"], notes, why="undetermined: the estimate of ‖μ‖² is ≤ 0")
    panels = [(f"{ds} / llama / depth {depth:g}", part) for (ds, depth), part in frame.groupby(["dataset", "depth"])]
    fig, axes = _figure(1, len(panels), width=5.0, height=3.6)
    paper = Line2D([], [], color="black", marker="*", markersize=9, linestyle="none", label="Paper W (LLaMA)")
    for c, (name, part) in enumerate(panels):
        ax = axes[0, c]
        _estimates(ax, part, "width", "d_align", "step", "step", lo="d_align_lo", hi="d_align_hi", logx=True)
        ax.plot(list(PAPER_W_DALIGN), list(PAPER_W_DALIGN.values()), "k*", markersize=9, zorder=4)
        ticks = [*part["width"], *PAPER_W_DALIGN]
        _finish(ax, "width", "d_align", name, logx=True, xticks=ticks)
        _signed(ax, [*part["d_align"], *PAPER_W_DALIGN.values()])
    common._save(fig, out, title, notes, dpi, verdicts, key=[paper, *_detection_key()])


STEM = "F9_dalign_at_paper_widths"
TABLES = ["trajectory", "verdicts"]  # the tables ``draw`` reads, in its argument order
draw = fig_dalign_paper_widths
