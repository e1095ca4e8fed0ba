"""A figure's layout as a reader sees it, checked apart from the drawing code: every panel plots data, no
legend box lies over a point its panel plots, and the figure states its claims' verdicts as the verdict
table gives them. ``drawn`` keeps the figures ``common._save`` writes while a test runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.axes import Axes
from matplotlib.collections import LineCollection, PathCollection
from matplotlib.figure import Figure
from matplotlib.transforms import Bbox

from scalemech.figures import common


def drawn(monkeypatch: pytest.MonkeyPatch) -> dict[str, Figure]:
    """``{file stem: figure}`` of every figure saved (through ``common._save``) while the test runs."""
    figures: dict[str, Figure] = {}
    save = common._save

    def kept(fig: Figure, out: str | Path, *args: object, **kwargs: object) -> None:
        save(fig, out, *args, **kwargs)
        figures[Path(out).stem] = fig

    monkeypatch.setattr(common, "_save", kept)
    return figures


def plotted(ax: Axes) -> int:
    """How many artists ``ax`` draws in data coordinates: lines and collections with data (reference lines
    across the axes, drawn in axes coordinates, do not count), images."""
    lines = [line for line in ax.lines if line.get_transform() == ax.transData and len(line.get_xydata())]
    collections = [
        c for c in ax.collections if len(c.get_offsets() if isinstance(c, PathCollection) else c.get_paths())
    ]
    return len(lines) + len(collections) + len(ax.images)


def covered_points(ax: Axes, box: Bbox) -> int:
    """How many of the points ``ax`` plots (line vertices, markers, 11 points along each error bar) lie in
    ``box`` (display coordinates)."""
    points = [ax.transData.transform(line.get_xydata()) for line in ax.lines if line.get_transform() == ax.transData]
    for collection in ax.collections:
        if len(collection.get_offsets()) and collection.get_offset_transform() == ax.transData:
            points.append(ax.transData.transform(collection.get_offsets()))
        if isinstance(collection, LineCollection) and collection.get_transform() == ax.transData:
            for start, end in (segment[[0, -1]] for segment in collection.get_segments() if len(segment)):
                points.append(ax.transData.transform(start + np.linspace(0, 1, 11)[:, None] * (end - start)))
    found = np.concatenate([np.empty((0, 2)), *points])
    return int(sum(box.contains(x, y) for x, y in found if np.isfinite([x, y]).all()))


def assert_laid_out(stem: str, fig: Figure, verdicts: pd.DataFrame) -> None:
    """Figure ``stem``: no panel (an axes shown, not a colour bar) without data, no legend over a point its
    panel plots, and each of its claims' verdict and deciding number (``verdicts``' rows of ``stem``) stated."""
    renderer = fig.canvas.get_renderer()
    panels = [ax for ax in fig.axes if ax.axison and ax.get_label() != "<colorbar>"]
    assert all(plotted(ax) for ax in panels), f"{stem}: a panel without data"
    for ax in panels:
        legend = ax.get_legend()
        if legend is not None:
            covered = covered_points(ax, legend.get_window_extent(renderer))
            assert not covered, f"{stem}, panel {ax.get_title()!r}: its legend covers {covered} point(s)"
    text = " ".join(" ".join(t.get_text() for t in fig.texts).split())
    for row in verdicts[verdicts["figure"] == stem].itertuples():
        regime = f" ({row.regime})" if getattr(row, "regime", "") else ""
        stated = f"{row.claim}{regime}: {row.verdict}: {' '.join(row.statistic.split())}"
        assert stated in text, (stem, row.claim, stated)
