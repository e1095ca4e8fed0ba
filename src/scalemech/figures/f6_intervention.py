"""F6 (claim W4): observed / predicted test-loss change at each model's smallest step, against width."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes

from ..core.tables import model_keys
from . import common
from .common import DPI, _clean, _detection_key, _empty, _estimates, _figure, _finish, _panels, _required, _signed

POOLS = {"ratio": "same pool (implementation check)", "ratio_heldout": "held out (the W4 verdict)"}


def smallest_step(intervention: pd.DataFrame) -> pd.DataFrame:
    """Rows at the smallest η of each model × insertion point × view (the rows the W4 verdict reads)."""
    series = model_keys() + ["point_index", "view"]
    return intervention[intervention["eta"] == intervention.groupby(series)["eta"].transform("min")]


def _per_model(frame: pd.DataFrame, value: str) -> pd.DataFrame:
    """One row per model × view: the median of ``value`` over insertion points, their range as ``lo``–``hi``."""
    groups = frame.groupby(model_keys() + ["view"], as_index=False)[value]
    return groups.agg(**{value: "median", "lo": "min", "hi": "max"})


def _ratio_axis(ax: Axes, values: pd.Series) -> None:
    """A linear y axis with a zero line; symlog (``_signed``) where |values| reach beyond ten times their
    median, so that a few large ratios do not flatten the rest."""
    size = np.abs(values.to_numpy(float))
    if len(size) and size.max() > 10 * np.median(size):
        _signed(ax, values)
    else:
        ax.axhline(0, color="black", linewidth=0.8)


def fig_intervention(intervention: pd.DataFrame, verdicts: pd.DataFrame, out: str | Path, *, dpi: int = DPI) -> None:
    """F6 (claim W4): observed / predicted loss change at each model's smallest η, on the same test pool
    (a first-order consistency check of the implementation) and held out (prediction from test pool A,
    outcome on pool B), against width: one marker per model and view (the median over its insertion
    points, bar: their range; filled where the range excludes 0), one colour per depth, the median
    where resolved; a zero line and a reference line at ratio 1 (symlog y where a few ratios are large).
    One row per dataset/family, W4's verdict under the panels."""
    _required(intervention, "intervention", ["point_index", "view", "eta", *POOLS])
    title = "Claim W4: observed / predicted test-loss change at the smallest step η (ratio > 0: signs agree)"
    notes: list[str] = []
    frame = smallest_step(_clean(intervention, ["eta"], notes))
    if frame.empty:
        return _empty(out, title, notes, dpi, verdicts)
    views = sorted(frame["view"].unique())
    panels = _panels(frame)
    fig, axes = _figure(len(panels), len(POOLS) * len(views), width=3.4)
    for r, (name, part) in enumerate(panels):
        for p, (value, pool) in enumerate(POOLS.items()):
            models = _per_model(_clean(part, [value], notes, why="no measurement"), value)
            for v, view in enumerate(views):
                ax = axes[r, p * len(views) + v]
                shown = models[models["view"] == view]
                _estimates(ax, shown, "width", value, "depth", "depth", lo="lo", hi="hi", logx=True)
                ax.axhline(1, color="black", linewidth=0.8, linestyle="--", label="ratio 1")
                last = ax is axes[r, -1]
                _finish(ax, "width", "observed / predicted (unitless)", f"{name}, view {view}\n{pool}", logx=True,
                        xticks=part["width"], legend=last)  # fmt: skip
                _ratio_axis(ax, pd.concat([shown[value], shown["lo"], shown["hi"]]))
    common._save(fig, out, title, notes, dpi, verdicts, key=_detection_key())


STEM = "F6_intervention"
TABLES = ["intervention", "verdicts"]  # the tables ``draw`` reads, in its argument order
draw = fig_intervention
