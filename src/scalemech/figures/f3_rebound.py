"""F3 (claims D3, D4): test loss against depth per width, the depth × width heat map, and D4's fitted law
(the ``powerlaw`` table)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle

from . import common
from .aggregate import over_seeds
from .common import DPI, _clean, _depth_panels, _empty, _figure, _finish, _lines, _required, _style

NEAR_BEST_TOL = 0.01  # a cell within 1 % of the best test loss is drawn as not beaten (the D3 rule uses intervals)


def near_best(cells: pd.DataFrame) -> pd.Series:
    """Per (depth, width) cell of ``cells`` (columns ``test_loss``, its mean over seeds, and ``se``, the SE
    of that mean, NaN with one seed): whether it is within noise of the best cell, i.e. its excess over
    the best is at most max(2 SE of the difference, ``NEAR_BEST_TOL`` × the best)."""
    best = cells.loc[cells["test_loss"].idxmin()]
    se = np.sqrt(cells["se"] ** 2 + best["se"] ** 2).fillna(0)
    return cells["test_loss"] - best["test_loss"] <= np.maximum(2 * se, NEAR_BEST_TOL * abs(best["test_loss"]))


def fig_rebound(
    training: pd.DataFrame, powerlaw: pd.DataFrame, verdicts: pd.DataFrame, out: str | Path, *, dpi: int = DPI
) -> None:
    """F3 (claims D3, D4): one row per dataset/family with more than one depth (``_depth_panels``): test
    loss vs depth (ticks at the depths), one line per width (the family's own colours), the train loss beside
    it in open markers and a thin line of the same colour (``train_lines``: D3's rebound is a generalization
    cost only where the gap between them carries it), with D4's fitted law dotted in each width's colour
    (``powerlaw_overlay``); beside it a depth × width heat map of test
    loss (mean over seeds; the best cell framed solid, the cells within noise of it dashed, ``near_best``).
    D3's and D4's verdicts under the panels."""
    _required(training, "training", ["test_loss"])
    title = "Claim D3: does test loss improve with joint depth-width scaling, and rebound in depth at small width?"
    notes: list[str] = []
    panels = _depth_panels(_clean(training, ["test_loss"], notes), notes)
    if not panels:
        return _empty(out, title, notes, dpi, verdicts)
    fig, axes = _figure(len(panels), 2, width=4.2, height=3.2)
    fitted = trained = False
    for r, (name, part) in enumerate(panels):
        grid = over_seeds(part, ["test_loss"])
        _lines(axes[r, 0], grid, "depth", "test_loss", "width", "width")
        trained = train_lines(axes[r, 0], part) or trained
        fits = powerlaw.merge(part[["run", "dataset", "family"]].drop_duplicates())
        fitted |= powerlaw_overlay(axes[r, 0], fits, grid)
        _finish(axes[r, 0], "depth (layers)", "loss (nats)", name, xticks=grid["depth"])
        cells = part.groupby(["depth", "width"])["test_loss"].agg(test_loss="mean", se="sem").reset_index()
        cells = cells.assign(near=near_best(cells))
        table = cells.pivot(index="depth", columns="width", values="test_loss")  # (depths, widths)
        near = cells.pivot(index="depth", columns="width", values="near").fillna(False).astype(bool).to_numpy()
        table.index, table.columns = [f"{v:g}" for v in table.index], [f"{v:g}" for v in table.columns]
        ax = axes[r, 1]
        sns.heatmap(
            table,
            ax=ax,
            annot=True,
            fmt=".3g",
            cmap="mako_r",
            annot_kws={"fontsize": 7},
            cbar_kws={"label": "test loss (nats)"},
        )
        best = np.unravel_index(np.nanargmin(table.to_numpy()), table.shape)
        for row, column in zip(*np.nonzero(near)):
            solid = (row, column) == best
            style = {"linewidth": 2, "linestyle": "-"} if solid else {"linewidth": 1.2, "linestyle": "--"}
            ax.add_patch(Rectangle((column, row), 1, 1, fill=False, edgecolor="black", **style))
        seeds = int(part.groupby(["depth", "width"]).size().min())
        noise = "2 SE over seeds or 1 %" if seeds > 1 else "1 % (one seed: no SE)"
        ax.set(xlabel="width", ylabel="depth (layers)", title=f"{name}\nbest (solid), within {noise} of it (dashed)")
        ax.title.set_fontsize(8)
    key = [Line2D([], [], color="black", linestyle=":", linewidth=FIT_WIDTH, label=FIT_LABEL)] if fitted else []
    key += [Line2D([], [], color="black", marker="o", markerfacecolor="white", linewidth=TRAIN_WIDTH,
                   label=TRAIN_LABEL)] if trained else []  # fmt: skip
    common._save(fig, out, title, notes, dpi, verdicts, key=key)


FIT_LABEL = "dotted, in each width's colour: D4's fit a·D^−α + b·W^−β + c"
FIT_WIDTH = 1.3
TRAIN_LABEL = "open markers, thin: train loss"
TRAIN_WIDTH = 0.7


def train_lines(ax: Axes, part: pd.DataFrame) -> bool:
    """The train loss (mean over seeds) vs depth per width, open markers on a thin line in the width's colour and
    marker (``_style``, as ``_lines`` draws the test loss); False where the table has no train loss."""
    if "train_loss" not in part or not np.isfinite(part["train_loss"].astype(float)).any():
        return False
    grid = over_seeds(part, ["train_loss"])
    levels = sorted(grid["width"].unique())
    for i, width in enumerate(levels):
        line = grid[grid["width"] == width].sort_values("depth")
        style = _style(i, len(levels))
        ax.plot(line["depth"], line["train_loss"], color=style["color"], marker=style["marker"], markersize=4,
                markerfacecolor="white", linewidth=TRAIN_WIDTH)  # fmt: skip
    return True


def powerlaw_overlay(ax: Axes, fits: pd.DataFrame, measured: pd.DataFrame) -> bool:
    """D4's fitted law ``L(D, W) = a·(D/D₀)^(−α) + b·(W/W₀)^(−β) + c`` of each run in ``fits`` (its
    ``powerlaw`` rows of one dataset/family, one per parameter, D₀ ``depth_ref``, W₀ ``width_ref``) as a
    dotted curve over depth at each width of ``measured`` (depth, width rows), in that width's colour (its
    measured line's, ``_style``), each over the depths measured at that width only (a width measured at
    one depth has no curve: the law is not drawn where no model tests it); nothing without rows (too few
    depths or widths for a fit). Whether a curve was drawn."""
    if fits.empty:
        return False
    low, high = ax.get_xlim()
    spans = measured.groupby("width")["depth"].agg(["min", "max"])
    widths = sorted(measured["width"].unique())
    drawn = False
    for _, fit in fits.groupby("run"):
        a, alpha, b, beta, c = fit.set_index("parameter").loc[["a", "alpha", "b", "beta", "c"], "value"]
        depth_ref, width_ref = fit[["depth_ref", "width_ref"]].iloc[0]
        for width, (shallowest, deepest) in spans[spans["min"] < spans["max"]].iterrows():
            depths = np.linspace(shallowest, deepest, 100)
            loss = a * (depths / depth_ref) ** -alpha + b * (np.full_like(depths, width) / width_ref) ** -beta + c
            colour = _style(widths.index(width), len(widths))["color"]
            ax.plot(depths, loss, linestyle=":", color=colour, linewidth=FIT_WIDTH)
            drawn = True
    ax.set_xlim(low, high)
    return drawn


STEM = "F3_rebound"
TABLES = ["training", "powerlaw", "verdicts"]  # the tables ``draw`` reads, in its argument order
draw = fig_rebound
