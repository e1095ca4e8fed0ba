"""Figures F1–F8 of docs/science.md §5, one function per claim, drawn from tidy tables only.

Each ``fig_<name>(tables..., out)`` checks the columns it needs
(``scalemech.core.tables.check_columns``), drops rows with NaN (an estimate that is undefined:
counted in a note printed under the figure) and writes ``out`` as PDF and PNG with the same
stem. No finite value is dropped: estimates that can come out ≤ 0 (‖μ‖², d_align, loss
changes, ratios) sit on linear or symlog axes with a zero line, each insertion point's
estimate with its interval (``_estimates``); a marker is filled where the interval excludes
the null value (0; 1/2 for a misalignment probability) and open, with a grey bar, where it
does not ("not detectable"). Lines run through the median over all estimates, negative ones
included. Lines differ in colour (viridis, whose lightness rises monotonically, so it survives
grayscale printing), marker and line style. Per-point figures (F1, F7) place an insertion point
at its relative depth l/L (``relative_depth``), so models of different depths line up. A family
with a single depth shows no trend in depth: F2 and F3 leave it out and say so under the figure.
``FIGURES`` maps each figure's file stem to its function and the tables it reads;
``make_figure`` draws one from a tables folder.

F3 and F7 show per-model values: seeds aggregated by the mean (``over_seeds``); F6 one value per
model, the median over its insertion points (``over_points``) with their range.
References: matplotlib (Hunter 2007), seaborn (Waskom 2021).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle
from matplotlib.ticker import FormatStrFormatter, FuncFormatter, LogLocator, NullFormatter

from ..core.tables import check_columns, model_keys, read_table
from ..stats.powerlaw import PowerLawFit, fit_grid
from .aggregate import as_flag, choose, default_mk, over_seeds, table_path
from .paper_values import PAPER_W_DALIGN

MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]
LINESTYLES = ["-", "--", "-.", ":"]
PANEL_KEYS = ["dataset", "family"]  # one facet per dataset/family
DPI = 150
D1_BAND_SDS = 2.0  # F1 draws the null ± this many sd


def point_count(family: str, depth: int) -> int | None:
    """``models.point_count``, imported when a figure needs it (the models import torch)."""
    from ..models import point_count as count

    return count(family, depth)


def relative_depth(frame: pd.DataFrame) -> pd.Series:
    """l/L of each row's insertion point: blocks below it (``point_index`` + 1) over the model's points
    (``point_count``), so the last block's output is at 1 for every depth; NaN where L is unknown."""
    counts = [point_count(family, int(depth)) for family, depth in zip(frame["family"], frame["depth"])]
    return (frame["point_index"] + 1) / pd.Series(counts, index=frame.index, dtype=float)


# -- drawing helpers ---------------------------------------------------------------------
def _required(frame: pd.DataFrame, table: str, extra: Sequence[str]) -> None:
    check_columns(frame, table, required=model_keys() + list(extra))


def _clean(
    frame: pd.DataFrame, columns: Sequence[str], notes: list[str], positive: bool = False, why: str | None = None
) -> pd.DataFrame:
    """Rows with every ``columns`` finite (and > 0 when ``positive``, for log axes); a note says what
    went and ``why`` (what a NaN there means)."""
    values = frame[list(columns)].astype(float)
    keep = np.isfinite(values).all(axis=1) & ((values > 0).all(axis=1) if positive else True)
    if (~keep).any():
        what = "NaN or ≤ 0 (log axis)" if positive else "NaN"
        because = f" ({why})" if why else ""
        notes.append(f"{int((~keep).sum())} row(s) with {what} in {list(columns)} dropped{because}")
    return frame[keep]


def _palette(n: int) -> list:
    """``n`` viridis colours, dark purple to green (the pale yellow end, invisible on white, left out)."""
    return [tuple(c) for c in sns.color_palette("viridis", as_cmap=True)(np.linspace(0, 0.85, max(n, 1)))]


def _style(i: int, n: int) -> dict:
    return {"color": _palette(n)[i], "marker": MARKERS[i % len(MARKERS)], "linestyle": LINESTYLES[i % len(LINESTYLES)]}


def _bars(value: pd.Series, lo: pd.Series, hi: pd.Series) -> np.ndarray:
    """Error-bar lengths (2, n) below and above ``value``; none where a bound is NaN."""
    return np.vstack([(value - lo).clip(lower=0).fillna(0), (hi - value).clip(lower=0).fillna(0)])


def _lines(
    ax: Axes, frame: pd.DataFrame, x: str, y: str, by: str, name: str, lo: str | None = None, hi: str | None = None
) -> None:
    """One line of ``y`` vs ``x`` per level of ``by`` (legend ``name level``), solid bars from ``lo``/``hi``
    (lines with bars are dodged sideways by a few percent, for log x axes, so the bars stay apart)."""
    levels = sorted(frame[by].unique())
    for i, level in enumerate(levels):
        part = frame[frame[by] == level].sort_values(x)
        xs, yerr = part[x], None
        if lo is not None:
            xs = xs * (1 + 0.04 * (i - (len(levels) - 1) / 2))
            yerr = _bars(part[y], part[lo], part[hi])
        bars = ax.errorbar(
            xs, part[y], yerr=yerr, capsize=2, markersize=4, label=f"{name} {level:g}", **_style(i, len(levels))
        )
        for bar in bars.lines[2]:
            bar.set_linestyle("-")


MEDIAN = "dash: median where resolved"  # titles' key to the medians of ``_estimates``
GREY = "0.6"  # bars (and open markers' fill) of estimates whose interval contains the null value


def detected(frame: pd.DataFrame, lo: str, hi: str, null: float = 0.0, two_sided: bool = False) -> pd.Series:
    """Rows whose interval ``[lo, hi]`` lies above ``null`` (``two_sided``: above or below it); False
    where a bound is NaN: a filled marker in the figures."""
    low, high = frame[lo].astype(float), frame[hi].astype(float)
    return (low > null) | ((high < null) if two_sided else False)


def _estimates(
    ax: Axes,
    frame: pd.DataFrame,
    x: str,
    y: str,
    by: str,
    name: str,
    lo: str | None = None,
    hi: str | None = None,
    null: float = 0.0,
    two_sided: bool = False,
    logx: bool = False,
) -> None:
    """Every row of ``frame`` (each insertion point, seed) as a marker at (``x``, ``y``) with its interval
    ``lo``–``hi`` as a bar, one colour and marker per level of ``by``, dodged sideways by level and
    insertion point; filled where the interval excludes ``null`` (see ``detected``), open with a grey
    bar where it does not; the median over all rows at each x as a dash (legend ``name level``), only
    where the medians of the bounds exclude ``null``, joined by a line where neighbours both are
    (``resolved_medians``): no trend is drawn through noise."""
    levels = sorted(frame[by].unique())
    xs = np.sort(frame[x].astype(float).unique())
    step = float(np.diff(np.log(xs) if logx else xs).min()) if len(xs) > 1 else (0.5 if logx else 1.0)
    points = sorted(frame["point_index"].unique()) if "point_index" in frame else [0]
    slot = 0.5 * step / max(len(levels), 1)  # the sideways room of one level
    for i, level in enumerate(levels):
        part = frame[frame[by] == level]
        style = _style(i, len(levels))
        within = part["point_index"].map({p: j for j, p in enumerate(points)}) if "point_index" in part else 0
        shift = -0.25 * step + slot * (i + 0.5) + 0.6 * slot * (within / max(len(points) - 1, 1) - 0.5)
        position = part[x].astype(float) * np.exp(shift) if logx else part[x].astype(float) + shift
        found = detected(part, lo, hi, null, two_sided) if lo is not None else pd.Series(True, index=part.index)
        for filled in (True, False):
            rows = found == filled
            if not rows.any():
                continue
            yerr = _bars(part.loc[rows, y], part.loc[rows, lo], part.loc[rows, hi]) if lo is not None else None
            ax.errorbar(
                position[rows],
                part.loc[rows, y],
                yerr=yerr,
                linestyle="none",
                marker=style["marker"],
                markersize=4,
                markeredgecolor=style["color"],
                markeredgewidth=0.9,
                markerfacecolor=style["color"] if filled else "none",
                ecolor=style["color"] if filled else GREY,
                elinewidth=0.8,
                capsize=1.5,
                alpha=0.9,
            )
        median = resolved_medians(part, x, y, lo, hi, null, two_sided)
        ax.plot(
            median.index.astype(float),
            median.to_numpy(),
            color=style["color"],
            linestyle=style["linestyle"],
            marker="_",
            markersize=12,
            linewidth=1.2,
            label=f"{name} {level:g}",
        )


def resolved_medians(
    frame: pd.DataFrame, x: str, y: str, lo: str | None, hi: str | None, null: float = 0.0, two_sided: bool = False
) -> pd.Series:
    """The median of ``y`` at each ``x``, NaN where the medians of the bounds ``[lo, hi]`` do not exclude
    ``null`` (most rows there are within noise): a line drawn through it only joins resolved medians."""
    median = frame.groupby(x)[y].median()
    if lo is None:
        return median
    bounds = frame.groupby(x)[[lo, hi]].median()
    return median.where(detected(bounds, lo, hi, null, two_sided))


def _detection_key(null: float = 0.0) -> list[Line2D]:
    """Legend entries for the filled / open markers of ``_estimates``."""
    return [
        Line2D([], [], color="black", marker="o", linestyle="none", label=f"filled: interval excludes {null:g}"),
        Line2D(
            [],
            [],
            color=GREY,
            marker="o",
            markerfacecolor="none",
            markeredgecolor="black",
            linestyle="none",
            label=f"open, grey bar: contains {null:g}",
        ),
    ]


def _signed(ax: Axes, values: Sequence[float], axis: str = "y") -> None:
    """Symlog ``axis`` with a zero line, so both signs and several decades show: linear within ± the power
    of ten at or below the 10th percentile of the nonzero |values| (the ticks next to 0 sit a decade
    from it), log beyond, at most seven ticks labelled as plain numbers."""
    size = np.abs(np.asarray(values, dtype=float))
    size = size[np.isfinite(size) & (size > 0)]
    linthresh = float(10 ** np.floor(np.log10(np.quantile(size, 0.1)))) if len(size) else 1.0
    if axis == "y":
        ax.set_yscale("symlog", linthresh=linthresh)
        ax.axhline(0, color="black", linewidth=0.8)
    else:
        ax.set_xscale("symlog", linthresh=linthresh)
        ax.axvline(0, color="black", linewidth=0.8)
    scale = getattr(ax, f"{axis}axis")
    scale.get_major_locator().set_params(numticks=7)
    scale.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))  # -10, -1, 0, 1, 10: no 10ᵏ


def _panels(frame: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """(``"dataset / family"``, rows) per dataset/family, sorted."""
    return [(f"{ds} / {fam}", part) for (ds, fam), part in frame.groupby(PANEL_KEYS, sort=True)]


RELATIVE = "relative depth l/L (blocks below the point / blocks)"  # the x label of per-point figures


def _at_relative_depth(frame: pd.DataFrame, notes: list[str]) -> pd.DataFrame:
    """``frame`` with a ``relative_depth`` column, rows whose number of insertion points is unknown dropped."""
    return _clean(
        frame.assign(relative_depth=relative_depth(frame)),
        ["relative_depth"],
        notes,
        why="number of insertion points unknown: a pretrained model's depth is not in the table",
    )


def _depth_panels(frame: pd.DataFrame, notes: list[str]) -> list[tuple[str, pd.DataFrame]]:
    """``_panels`` of the dataset/families with more than one depth; a note names each one left out."""
    panels = []
    for name, part in _panels(frame):
        depths = part["depth"].unique()
        if len(depths) > 1:
            panels.append((name, part))
        else:
            notes.append(f"{name} has one depth ({depths[0]:g}), so no trend in depth: not drawn")
    return panels


def _figure(nrows: int, ncols: int, width: float = 3.6, height: float = 2.9) -> tuple[Figure, np.ndarray]:
    fig = Figure(figsize=(width * ncols, height * nrows), layout="constrained")
    return fig, fig.subplots(nrows, ncols, squeeze=False)


def _save(fig: Figure, out: str | Path, title: str, notes: list[str], dpi: int) -> None:
    """Title the figure, print ``notes`` under it and write ``out`` as .pdf and .png."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.suptitle(title, fontsize=10)
    if notes:
        fig.text(0.0, -0.01, "Note: " + "; ".join(notes), fontsize=7, ha="left", va="top", wrap=True)
    for suffix in (".pdf", ".png"):
        fig.savefig(out.with_suffix(suffix), dpi=dpi, bbox_inches="tight")


def _empty(out: str | Path, title: str, notes: list[str], dpi: int) -> None:
    """A placeholder figure for a table with nothing to plot (this configuration did not measure it)."""
    fig, axes = _figure(1, 1)
    axes[0, 0].axis("off")
    axes[0, 0].text(0.5, 0.5, "no rows to plot in this configuration", ha="center", va="center")
    _save(fig, out, title, notes, dpi)


def _finish(
    ax: Axes,
    xlabel: str,
    ylabel: str,
    title: str,
    logx: bool = False,
    logy: bool = False,
    xticks: Sequence[float] | None = None,
    extra: Sequence[Line2D] = (),
    outside: bool = False,
    legend: bool = True,
) -> None:
    """Labels, log scales with plain-number ticks (``xticks`` where given), grid, and (if ``legend``) a
    legend (labelled lines, then the ``extra`` key entries) that moves outside the axes beyond six
    entries (always when ``outside``: panels full of markers)."""
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    ax.title.set_fontsize(9)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
        low, high = ax.get_ylim()
        ax.yaxis.set_major_locator(LogLocator(subs=(1, 2, 5) if np.log10(high / low) < 2 else (1,)))
        ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
        ax.yaxis.set_minor_formatter(NullFormatter())
    if xticks is not None:
        ax.set_xticks(sorted(set(xticks)))
        ax.xaxis.set_major_formatter(FormatStrFormatter("%g"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        if len(set(xticks)) > 5:  # log-spaced labels of neighbouring values would run into each other
            ax.tick_params(axis="x", labelrotation=45)
    ax.grid(alpha=0.3, which="both")
    handles = ax.get_legend_handles_labels()[0] + list(extra) if legend else []
    if len(handles) > 6 or (outside and handles):
        ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0)
    elif handles:
        ax.legend(handles=handles, fontsize=7)


def _spread(values: Sequence, k: int) -> list:
    """Up to ``k`` evenly spaced items of the sorted ``values`` (first, middle, last for k=3)."""
    values = sorted(values)
    picks = np.unique(np.round(np.linspace(0, len(values) - 1, min(k, len(values)))).astype(int))
    return [values[i] for i in picks]


def _only(frame: pd.DataFrame, dataset: str, family: str) -> pd.DataFrame:
    return frame[(frame["dataset"] == dataset) & (frame["family"] == family)]


def _model_label(depth: float, width: float) -> str:
    return f"depth {depth:g}, width {width:g}"


# -- F1 ----------------------------------------------------------------------------------
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
    _save(fig, out, title, notes, dpi)


# -- F2 ----------------------------------------------------------------------------------
SIGNALS = {
    "mu_sq": ("‖μ‖² (activation-gradient mean)", "mu_sq_lo", "mu_sq_hi"),
    "block_grad_norm": ("‖∇θ L‖, new block at θ = 0", None, None),
}


def fig_signal(signal: pd.DataFrame, out: str | Path, *, split: str = "test", dpi: int = DPI) -> None:
    """F2 (claim D2): ‖μ‖² (with its jackknife interval) and the inserted block's gradient norm vs depth (log
    x, ticks at the depths) on ``split``, every insertion point and seed of every model, one colour per
    width, the median where resolved (``resolved_medians``); symlog y with a zero line (negative
    estimates of ‖μ‖² stay in). Families with one depth are left out (``_depth_panels``)."""
    _required(signal, "signal", ["point_index", "split", "mu_sq", "mu_sq_lo", "mu_sq_hi", "block_grad_norm"])
    title = f"Claim D2: does the first-order signal decay with depth? ({split} split; every insertion point; {MEDIAN})"
    notes: list[str] = []
    if signal.empty:
        return _empty(out, title, notes, dpi)
    panels = _depth_panels(signal[signal["split"] == choose(signal, "split", split)], notes)
    if not panels:
        return _empty(out, title, notes, dpi)
    fig, axes = _figure(len(SIGNALS), len(panels), width=4.0)
    for c, (name, part) in enumerate(panels):
        for r, (quantity, (label, lo, hi)) in enumerate(SIGNALS.items()):
            kept = _clean(part, [quantity], notes, why="no estimate")
            _estimates(axes[r, c], kept, "depth", quantity, "width", "width", lo=lo, hi=hi, logx=True)
            _finish(
                axes[r, c],
                "depth (layers, log scale)",
                label,
                name,
                logx=True,
                xticks=kept["depth"],
                extra=_detection_key() if lo else (),
                outside=True,
            )
            _signed(axes[r, c], kept[quantity])
    _save(fig, out, title, notes, dpi)


# -- F3 ----------------------------------------------------------------------------------
NEAR_BEST_TOL = 0.01  # a cell within 1 % of the best test loss is not beaten (the D3 rule's D3_TOL)


def near_best(cells: pd.DataFrame) -> pd.Series:
    """Per (depth, width) cell of ``cells`` (columns ``test_loss``, its mean over seeds, and ``se``, the SE
    of that mean, NaN with one seed): whether it is within noise of the best cell, i.e. its excess over
    the best is at most max(2 SE of the difference, ``NEAR_BEST_TOL`` × the best)."""
    best = cells.loc[cells["test_loss"].idxmin()]
    se = np.sqrt(cells["se"] ** 2 + best["se"] ** 2).fillna(0)
    return cells["test_loss"] - best["test_loss"] <= np.maximum(2 * se, NEAR_BEST_TOL * abs(best["test_loss"]))


def fig_rebound(training: pd.DataFrame, out: str | Path, *, dpi: int = DPI) -> None:
    """F3 (claim D3): test loss vs depth (ticks at the depths), one line per width, and a depth × width
    heat map of test loss (mean over seeds; the best cell framed solid, the cells within noise of it
    dashed, ``near_best``). Families with one depth are left out (``_depth_panels``)."""
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
        powerlaw_overlay(axes[0, c], fit_grid(part))
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
    _save(fig, out, title, notes, dpi)


def powerlaw_overlay(ax: Axes, fit: PowerLawFit | None) -> None:
    """D4's fitted law ``L(D, W)`` (``scalemech.stats.powerlaw``) as a thin black dashed curve over depth at
    each width of ``ax``'s lines (their labels ``width w``); nothing without a fit."""
    if fit is None:
        return
    low, high = ax.get_xlim()
    depths = np.linspace(max(low, fit.depth_ref / 2), high, 100)
    for label in ax.get_legend_handles_labels()[1]:
        if label.startswith("width "):
            width = float(label.removeprefix("width "))
            ax.plot(depths, fit.predict(depths, np.full_like(depths, width)), "k--", linewidth=0.7, alpha=0.6)
    ax.set_xlim(low, high)
    ax.plot([], [], "k--", linewidth=0.7, label="D4 fit a·D^−α + b·W^−β + c")
    ax.legend(fontsize=7)


# -- F4 ----------------------------------------------------------------------------------
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
    dalign: pd.DataFrame, out: str | Path, *, view: str = "full", split: str = "train", dpi: int = DPI
) -> None:
    """F4 (claim W1): d_align, d_∥, d_2 vs width (log x, symlog y with a zero line), every insertion
    point and seed with its jackknife interval, one colour per depth, the median where resolved over
    all of them; facets per dataset/family. NaN (the ‖μ‖² estimate ≤ 0) is counted in a note."""
    bounds = [f"{q}_{b}" for q in DIMENSIONS for b in ("lo", "hi")]
    _required(dalign, "dalign", ["point_index", "view", "split", *DIMENSIONS, *bounds])
    title = f"Claim W1: does d_align grow with width? (view={view}, split={split}; every insertion point; {MEDIAN})"
    notes: list[str] = []
    if dalign.empty:
        return _empty(out, title, notes, dpi)
    view, split = choose(dalign, "view", view), choose(dalign, "split", split)
    frame = dalign[(dalign["view"] == view) & (dalign["split"] == split)]
    if frame.empty:
        raise ValueError(f"dalign has no rows with view={view!r} and split={split!r} together")
    panels = _panels(frame)
    fig, axes = _figure(len(panels), len(DIMENSIONS), width=4.0)
    for r, (name, part) in enumerate(panels):
        unbounded = False
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
            last = c == len(DIMENSIONS) - 1  # one legend per row, outside the last panel
            _finish(
                axes[r, c],
                "width",
                label,
                name,
                logx=True,
                xticks=part["width"],
                extra=_detection_key() + (UNBOUNDED_KEY if unbounded else []),
                outside=True,
                legend=last,
            )
            _signed(axes[r, c], kept[quantity])
    _save(fig, out, title, notes, dpi)


# -- F5 ----------------------------------------------------------------------------------
CERTIFICATES = {  # line style, marker (shows a bound at a width without neighbours), legend
    "b_exact": ("--", "x", "B_exact (two-sample)"),
    "b_align": (":", "+", "B_align (one-sample)"),
}


def fig_misalignment(
    misalignment: pd.DataFrame,
    out: str | Path,
    M: int | None = None,
    K: int | None = None,
    *,
    view: str = "full",
    dpi: int = DPI,
) -> None:
    """F5 (claims W2, W3): P(μ_Mᵀ g_K ≤ 0) over draws from each model's own pools, every insertion point
    and seed with its Wilson interval (filled where it excludes 1/2), vs width at fixed (M, K), one colour
    per depth, beside the median certificates B_exact (two-sample, dashed) and B_align (one-sample,
    dotted) where defined (a gap: no certificate at that width); and vs M = K, one colour per width, at
    the depth with most widths. Legends sit outside the panels."""
    values = ["p_misalign", "p_lo", "p_hi", "b_exact", "b_align"]
    _required(misalignment, "misalignment", ["point_index", "view", "M", "K", *values])
    notes: list[str] = []
    frame = _clean(misalignment, ["p_misalign"], notes, why="no draws")
    if frame.empty:
        return _empty(out, "Claims W2, W3: misalignment probability vs width and sample size", notes, dpi)
    view = choose(frame, "view", view)
    frame = frame[frame["view"] == view]
    if M is None or K is None:
        M, K = default_mk(frame)
    title = f"Claims W2, W3: misalignment vs width and vs M = K (M={M}, K={K}, view={view})"
    for bound, (_, _, label) in CERTIFICATES.items():
        missing = int(frame[bound].isna().sum())
        if missing:
            notes.append(f"{missing} row(s) without a {label} certificate (NaN: undefined), not in its median")
    panels = _panels(frame)
    fig, axes = _figure(len(panels), 2, width=4.4)
    for r, (name, part) in enumerate(panels):
        fixed = part[(part["M"] == M) & (part["K"] == K)]
        ax = axes[r, 0]
        _estimates(
            ax,
            fixed,
            "width",
            "p_misalign",
            "depth",
            "depth",
            lo="p_lo",
            hi="p_hi",
            null=0.5,
            two_sided=True,
            logx=True,
        )
        depths = sorted(fixed["depth"].unique())
        for i, depth in enumerate(depths):
            line = fixed[fixed["depth"] == depth].groupby("width")[list(CERTIFICATES)].median()  # NaN skipped
            for bound, (linestyle, marker, _) in CERTIFICATES.items():
                ax.plot(
                    line.index,
                    line[bound],
                    color=_style(i, len(depths))["color"],
                    linestyle=linestyle,
                    linewidth=1,
                    marker=marker,
                    markersize=4,
                )
        ax.axhline(0.5, color="black", linewidth=0.8, linestyle="-.")
        kinds = [
            Line2D([], [], color="black", linestyle=style, marker=marker, label=text)
            for style, marker, text in [
                ("-", "None", "P: median (Wilson 95% bars)"),
                *CERTIFICATES.values(),
                ("-.", "None", "P = 1/2"),
            ]
        ]
        _finish(
            ax,
            "width",
            "P(misalign) / bound (probability)",
            f"{name}: M={M}, K={K}",
            logx=True,
            xticks=fixed["width"],
            extra=kinds + _detection_key(0.5),
        )
        ax.set_ylim(-0.02, 1.02)
        square = part[part["M"] == part["K"]]
        counts = square.groupby("depth")["width"].nunique()
        if counts.empty:
            axes[r, 1].axis("off")
            notes.append(f"{name}: no rows with M = K")
            continue
        depth = counts[counts == counts.max()].index.max()
        _estimates(
            axes[r, 1],
            square[square["depth"] == depth],
            "M",
            "p_misalign",
            "width",
            "width",
            lo="p_lo",
            hi="p_hi",
            null=0.5,
            two_sided=True,
            logx=True,
        )
        axes[r, 1].axhline(0.5, color="black", linewidth=0.8, linestyle="-.")
        _finish(
            axes[r, 1],
            "M = K (examples per draw)",
            "P(misalign) (probability)",
            f"{name}: depth {depth:g}",
            logx=True,
            xticks=square["M"],
            outside=True,
        )
        axes[r, 1].set_ylim(-0.02, 1.02)
    _save(fig, out, title, notes, dpi)


# -- F6 ----------------------------------------------------------------------------------
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


def fig_intervention(intervention: pd.DataFrame, out: str | Path, *, dpi: int = DPI) -> None:
    """F6 (claim W4): observed / predicted loss change at each model's smallest η, on the same test pool
    (a first-order consistency check of the implementation) and held out (prediction from test pool A,
    outcome on pool B), against width: one marker per model and view (the median over its insertion
    points, bar: their range; filled where the range excludes 0), one colour per depth, the median
    where resolved; a zero line and a reference line at ratio 1 (symlog y where a few ratios are large)."""
    _required(intervention, "intervention", ["point_index", "view", "eta", *POOLS])
    title = "Claim W4: observed / predicted test-loss change at the smallest step η (ratio > 0: signs agree)"
    notes: list[str] = []
    frame = smallest_step(_clean(intervention, ["eta"], notes))
    if frame.empty:
        return _empty(out, title, notes, dpi)
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
                _finish(
                    ax,
                    "width",
                    "observed / predicted (unitless)",
                    f"{name}, view {view}\n{pool}",
                    logx=True,
                    xticks=part["width"],
                    extra=_detection_key(),
                    outside=True,
                    legend=last,
                )
                _ratio_axis(ax, pd.concat([shown[value], shown["lo"], shown["hi"]]))
    _save(fig, out, title, notes, dpi)


# -- F7 ----------------------------------------------------------------------------------
GAIN_SE = "se_test_selected_minus_control"  # evaluation SE of the gain (E8's verdict reads ±2 of it)


def expansion_gain(expansion: pd.DataFrame) -> pd.DataFrame:
    """``expansion`` with ``gain`` = L_test(control) − L_test(selected) (> 0: the inserted block beat the
    same extra training of the old model) and its ±2 SE bounds ``gain_lo``/``gain_hi``."""
    gain = expansion["test_loss_control"] - expansion["test_loss_selected"]
    margin = 2 * expansion[GAIN_SE]
    return expansion.assign(gain=gain, gain_lo=gain - margin, gain_hi=gain + margin)


def fig_expansion(expansion: pd.DataFrame, out: str | Path, *, dpi: int = DPI) -> None:
    """F7 (E8, the Paper D mechanism behind D3): the gain L_test(control) − L_test(selected) of each model
    × insertion point with its ±2 SE bar (the E8 rule's), against the point's relative depth l/L, one
    colour per width (``_estimates``: filled where the bar excludes 0); × marks points where fallback
    was used."""
    _required(
        expansion,
        "expansion",
        ["point_index", "test_loss_selected", "test_loss_control", "fallback", GAIN_SE],
    )
    title = "E8, Paper D mechanism: does an inserted zero-init block beat the same extra training? (gain ± 2 SE)"
    notes: list[str] = []
    frame = _at_relative_depth(_clean(expansion, ["test_loss_control", "test_loss_selected", GAIN_SE], notes), notes)
    if frame.empty:
        return _empty(out, title, notes, dpi)
    frame = expansion_gain(frame)
    panels = _panels(frame)
    fig, axes = _figure(1, len(panels), width=4.6, height=3.4)
    for c, (name, part) in enumerate(panels):
        ax = axes[0, c]
        _estimates(ax, part, "relative_depth", "gain", "width", "width", lo="gain_lo", hi="gain_hi", two_sided=True)
        fell = part[part["fallback"].fillna(False).astype(bool)]
        ax.scatter(fell["relative_depth"], fell["gain"], marker="x", s=60, color="black", zorder=3)
        ax.axhline(0, color="black", linewidth=1)
        fallback = [Line2D([], [], color="black", linestyle="none", marker="x", label="fallback used")]
        _finish(
            ax,
            RELATIVE,
            "gain (nats): test loss of\ncontrol − selected expanded model",
            name,
            extra=_detection_key() + fallback,
            outside=True,
            legend=c == len(panels) - 1,
        )
    _save(fig, out, title, notes, dpi)


# -- F8 ----------------------------------------------------------------------------------
def fig_trajectory(
    trajectory: pd.DataFrame, out: str | Path, *, view: str = "full", split: str = "train", dpi: int = DPI
) -> None:
    """F8 (E10, W1 along training): d_align against the training step (symlog x, so step 0 shows) and,
    in a second row, against the snapshot's train loss (widths compared at equal fit); every insertion
    point with its jackknife interval (filled where it excludes 0), one colour per width, the median where
    resolved; symlog y with a zero line; one column per dataset / family / depth."""
    _required(trajectory, "trajectory", ["step", "train_loss", "view", "split", "d_align", "d_align_lo", "d_align_hi"])
    title = f"E10: d_align along training (view={view}, split={split}; every insertion point; {MEDIAN})"
    notes: list[str] = []
    if trajectory.empty:
        return _empty(out, title, notes, dpi)
    view, split = choose(trajectory, "view", view), choose(trajectory, "split", split)
    frame = _clean(
        trajectory[(trajectory["view"] == view) & (trajectory["split"] == split)],
        ["d_align"],
        notes,
        why="undetermined: the estimate of ‖μ‖² is ≤ 0",
    )
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
            else:
                ax.invert_xaxis()  # training lowers the loss: progress reads left to right
            last = c == len(columns) - 1  # one legend per row, outside the last panel
            _finish(ax, label, "d_align (unitless)", name, extra=_detection_key(), outside=True, legend=last)
            _signed(ax, part["d_align"])
    _save(fig, out, title, notes, dpi)


# -- F9 ----------------------------------------------------------------------------------
def fig_dalign_paper_widths(
    trajectory: pd.DataFrame, out: str | Path, *, view: str = "full", split: str = "train", dpi: int = DPI
) -> None:
    """F9 (W1 at the paper's widths): d_align of the llamas against width (log x), one colour per E10
    snapshot step, every insertion point and seed with its jackknife interval, a line through the median
    at each width; Paper W's two values (3.9 at 512, 9.5 at 3072) marked as black stars; symlog y with a
    zero line; one panel per dataset / depth."""
    _required(trajectory, "trajectory", ["step", "view", "split", "d_align", "d_align_lo", "d_align_hi"])
    title = f"Claim W1 at the paper's widths: d_align vs width at each training step (view={view}, split={split})"
    notes: list[str] = []
    llamas = trajectory[trajectory["family"] == "llama"]
    if llamas.empty:
        return _empty(out, title, notes, dpi)
    view, split = choose(llamas, "view", view), choose(llamas, "split", split)
    frame = _clean(
        llamas[(llamas["view"] == view) & (llamas["split"] == split)],
        ["d_align"],
        notes,
        why="undetermined: the estimate of ‖μ‖² is ≤ 0",
    )
    panels = [(f"{ds} / llama / depth {depth:g}", part) for (ds, depth), part in frame.groupby(["dataset", "depth"])]
    fig, axes = _figure(1, len(panels), width=5.0, height=3.6)
    paper = Line2D([], [], color="black", marker="*", markersize=9, linestyle="none", label="Paper W (LLaMA)")
    for c, (name, part) in enumerate(panels):
        ax = axes[0, c]
        _estimates(ax, part, "width", "d_align", "step", "step", lo="d_align_lo", hi="d_align_hi", logx=True)
        ax.plot(list(PAPER_W_DALIGN), list(PAPER_W_DALIGN.values()), "k*", markersize=9, zorder=4)
        ticks = [*part["width"], *PAPER_W_DALIGN]
        _finish(ax, "width", "d_align", name, logx=True, xticks=ticks, extra=[paper, *_detection_key()], outside=True)
        _signed(ax, [*part["d_align"], *PAPER_W_DALIGN.values()])
    _save(fig, out, title, notes, dpi)


# -- registry ----------------------------------------------------------------------------
FIGURES: dict[str, tuple[Callable[..., None], list[str]]] = {
    "F1_covariance": (fig_covariance, ["covmats", "covariance"]),
    "F2_signal_decay": (fig_signal, ["signal"]),
    "F3_rebound": (fig_rebound, ["training"]),
    "F4_dalign_vs_width": (fig_dalign, ["dalign"]),
    "F5_misalignment": (fig_misalignment, ["misalignment"]),
    "F6_intervention": (fig_intervention, ["intervention"]),
    "F7_expansion": (fig_expansion, ["expansion"]),
    "F8_dalign_over_training": (fig_trajectory, ["trajectory"]),
    "F9_dalign_at_paper_widths": (fig_dalign_paper_widths, ["trajectory"]),
}


def make_figure(stem: str, tables_dir: str | Path, out_dir: str | Path, *, dpi: int = DPI) -> Path:
    """Draw figure ``stem`` from ``tables_dir/<table>.csv`` (covmats: ``.parquet``) into
    ``out_dir/<stem>.{pdf,png}``; returns the PDF path."""
    if stem not in FIGURES:
        raise KeyError(f"unknown figure {stem!r}; known figures: {sorted(FIGURES)}")
    draw, tables = FIGURES[stem]
    frames = [read_table(table_path(tables_dir, table), table) for table in tables]
    out = Path(out_dir) / f"{stem}.pdf"
    draw(*frames, out, dpi=dpi)
    return out
