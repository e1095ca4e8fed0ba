"""F10 (E11): the held-out gain of growing one block at each insertion point against the gain the
certificate predicts there, and the gain of each placement strategy (``placement``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.ticker import LogLocator, NullFormatter
from scipy import stats

from . import common
from .common import (
    DPI,
    GREY,
    _bars,
    _clean,
    _detection_key,
    _empty,
    _figure,
    _finish,
    _only,
    _palette,
    _panels,
    _required,
)
from .placement import STRATEGIES, placements

GAIN, GAIN_SE = "gain_old", "gain_old_se"  # L(old) − L(grown) on the held-out examples, its paired SE
LEVEL = 0.95  # the t interval of a strategy's mean over models (the G2 rule's level)
PICKS = {  # the strategies marked in the left panels: those that read the certificate's columns, and top
    "certificate": "*",  # (= uniform, G2's baseline); middle, bottom and random are in the right panels only
    "grad norm": "o",
    "lowest certificate": "X",
    "top": "^",
}
COLUMNS = ["snapshot", "point", "point_index", "certify_rank", "block_grad_norm", "predicted_gain", GAIN, GAIN_SE]


def _snapshot_style(snapshots: list[str]) -> dict[str, tuple]:
    return dict(zip(snapshots, _palette(len(snapshots))))


def _realized(ax: Axes, rows: pd.DataFrame, picks: pd.DataFrame, colours: dict[str, tuple]) -> None:
    """Each point's gain_old ± 2 SE against its predicted_gain, one colour per snapshot (filled where the
    bar excludes 0), the strategies' picks ringed by their markers."""
    for snapshot, part in rows.groupby("snapshot"):
        lo, hi = part[GAIN] - 2 * part[GAIN_SE], part[GAIN] + 2 * part[GAIN_SE]
        found = (lo > 0) | (hi < 0)
        for filled in (True, False):
            shown = part[found == filled]
            ax.errorbar(
                shown["predicted_gain"],
                shown[GAIN],
                yerr=_bars(shown[GAIN], lo[found == filled], hi[found == filled]),
                linestyle="none",
                marker="o",
                markersize=4,
                color=colours[snapshot],
                markerfacecolor=colours[snapshot] if filled else "none",
                ecolor=colours[snapshot] if filled else GREY,
                elinewidth=0.8,
                capsize=1.5,
                alpha=0.85,
                label=f"{snapshot} snapshot" if filled == found.any() else None,
            )
    for strategy, marker in PICKS.items():
        chosen = picks[picks["strategy"] == strategy]
        size = 150 if marker == "*" else 70
        ax.scatter(chosen["predicted_gain"], chosen[GAIN], s=size, marker=marker, facecolors="none",
                   edgecolors="black", linewidths=0.8, zorder=3)  # fmt: skip
    x = rows["predicted_gain"].astype(float)
    if (x > 0).all():
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(LogLocator(subs=(1, 2, 5) if np.log10(x.max() / x.min()) < 2 else (1,)))
        ax.xaxis.set_major_formatter(common.OneFormat())
        ax.xaxis.set_minor_formatter(NullFormatter())
    else:
        common._signed(ax, x.to_numpy(), axis="x")
    ax.axhline(0, color="black", linewidth=1)


def strategy_means(picks: pd.DataFrame) -> pd.DataFrame:
    """Per strategy × snapshot: ``mean`` of the models' gain_old, its ``LEVEL`` t interval ``lo``, ``hi``
    (NaN below 2 models) and ``models``."""
    out = []
    for (strategy, snapshot), part in picks.groupby(["strategy", "snapshot"], sort=False):
        values = part[GAIN].to_numpy(float)
        lo, hi = (
            stats.t.interval(LEVEL, len(values) - 1, values.mean(), stats.sem(values))
            if len(values) > 1
            else (np.nan, np.nan)
        )
        out.append(dict(strategy=strategy, snapshot=snapshot, mean=values.mean(), lo=lo, hi=hi, models=len(values)))
    return pd.DataFrame(out)


def _by_strategy(ax: Axes, picks: pd.DataFrame, colours: dict[str, tuple]) -> None:
    """Each strategy's gain: every model's as a small dot, the mean over models with its t interval
    (filled where it excludes 0), snapshots side by side."""
    position = {strategy: i for i, strategy in enumerate(STRATEGIES)}
    means = strategy_means(picks)
    for j, (snapshot, colour) in enumerate(colours.items()):
        shift = 0.3 * (j - (len(colours) - 1) / 2)
        models = picks[picks["snapshot"] == snapshot]
        ax.scatter(
            models["strategy"].map(position).astype(float) + shift,
            models[GAIN],
            s=6,
            color=colour,
            alpha=0.35,
            zorder=1,
        )
        mean = means[means["snapshot"] == snapshot]
        for filled in (True, False):
            shown = mean[((mean["lo"] > 0) | (mean["hi"] < 0)) == filled]
            ax.errorbar(
                shown["strategy"].map(position).astype(float) + shift,
                shown["mean"],
                yerr=_bars(shown["mean"], shown["lo"], shown["hi"]),
                linestyle="none",
                marker="s",
                markersize=5,
                color=colour,
                markerfacecolor=colour if filled else "none",
                ecolor=colour if filled else GREY,
                capsize=2,
                zorder=2,
            )
    ax.set_xticks(range(len(STRATEGIES)), [s if s != "uniform" else "uniform (= top)" for s in STRATEGIES])
    ax.tick_params(axis="x", labelrotation=35, labelsize=7)
    ax.axhline(0, color="black", linewidth=1)


def fig_growth(growth: pd.DataFrame, verdicts: pd.DataFrame, out: str | Path, *, dpi: int = DPI) -> None:
    """F10 (E11, claims G1–G3): left, per dataset/family, each model × snapshot × insertion point's
    realized gain ``gain_old = L(old) − L(grown)`` ± 2 SE against ``predicted_gain`` (filled where the bar
    excludes 0), the points each placement strategy picks marked; right, each strategy's gain per model
    (dots) and the mean over models with a 95 % t interval, one colour per snapshot; G1–G3's verdicts under
    the panels."""
    _required(growth, "growth", COLUMNS)
    title = "E11: does growing one block where the certificate says pay? held-out gain L(old) − L(grown)"
    notes: list[str] = []
    rows = _clean(growth, ["predicted_gain", GAIN, GAIN_SE], notes)
    if rows.empty:
        return _empty(out, title, notes, dpi, verdicts)
    picks = placements(growth, [GAIN])
    picks = _clean(picks, [GAIN, "predicted_gain"], notes, why="a strategy's point without a finite gain")
    colours = _snapshot_style(sorted(rows["snapshot"].unique()))
    panels = _panels(rows)
    fig, axes = _figure(len(panels), 2, width=5.0, height=3.6)
    strategies = [
        Line2D([], [], marker=marker, color="black", markerfacecolor="none", linestyle="none", label=strategy)
        for strategy, marker in PICKS.items()
    ]
    for r, (name, part) in enumerate(panels):
        chosen = _only(picks, part["dataset"].iloc[0], part["family"].iloc[0])
        _realized(axes[r, 0], part, chosen, colours)
        _finish(axes[r, 0], "predicted gain (block_grad_norm)", "realized gain (nats) ± 2 SE", name)
        _by_strategy(axes[r, 1], chosen, colours)
        _finish(axes[r, 1], "", "realized gain (nats): models,\nmean ± 95 % t interval", f"{name}: by placement",
                legend=False)  # fmt: skip
    common._save(fig, out, title, notes, dpi, verdicts, key=strategies + _detection_key())


STEM = "F10_growth"
TABLES = ["growth", "verdicts"]  # the tables ``draw`` reads, in its argument order
draw = fig_growth
