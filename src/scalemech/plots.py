"""Figures F1–F7 of docs/science.md §5, one function per claim, drawn from tidy tables only.

Each ``fig_<name>(tables..., out)`` checks the columns it needs
(``scalemech.tables.check_columns``), drops rows with NaN (an estimate that is undefined:
counted in a note printed under the figure) and writes ``out`` as PDF and PNG with the same
stem. No finite value is dropped: estimates that can come out ≤ 0 (‖μ‖², d_align, loss
changes, ratios) sit on linear or symlog axes with a zero line, each insertion point's
estimate with its interval (``_estimates``); a marker is filled where the interval excludes
the null value (0; 1/2 for a misalignment probability) and open, with a grey bar, where it
does not ("not detectable"). Lines run through the median over all estimates, negative ones
included. Lines differ in colour (a cubehelix palette, whose lightness falls monotonically,
so it survives grayscale printing), marker and line style. ``FIGURES`` maps each figure's
file stem to its function and the tables it reads; ``make_figure`` draws one from a tables
folder.

F3 and F7 show per-model values: insertion points aggregated by the median over points of each
model (``over_points``), seeds by the mean (``over_seeds``); each title says so.
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
from matplotlib.ticker import FormatStrFormatter, LogLocator, MaxNLocator, NullFormatter

from .tables import check_columns, model_keys, read_table

MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]
LINESTYLES = ["-", "--", "-.", ":"]
GRID_KEYS = ["dataset", "family", "depth", "width"]  # a grid cell: what seeds are averaged over
PANEL_KEYS = ["dataset", "family"]  # one facet per dataset/family
DPI = 150
D1_BAND_SDS = 2.0  # F1 draws the null ± this many sd (scalemech.report.D1_NULL_SDS: above it is structure)


# -- aggregation shared with scalemech.report --------------------------------------------
def over_points(frame: pd.DataFrame, values: Sequence[str], by: Sequence[str] = ()) -> pd.DataFrame:
    """Median of ``values`` over insertion points: one row per model (× ``by``)."""
    keys = model_keys() + list(by)
    return frame.groupby(keys, as_index=False, dropna=False)[list(values)].median()


def over_seeds(frame: pd.DataFrame, values: Sequence[str], by: Sequence[str] = ()) -> pd.DataFrame:
    """Mean of ``values`` over seeds: one row per (dataset, family, depth, width) (× ``by``)."""
    keys = GRID_KEYS + list(by)
    return frame.groupby(keys, as_index=False, dropna=False)[list(values)].mean()


def default_mk(misalignment: pd.DataFrame) -> tuple[int, int]:
    """The largest ``M = K`` at which some ``p_misalign > 0``; else the largest ``M = K``; else the largest (M, K)."""
    square = misalignment[misalignment["M"] == misalignment["K"]]
    positive = square[square["p_misalign"] > 0]
    pool = positive if len(positive) else square if len(square) else misalignment
    if pool.empty:
        raise ValueError("misalignment table has no rows to pick (M, K) from")
    M, K = pool.sort_values(["M", "K"]).iloc[-1][["M", "K"]]
    return int(M), int(K)


def choose(frame: pd.DataFrame, column: str, wanted: object | None) -> object:
    """``wanted`` if ``frame[column]`` holds it, the first sorted value when ``wanted`` is None."""
    present = sorted(frame[column].dropna().unique())
    if not present:
        raise ValueError(f"column {column!r} holds no values to choose from")
    if wanted is None:
        return present[0]
    if wanted not in present:
        raise ValueError(f"{column}={wanted!r} is not in the table; allowed: {present}")
    return wanted


def as_flag(values: pd.Series) -> pd.Series:
    """A boolean column as floats 1/0, NaN where missing (CSV gives bools, strings or NaN)."""
    text = values.astype(str).str.strip().str.lower()
    return pd.Series(
        np.where(text.isin(["true", "1", "1.0"]), 1.0, np.where(text.isin(["false", "0", "0.0"]), 0.0, np.nan)),
        index=values.index,
    )


def table_path(tables_dir: str | Path, table: str) -> Path:
    """Where the workflow keeps ``table``: ``<tables_dir>/<table>.csv`` (covmats: ``.parquet``)."""
    return Path(tables_dir) / f"{table}{'.parquet' if table == 'covmats' else '.csv'}"


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
    return sns.cubehelix_palette(max(n, 1), start=0.3, rot=-0.6, dark=0.1, light=0.62, reverse=True)


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


GREY = "0.6"  # bars (and open markers' fill) of estimates whose interval contains the null value


def detected(frame: pd.DataFrame, lo: str, hi: str, null: float = 0.0, two_sided: bool = False) -> pd.Series:
    """Rows whose interval ``[lo, hi]`` lies above ``null`` (``two_sided``: above or below it); False
    where a bound is NaN: the rows ``scalemech.report.sort_rows`` counts as usable."""
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
    bar where it does not; a line (legend ``name level``) through the median over all rows at each x."""
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
        median = part.groupby(x)[y].median()
        ax.plot(
            median.index.astype(float),
            median.to_numpy(),
            color=style["color"],
            linestyle=style["linestyle"],
            linewidth=1.2,
            label=f"{name} {level:g}",
        )


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
    """Symlog ``axis`` (linear within the 10th percentile of the nonzero |values|, log beyond), so both signs
    and several decades show, with a zero line."""
    size = np.abs(np.asarray(values, dtype=float))
    size = size[np.isfinite(size) & (size > 0)]
    linthresh = float(np.quantile(size, 0.1)) if len(size) else 1.0
    if axis == "y":
        ax.set_yscale("symlog", linthresh=linthresh)
        ax.axhline(0, color="black", linewidth=0.8)
    else:
        ax.set_xscale("symlog", linthresh=linthresh)
        ax.axvline(0, color="black", linewidth=0.8)


def _panels(frame: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """(``"dataset / family"``, rows) per dataset/family, sorted."""
    return [(f"{ds} / {fam}", part) for (ds, fam), part in frame.groupby(PANEL_KEYS, sort=True)]


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
) -> None:
    """Labels, log scales with plain-number ticks (``xticks`` where given), grid, and a legend
    (labelled lines, then the ``extra`` key entries) that moves outside the axes beyond six entries
    (always when ``outside``: panels full of markers)."""
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
    ax.grid(alpha=0.3, which="both")
    handles = ax.get_legend_handles_labels()[0] + list(extra)
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
def fig_covariance(covmats: pd.DataFrame, covariance: pd.DataFrame, out: str | Path, *, dpi: int = DPI) -> None:
    """F1 (claim D1): |corr| heat maps of the pooled activation gradient at up to three points
    (first, middle, last) for the narrowest and widest model of the first dataset/family, and the
    bias-corrected off-diagonal energy ratio ‖Σ − diag Σ‖²_F / ‖Σ‖²_F beside its permutation null
    (± 2 sd: above it counts as structure) per point; low-rank points (by construction) are framed."""
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
    fig = Figure(figsize=(2.4 * n_points + 4.2, 2.4 * len(chosen) + 0.6), layout="constrained")
    grid = fig.add_gridspec(len(chosen), n_points + 1, width_ratios=[1] * n_points + [1.8])
    for r, (_, model) in enumerate(chosen.iterrows()):
        maps = heat[heat["model"] == model["model"]]
        points = _spread(maps["point_index"].unique(), 3)
        for c, index in enumerate(points):
            at = maps[maps["point_index"] == index]
            matrix = at.pivot_table(index="row", columns="col", values="corr").abs()  # (dim, dim)
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
            ax.set(xlabel="unit", ylabel="unit" if c == 0 else "")
            ax.set_title(f"{_model_label(model['depth'], model['width'])}\npoint {at['point'].iloc[0]}", fontsize=8)
    ax = fig.add_subplot(grid[:, -1])
    ratios = _only(covariance, dataset, family)
    marked = False
    for i, (_, model) in enumerate(chosen.iterrows()):
        part = over_seeds(
            ratios[(ratios["depth"] == model["depth"]) & (ratios["width"] == model["width"])],
            ["offdiag_ratio", "offdiag_ratio_null", "offdiag_ratio_null_sd", "low_rank"],
            by=["point_index"],
        )
        part = part.sort_values("point_index")
        style = _style(i, len(chosen))
        label = _model_label(model["depth"], model["width"])
        ax.plot(part["point_index"], part["offdiag_ratio"], label=f"{label}: measured", **style)
        ax.errorbar(
            part["point_index"],
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
                low["point_index"],
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
        "insertion point index (block, input → output)",
        "off-diagonal energy ratio, corrected (unitless)",
        f"{dataset} / {family}: measured vs independence null",
    )
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    _save(fig, out, title, notes, dpi)


# -- F2 ----------------------------------------------------------------------------------
SIGNALS = {
    "mu_sq": ("‖μ‖² (activation-gradient mean)", "mu_sq_lo", "mu_sq_hi"),
    "block_grad_norm": ("‖∇θ L‖, new block at θ = 0", None, None),
}


def fig_signal(signal: pd.DataFrame, out: str | Path, *, split: str = "test", dpi: int = DPI) -> None:
    """F2 (claim D2): ‖μ‖² (with its jackknife interval) and the inserted block's gradient norm vs depth on
    ``split``, every insertion point and seed of every model, one colour per width, a line through the
    median over all of them; symlog y with a zero line (negative estimates of ‖μ‖² stay in)."""
    _required(signal, "signal", ["point_index", "split", "mu_sq", "mu_sq_lo", "mu_sq_hi", "block_grad_norm"])
    title = (
        f"Claim D2: does the first-order signal decay with depth? ({split} split; every insertion point, line: median)"
    )
    notes: list[str] = []
    if signal.empty:
        return _empty(out, title, notes, dpi)
    frame = signal[signal["split"] == choose(signal, "split", split)]
    panels = _panels(frame)
    fig, axes = _figure(len(SIGNALS), len(panels), width=4.0)
    for c, (name, part) in enumerate(panels):
        for r, (quantity, (label, lo, hi)) in enumerate(SIGNALS.items()):
            kept = _clean(part, [quantity], notes, why="no estimate")
            _estimates(axes[r, c], kept, "depth", quantity, "width", "width", lo=lo, hi=hi)
            _finish(axes[r, c], "depth (layers)", label, name, extra=_detection_key() if lo else (), outside=True)
            _signed(axes[r, c], kept[quantity])
    _save(fig, out, title, notes, dpi)


# -- F3 ----------------------------------------------------------------------------------
def fig_rebound(training: pd.DataFrame, out: str | Path, *, dpi: int = DPI) -> None:
    """F3 (claim D3): test loss vs depth, one line per width, and a depth × width heat map of
    test loss (mean over seeds; the best cell framed)."""
    _required(training, "training", ["test_loss"])
    title = "Claim D3: does test loss improve with joint depth-width scaling, and rebound in depth at small width?"
    notes: list[str] = []
    frame = _clean(training, ["test_loss"], notes)
    if frame.empty:
        return _empty(out, title, notes, dpi)
    panels = _panels(frame)
    fig, axes = _figure(2, len(panels), width=4.0, height=3.2)
    for c, (name, part) in enumerate(panels):
        grid = over_seeds(part, ["test_loss"])
        _lines(axes[0, c], grid, "depth", "test_loss", "width", "width")
        _finish(axes[0, c], "depth (layers)", "test loss (nats)", name)
        table = grid.pivot_table(index="depth", columns="width", values="test_loss")  # (depths, widths)
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
        ax.add_patch(Rectangle((best[1], best[0]), 1, 1, fill=False, edgecolor="black", linewidth=2))
        ax.set(xlabel="width", ylabel="depth (layers)", title=f"{name}: best cell framed")
        ax.title.set_fontsize(9)
    _save(fig, out, title, notes, dpi)


# -- F4 ----------------------------------------------------------------------------------
DIMENSIONS = {"d_align": "d_align = min(d_∥, d_2)", "d_par": "d_∥ = ‖μ‖⁴ / μᵀΣμ", "d_2": "d_2 = ‖μ‖⁴ / tr(Σ²)"}


def fig_dalign(
    dalign: pd.DataFrame, out: str | Path, *, view: str = "full", split: str = "train", dpi: int = DPI
) -> None:
    """F4 (claim W1): d_align, d_∥, d_2 vs width (log x, symlog y with a zero line), every insertion
    point and seed with its jackknife interval, one colour per depth, a line through the median over
    all of them; facets per dataset/family. NaN (the ‖μ‖² estimate ≤ 0) is counted in a note."""
    bounds = [f"{q}_{b}" for q in DIMENSIONS for b in ("lo", "hi")]
    _required(dalign, "dalign", ["point_index", "view", "split", *DIMENSIONS, *bounds])
    title = f"Claim W1: does d_align grow with width? (view={view}, split={split}; every insertion point, line: median)"
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
        for c, (quantity, label) in enumerate(DIMENSIONS.items()):
            kept = _clean(part, [quantity], notes, why="undetermined: the estimate of ‖μ‖² is ≤ 0")
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
                xticks=kept["width"],
                extra=_detection_key() if last else (),
                outside=last,
            )
            if not last and axes[r, c].get_legend():
                axes[r, c].get_legend().remove()
            _signed(axes[r, c], kept[quantity])
    _save(fig, out, title, notes, dpi)


# -- F5 ----------------------------------------------------------------------------------
CERTIFICATES = {"b_exact": ("--", "B_exact (two-sample)"), "b_align": (":", "B_align (one-sample)")}


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
    dotted) where defined; and vs M = K, one colour per width, at the depth with most widths."""
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
    title = (
        f"Claims W2, W3: does misalignment fall with width and with M = K? (M={M}, K={K}, view={view}; "
        f"P over draws from each model's own pools, every insertion point, line: median)"
    )
    for bound, (_, label) in CERTIFICATES.items():
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
            for bound, (linestyle, _) in CERTIFICATES.items():
                ax.plot(
                    line.index,
                    line[bound],
                    color=_style(i, len(depths))["color"],
                    linestyle=linestyle,
                    linewidth=1,
                    marker="_",
                    markersize=8,
                )  # the marker shows a bound at a single width
        ax.axhline(0.5, color="black", linewidth=0.8, linestyle="-.")
        kinds = [
            Line2D([], [], color="black", linestyle=s, label=t)
            for s, t in [("-", "P: median (Wilson 95% bars)"), *CERTIFICATES.values(), ("-.", "P = 1/2")]
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
        )
        axes[r, 1].set_ylim(-0.02, 1.02)
    _save(fig, out, title, notes, dpi)


# -- F6 ----------------------------------------------------------------------------------
def _ratio_panel(ax: Axes, frame: pd.DataFrame, ratio: str, title: str, xlabel: str) -> None:
    """Observed/predicted ``ratio`` vs η, one line per model × point × view, one colour per width."""
    ax.axhspan(0.96, 0.99, color="0.85", label="paper: 96–99 %")
    ax.axhline(1.0, color="black", linewidth=1)
    ax.axhline(0.0, color="black", linewidth=0.6, linestyle=":")
    widths = sorted(frame["width"].unique())
    for i, width in enumerate(widths):
        style = _style(i, len(widths))
        for j, (_, line) in enumerate(frame[frame["width"] == width].groupby(model_keys() + ["point_index", "view"])):
            line = line.sort_values("eta")
            ax.plot(
                line["eta"], line[ratio], alpha=0.8, markersize=4, label=f"width {width:g}" if j == 0 else None, **style
            )
    _finish(ax, xlabel, "observed / predicted (unitless)", title, logx=True)
    ax.set_yscale("symlog", linthresh=2.0)  # linear around the first-order regime (ratio ≈ 1), log beyond


def fig_intervention(intervention: pd.DataFrame, out: str | Path, *, dpi: int = DPI) -> None:
    """F6 (claim W4): held out (prediction −η μ_Mᵀ g_A from test pool A, loss change observed on an
    independent test pool B): observed vs predicted, signed, symlog both axes (filled: signs agree, open:
    they differ) with y = x; then observed/predicted vs η on the same pool (a first-order consistency
    check of the implementation) beside the held-out one, one line per model × point × view."""
    _required(
        intervention,
        "intervention",
        [
            "point_index",
            "view",
            "eta",
            "predicted",
            "observed",
            "ratio",
            "sign_agree",
            "observed_heldout",
            "ratio_heldout",
            "sign_agree_heldout",
        ],
    )
    title = "Claim W4: does a zero-init residual step change held-out test loss as predicted to first order?"
    notes: list[str] = []
    frame = _clean(intervention, ["eta", "predicted", "observed", "ratio"], notes)
    frame = _clean(frame, ["eta"], notes, positive=True)
    if frame.empty:
        return _empty(out, title, notes, dpi)
    held = _clean(frame, ["observed_heldout", "ratio_heldout"], notes, why="no held-out measurement")
    held = held.assign(sign_agree_heldout=as_flag(held["sign_agree_heldout"]) == 1)
    panels = _panels(frame)
    fig, axes = _figure(len(panels), 3, width=4.0, height=3.4)
    for r, (name, part) in enumerate(panels):
        ax = axes[r, 0]
        dots_all = _only(held, *part[PANEL_KEYS].iloc[0])
        widths = sorted(dots_all["width"].unique())
        for i, width in enumerate(widths):
            style = _style(i, len(widths))
            for agree, suffix in ((True, ""), (False, " (sign differs)")):
                dots = dots_all[(dots_all["width"] == width) & (dots_all["sign_agree_heldout"] == agree)]
                if len(dots):
                    ax.scatter(
                        dots["predicted"],
                        dots["observed_heldout"],
                        marker=style["marker"],
                        s=18,
                        edgecolors=style["color"],
                        facecolors=style["color"] if agree else "none",
                        label=f"width {width:g}{suffix}",
                    )
        both = dots_all[["predicted", "observed_heldout"]].to_numpy(float)
        if len(both):
            ends = [both.min(), both.max()]
            ax.plot(ends, ends, color="black", linestyle="--", linewidth=1, label="y = x")
        _finish(
            ax,
            "predicted ΔL = −η μ_Mᵀ g_A (nats)",
            "observed ΔL on test pool B (nats)",
            f"{name}: held out; filled = signs agree",
        )
        _signed(ax, both.ravel(), "x")
        _signed(ax, both.ravel(), "y")
        _ratio_panel(
            axes[r, 1], part, "ratio", f"{name}: same pool (implementation check)", "step size η (parameter units)"
        )
        _ratio_panel(
            axes[r, 2],
            _only(held, *part[PANEL_KEYS].iloc[0]),
            "ratio_heldout",
            f"{name}: held out",
            "step size η (parameter units)",
        )
        low = min(axes[r, 1].get_ylim()[0], axes[r, 2].get_ylim()[0])
        high = max(axes[r, 1].get_ylim()[1], axes[r, 2].get_ylim()[1])
        for ax in axes[r, 1:]:
            ax.set_ylim(low, high)
            if -2.0 <= low and high <= 2.0:  # all within the linear part of the symlog axis
                ax.yaxis.set_major_locator(MaxNLocator(6))
                ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
    _save(fig, out, title, notes, dpi)


# -- F7 ----------------------------------------------------------------------------------
def fig_expansion(expansion: pd.DataFrame, out: str | Path, *, dpi: int = DPI) -> None:
    """F7 (claim D3, Paper D mechanism): test-loss change of the selected expanded model
    (L_test(f_selected) − L_test(f_old), solid, filled) and of the control (dashed, open) per
    insertion point, one colour per model (mean over seeds); × marks points where fallback was used."""
    _required(
        expansion, "expansion", ["point_index", "test_loss_old", "test_loss_selected", "test_loss_control", "fallback"]
    )
    title = "Paper D mechanism (claim D3): does inserting a zero-init block lower test loss?"
    notes: list[str] = []
    frame = _clean(expansion, ["test_loss_old", "test_loss_selected"], notes)
    frame = frame.assign(
        d_selected=frame["test_loss_selected"] - frame["test_loss_old"],
        d_control=frame["test_loss_control"] - frame["test_loss_old"],
        fallback=frame["fallback"].fillna(False).astype(bool).astype(float),
    )
    if frame.empty:
        return _empty(out, title, notes, dpi)
    panels = _panels(frame)
    fig, axes = _figure(1, len(panels), width=4.6, height=3.4)
    for c, (name, part) in enumerate(panels):
        ax = axes[0, c]
        summary = over_seeds(part, ["d_selected", "d_control", "fallback"], by=["point_index"])
        models = summary[["depth", "width"]].drop_duplicates().sort_values(["width", "depth"])
        for i, (depth, width) in enumerate(models.itertuples(index=False)):
            line = summary[(summary["depth"] == depth) & (summary["width"] == width)].sort_values("point_index")
            style = _style(i, len(models))
            ax.plot(
                line["point_index"],
                line["d_selected"],
                markersize=5,
                label=_model_label(depth, width),
                **{**style, "linestyle": "-"},
            )
            ax.plot(
                line["point_index"],
                line["d_control"],
                color=style["color"],
                marker=style["marker"],
                markerfacecolor="none",
                linestyle="--",
                markersize=5,
            )
            fell = line[line["fallback"] > 0]
            ax.scatter(fell["point_index"], fell["d_selected"], marker="x", s=60, color="black", zorder=3)
        ax.axhline(0, color="black", linewidth=1)
        kinds = [
            Line2D([], [], color="black", linestyle="-", marker="o", label="selected − old"),
            Line2D([], [], color="black", linestyle="--", marker="o", markerfacecolor="none", label="control − old"),
            Line2D([], [], color="black", linestyle="none", marker="x", label="fallback used"),
        ]
        _finish(ax, "insertion point index (block, input → output)", "Δ test loss (nats)", name, extra=kinds)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    _save(fig, out, title, notes, dpi)


# -- registry ----------------------------------------------------------------------------
# -- F8 ----------------------------------------------------------------------------------
def fig_trajectory(
    trajectory: pd.DataFrame, out: str | Path, *, view: str = "full", split: str = "train", dpi: int = DPI
) -> None:
    """F8 (E10, W1 along training): d_align against the training step (symlog x, so step 0 shows) and,
    in a second row, against the snapshot's train loss (widths compared at equal fit); every insertion
    point with its jackknife interval (filled where it excludes 0), one colour per width, a line through
    the median; symlog y with a zero line; one column per dataset / family / depth."""
    _required(trajectory, "trajectory", ["step", "train_loss", "view", "split", "d_align", "d_align_lo", "d_align_hi"])
    title = f"E10: d_align along training (view={view}, split={split}; every insertion point, line: median)"
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
            _finish(ax, label, "d_align", name, extra=_detection_key() if c == len(columns) - 1 and r == 0 else ())
            _signed(ax, part["d_align"])
    _save(fig, out, title, notes, dpi)


FIGURES: dict[str, tuple[Callable[..., None], list[str]]] = {
    "F1_covariance": (fig_covariance, ["covmats", "covariance"]),
    "F2_signal_decay": (fig_signal, ["signal"]),
    "F3_rebound": (fig_rebound, ["training"]),
    "F4_dalign_vs_width": (fig_dalign, ["dalign"]),
    "F5_misalignment": (fig_misalignment, ["misalignment"]),
    "F6_intervention": (fig_intervention, ["intervention"]),
    "F7_expansion": (fig_expansion, ["expansion"]),
    "F8_dalign_over_training": (fig_trajectory, ["trajectory"]),
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
