"""F3 (claim D3): test loss against depth per width, the depth × width heat map, and D4's fitted law
(the ``powerlaw`` table)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.patches import Rectangle

from . import common
from .aggregate import over_seeds
from .common import DPI, _clean, _depth_panels, _empty, _figure, _finish, _lines, _required

NEAR_BEST_TOL = 0.01  # a cell within 1 % of the best test loss is drawn as not beaten (the D3 rule uses intervals)


def near_best(cells: pd.DataFrame) -> pd.Series:
    """Per (depth, width) cell of ``cells`` (columns ``test_loss``, its mean over seeds, and ``se``, the SE
    of that mean, NaN with one seed): whether it is within noise of the best cell, i.e. its excess over
    the best is at most max(2 SE of the difference, ``NEAR_BEST_TOL`` × the best)."""
    best = cells.loc[cells["test_loss"].idxmin()]
    se = np.sqrt(cells["se"] ** 2 + best["se"] ** 2).fillna(0)
    return cells["test_loss"] - best["test_loss"] <= np.maximum(2 * se, NEAR_BEST_TOL * abs(best["test_loss"]))


def fig_rebound(training: pd.DataFrame, powerlaw: pd.DataFrame, out: str | Path, *, dpi: int = DPI) -> None:
    """F3 (claim D3): test loss vs depth (ticks at the depths), one line per width, with D4's fitted law
    (``powerlaw_overlay``), and a depth × width heat map of test loss (mean over seeds; the best cell
    framed solid, the cells within noise of it dashed, ``near_best``). Families with one depth are left
    out (``_depth_panels``)."""
    _required(training, "training", ["test_loss"])
    title = "Claim D3: does test loss improve with joint depth-width scaling, and rebound in depth at small width?"
    notes: list[str] = []
    panels = _depth_panels(_clean(training, ["test_loss"], notes), notes)
    if not panels:
        return _empty(out, title, notes, dpi)
    fig, axes = _figure(2, len(panels), width=4.0, height=3.2)
    for c, (name, part) in enumerate(panels):
        grid = over_seeds(part, ["test_loss"])
        _lines(axes[0, c], grid, "depth", "test_loss", "width", "width")
        _finish(axes[0, c], "depth (layers)", "test loss (nats)", name, xticks=grid["depth"])
        powerlaw_overlay(axes[0, c], powerlaw.merge(part[["run", "dataset", "family"]].drop_duplicates()), grid)
        cells = part.groupby(["depth", "width"])["test_loss"].agg(test_loss="mean", se="sem").reset_index()
        cells = cells.assign(near=near_best(cells))
        table = cells.pivot(index="depth", columns="width", values="test_loss")  # (depths, widths)
        near = cells.pivot(index="depth", columns="width", values="near").fillna(False).astype(bool).to_numpy()
        table.index, table.columns = [f"{v:g}" for v in table.index], [f"{v:g}" for v in table.columns]
        ax = axes[1, c]
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
    common._save(fig, out, title, notes, dpi)


def powerlaw_overlay(ax: Axes, fits: pd.DataFrame, measured: pd.DataFrame) -> None:
    """D4's fitted law ``L(D, W) = a·(D/D₀)^(−α) + b·(W/W₀)^(−β) + c`` of each run in ``fits`` (its
    ``powerlaw`` rows of one dataset/family, one per parameter, D₀ ``depth_ref``, W₀ ``width_ref``) as
    thin black dashed curves over depth at each width of ``measured`` (depth, width rows), each over
    the depths measured at that width only (a width measured at one depth has no curve: the law is
    not drawn where no model tests it); nothing without rows (too few depths or widths for a fit)."""
    if fits.empty:
        return
    low, high = ax.get_xlim()
    spans = measured.groupby("width")["depth"].agg(["min", "max"])
    for _, fit in fits.groupby("run"):
        a, alpha, b, beta, c = fit.set_index("parameter").loc[["a", "alpha", "b", "beta", "c"], "value"]
        depth_ref, width_ref = fit[["depth_ref", "width_ref"]].iloc[0]
        for width, (shallowest, deepest) in spans[spans["min"] < spans["max"]].iterrows():
            depths = np.linspace(shallowest, deepest, 100)
            loss = a * (depths / depth_ref) ** -alpha + b * (np.full_like(depths, width) / width_ref) ** -beta + c
            ax.plot(depths, loss, "k--", linewidth=0.7, alpha=0.6)
    ax.set_xlim(low, high)
    ax.plot([], [], "k--", linewidth=0.7, label="D4 fit a·D^−α + b·W^−β + c")
    ax.legend(fontsize=7)


STEM = "F3_rebound"
TABLES = ["training", "powerlaw"]  # the tables ``draw`` reads, in its argument order
draw = fig_rebound
