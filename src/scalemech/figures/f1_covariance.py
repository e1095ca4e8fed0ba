"""F1 (claim D1): |correlation| heat maps of the pooled gradient at a few points, and the off-diagonal
energy ratio beside its permutation null against relative depth."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.gridspec import SubplotSpec
from matplotlib.lines import Line2D

from ..core.tables import model_keys
from . import common
from .aggregate import as_flag, over_seeds
from .common import (
    DPI,
    PANEL_KEYS,
    RELATIVE,
    _at_relative_depth,
    _clean,
    _empty,
    _finish,
    _model_label,
    _only,
    _required,
    _spread,
    _style,
    relative_depth,
)

D1_BAND_SDS = 2.0  # F1 draws the null ± this many sd


def _ordered(matrix: pd.DataFrame) -> pd.DataFrame:
    """A |correlation| matrix with its units sorted by their weight in its leading eigenvector: units
    correlated with many others first, so off-diagonal structure gathers in the top-left corner."""
    weights = np.linalg.eigh(matrix.fillna(0).to_numpy())[1][:, -1]
    order = np.argsort(-np.abs(weights), kind="stable")
    return matrix.iloc[order, order]


def fig_covariance(
    covmats: pd.DataFrame, covariance: pd.DataFrame, verdicts: pd.DataFrame, out: str | Path, *, dpi: int = DPI
) -> None:
    """F1 (claim D1): one row per dataset/family: |corr| heat maps of the pooled activation gradient (units
    ordered by the leading eigenvector) at up to three points (first, middle, last) of its widest model,
    and the bias-corrected off-diagonal energy ratio ‖Σ − diag Σ‖²_F / ‖Σ‖²_F of its narrowest and widest
    model beside its permutation null (± 2 sd: above it counts as structure) against relative depth l/L;
    low-rank points (by construction) are framed. D1's verdict under the panels."""
    _required(covmats, "covmats", ["point", "point_index", "row", "col", "corr"])
    _required(
        covariance,
        "covariance",
        ["point_index", "offdiag_ratio", "offdiag_ratio_null", "offdiag_ratio_null_sd", "low_rank"],
    )
    title = "Claim D1: is the activation-gradient covariance close to diagonal?"
    notes: list[str] = []
    covmats = _clean(covmats, ["corr"], notes)
    covariance = _clean(covariance, ["offdiag_ratio"], notes)
    covariance = covariance.assign(low_rank=as_flag(covariance["low_rank"]).fillna(0))
    families = sorted(
        set(map(tuple, covariance[PANEL_KEYS].to_numpy())) | set(map(tuple, covmats[PANEL_KEYS].to_numpy()))
    )
    if not families:
        return _empty(out, title, notes, dpi, verdicts)
    chosen = {where: _extremes(covmats, covariance, *where) for where in families}  # narrowest, widest model
    n_maps = max(min(MAPS, _only(covmats, *where).query("model == @m")["point_index"].nunique())
                 for where, models in chosen.items() for m in models["model"].iloc[-1:])  # fmt: skip
    fig = Figure(figsize=(2.6 * n_maps + 4.8, 2.9 * len(families) + 0.4), layout="constrained")
    grid = fig.add_gridspec(len(families), 2, width_ratios=[n_maps, 1.9])  # a row: its maps, then its ratios
    low_ranks = False
    for r, (dataset, family) in enumerate(families):
        _heat_maps(fig, grid[r, 0], _only(covmats, dataset, family), chosen[dataset, family].iloc[-1], n_maps)
        ax = fig.add_subplot(grid[r, 1])
        ratios = _at_relative_depth(_only(covariance, dataset, family), notes)
        low_ranks |= _ratios(ax, ratios, chosen[dataset, family])
        _finish(
            ax, RELATIVE, "off-diagonal energy ratio,\ncorrected (unitless)", f"{dataset} / {family}: measured vs null"
        )
    low_rank = Line2D([], [], marker="s", markersize=9, markerfacecolor="none", markeredgecolor="black",
                      linestyle="none", label="low-rank by construction (not judged)")  # fmt: skip
    null = Line2D([], [], color="black", marker="o", markerfacecolor="none", linestyle=":",
                  label=f"dotted, open: the independence null ± {D1_BAND_SDS:g} sd")  # fmt: skip
    common._save(fig, out, title, notes, dpi, verdicts, key=[null, low_rank] if low_ranks else [null])


MAPS = 3  # heat maps per row at most: the first, middle and last point


def _extremes(covmats: pd.DataFrame, covariance: pd.DataFrame, dataset: str, family: str) -> pd.DataFrame:
    """The narrowest and the widest model of ``dataset``/``family`` (model keys; one row if they coincide)."""
    models = _only(pd.concat([covmats, covariance])[model_keys()], dataset, family).drop_duplicates()
    return models.sort_values(["width", "depth", "seed", "model"]).iloc[[0, -1]].drop_duplicates()


def _heat_maps(fig: Figure, cell: SubplotSpec, heat: pd.DataFrame, model: pd.Series, n_maps: int) -> None:
    """|corr| of ``model``'s pooled gradient at up to ``n_maps`` points (first, middle, last), side by side
    across ``cell``; the first names the dataset/family and the model."""
    maps = heat[heat["model"] == model["model"]]
    points = _spread(maps["point_index"].unique(), n_maps)
    row = cell.subgridspec(1, len(points) + 1, width_ratios=[1] * len(points) + [0.06])  # the maps, a colour bar
    scale = fig.add_subplot(row[0, -1]) if points else None
    for c, index in enumerate(points):
        at = maps[maps["point_index"] == index]
        matrix = _ordered(at.pivot_table(index="row", columns="col", values="corr").abs())  # (dim, dim)
        ax = fig.add_subplot(row[0, c])
        sns.heatmap(matrix, ax=ax, vmin=0, vmax=1, cmap="mako_r", square=True, xticklabels=False, yticklabels=False,
                    cbar=c == 0, cbar_ax=scale, cbar_kws={"label": "|correlation|"})  # fmt: skip
        where = f"{model['dataset']} / {model['family']}\nunits, ordered"
        ax.set(xlabel=f"{len(matrix)} units, ordered", ylabel=where if c == 0 else "")
        depth = relative_depth(at.iloc[:1]).iloc[0]
        label = _model_label(model["depth"], model["width"])
        ax.set_title(f"{label}\npoint {at['point'].iloc[0]} (l/L = {depth:.2g})", fontsize=8)


def _ratios(ax, ratios: pd.DataFrame, chosen: pd.DataFrame) -> bool:
    """The measured ratio (solid) and its null ± 2 sd (dotted, open) of each ``chosen`` model against
    relative depth, the low-rank points framed; whether there were any."""
    framed = False
    for i, (_, model) in enumerate(chosen.iterrows()):
        part = over_seeds(
            ratios[(ratios["depth"] == model["depth"]) & (ratios["width"] == model["width"])],
            ["offdiag_ratio", "offdiag_ratio_null", "offdiag_ratio_null_sd", "low_rank"],
            by=["relative_depth"],
        ).sort_values("relative_depth")
        style = _style(i, len(chosen))
        ax.plot(part["relative_depth"], part["offdiag_ratio"], label=_model_label(model["depth"], model["width"]),
                **style)  # fmt: skip
        ax.errorbar(part["relative_depth"], part["offdiag_ratio_null"],
                    yerr=D1_BAND_SDS * part["offdiag_ratio_null_sd"].fillna(0), color=style["color"],
                    marker=style["marker"], markerfacecolor="none", linestyle=":", capsize=2)  # fmt: skip
        low = part[part["low_rank"] > 0]
        if len(low):
            ax.scatter(low["relative_depth"], low["offdiag_ratio"], marker="s", s=120, facecolors="none",
                       edgecolors="black", linewidths=1.2, zorder=3)  # fmt: skip
            framed = True
    ax.axhline(0, color="black", linewidth=0.8)
    return framed


STEM = "F1_covariance"
TABLES = ["covmats", "covariance", "verdicts"]  # the tables ``draw`` reads, in its argument order
draw = fig_covariance
