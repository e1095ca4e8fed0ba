"""F1 (claim D1): |correlation| heat maps of the pooled gradient at a few points, and the off-diagonal
energy ratio beside its permutation null against relative depth."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

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


def fig_covariance(covmats: pd.DataFrame, covariance: pd.DataFrame, out: str | Path, *, dpi: int = DPI) -> None:
    """F1 (claim D1): |corr| heat maps of the pooled activation gradient (units ordered by the leading
    eigenvector) at up to three points (first, middle, last) for the narrowest and widest model of the
    first dataset/family, and the bias-corrected off-diagonal energy ratio ‖Σ − diag Σ‖²_F / ‖Σ‖²_F
    beside its permutation null (± 2 sd: above it counts as structure) against relative depth l/L;
    low-rank points (by construction) are framed."""
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
    source = covmats if len(covmats) else covariance
    if source.empty:
        return _empty(out, title, notes, dpi)
    dataset, family = source.sort_values(PANEL_KEYS).iloc[0][PANEL_KEYS]
    models = _only(source, dataset, family)[model_keys()].drop_duplicates()
    models = models.sort_values(["width", "depth", "seed", "model"])
    chosen = models.iloc[[0, -1]].drop_duplicates()
    heat = _only(covmats, dataset, family)
    n_points = max((min(3, heat[heat["model"] == m]["point_index"].nunique()) for m in chosen["model"]), default=0)
    fig = Figure(figsize=(2.8 * n_points + 4.6, 2.8 * len(chosen) + 0.6), layout="constrained")
    grid = fig.add_gridspec(len(chosen), n_points + 1, width_ratios=[1] * n_points + [1.8])
    for r, (_, model) in enumerate(chosen.iterrows()):
        maps = heat[heat["model"] == model["model"]]
        points = _spread(maps["point_index"].unique(), 3)
        for c, index in enumerate(points):
            at = maps[maps["point_index"] == index]
            matrix = _ordered(at.pivot_table(index="row", columns="col", values="corr").abs())  # (dim, dim)
            ax = fig.add_subplot(grid[r, c])
            sns.heatmap(
                matrix,
                ax=ax,
                vmin=0,
                vmax=1,
                cmap="mako_r",
                square=True,
                xticklabels=False,
                yticklabels=False,
                cbar=c == len(points) - 1,
                cbar_kws={"label": "|correlation|"},
            )
            ax.set(xlabel=f"{len(matrix)} units, ordered", ylabel="units, ordered" if c == 0 else "")
            depth = relative_depth(at.iloc[:1]).iloc[0]
            ax.set_title(
                f"{_model_label(model['depth'], model['width'])}\npoint {at['point'].iloc[0]} (l/L = {depth:.2g})",
                fontsize=8,
            )
    ax = fig.add_subplot(grid[:, -1])
    ratios = _at_relative_depth(_only(covariance, dataset, family), notes)
    marked = False
    for i, (_, model) in enumerate(chosen.iterrows()):
        part = over_seeds(
            ratios[(ratios["depth"] == model["depth"]) & (ratios["width"] == model["width"])],
            ["offdiag_ratio", "offdiag_ratio_null", "offdiag_ratio_null_sd", "low_rank"],
            by=["relative_depth"],
        )
        part = part.sort_values("relative_depth")
        style = _style(i, len(chosen))
        label = _model_label(model["depth"], model["width"])
        ax.plot(part["relative_depth"], part["offdiag_ratio"], label=f"{label}: measured", **style)
        ax.errorbar(
            part["relative_depth"],
            part["offdiag_ratio_null"],
            yerr=D1_BAND_SDS * part["offdiag_ratio_null_sd"].fillna(0),
            color=style["color"],
            marker=style["marker"],
            markerfacecolor="none",
            linestyle=":",
            capsize=2,
            label=f"{label}: null (± {D1_BAND_SDS:g} sd)",
        )
        low = part[part["low_rank"] > 0]
        if len(low):
            ax.scatter(
                low["relative_depth"],
                low["offdiag_ratio"],
                marker="s",
                s=120,
                facecolors="none",
                edgecolors="black",
                linewidths=1.2,
                zorder=3,
                label=None if marked else "low-rank by construction (not judged)",
            )
            marked = True
    ax.axhline(0, color="black", linewidth=0.8)
    _finish(
        ax,
        RELATIVE,
        "off-diagonal energy ratio, corrected (unitless)",
        f"{dataset} / {family}: measured vs independence null",
    )
    common._save(fig, out, title, notes, dpi)


STEM = "F1_covariance"
TABLES = ["covmats", "covariance"]  # the tables ``draw`` reads, in its argument order
draw = fig_covariance
