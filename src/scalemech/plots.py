"""Figures F1–F7 of PAPERS.md §5, one function per claim, drawn from tidy tables only.

Each ``fig_<name>(tables..., out)`` checks the columns it needs
(``scalemech.tables.check_columns``), drops rows with NaN (or, on a log axis, values ≤ 0)
with a note printed under the figure, and writes ``out`` as PDF and PNG with the same stem.
Lines differ in colour (a cubehelix palette, whose lightness falls monotonically, so it
survives grayscale printing), marker and line style. ``FIGURES`` maps each figure's file
stem to its function and the tables it reads; ``make_figure`` draws one from a tables folder.

Insertion points are aggregated by the median over points of each model (``over_points``),
seeds by the mean (``over_seeds``); each title says so.
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


def table_path(tables_dir: str | Path, table: str) -> Path:
    """Where the workflow keeps ``table``: ``<tables_dir>/<table>.csv`` (covmats: ``.parquet``)."""
    return Path(tables_dir) / f"{table}{'.parquet' if table == 'covmats' else '.csv'}"


# -- drawing helpers ---------------------------------------------------------------------
def _required(frame: pd.DataFrame, table: str, extra: Sequence[str]) -> None:
    check_columns(frame, table, required=model_keys() + list(extra))


def _clean(frame: pd.DataFrame, columns: Sequence[str], notes: list[str], positive: bool = False) -> pd.DataFrame:
    """Rows with every ``columns`` finite (and > 0 when ``positive``, for log axes); a note says what went."""
    values = frame[list(columns)].astype(float)
    keep = np.isfinite(values).all(axis=1) & ((values > 0).all(axis=1) if positive else True)
    if (~keep).any():
        why = "NaN or ≤ 0 (log axis)" if positive else "NaN"
        notes.append(f"{int((~keep).sum())} row(s) with {why} in {list(columns)} dropped")
    return frame[keep]


def _palette(n: int) -> list:
    return sns.cubehelix_palette(max(n, 1), start=0.3, rot=-0.6, dark=0.1, light=0.62, reverse=True)


def _style(i: int, n: int) -> dict:
    return {"color": _palette(n)[i], "marker": MARKERS[i % len(MARKERS)], "linestyle": LINESTYLES[i % len(LINESTYLES)]}


def _bars(value: pd.Series, lo: pd.Series, hi: pd.Series) -> np.ndarray:
    """Error-bar lengths (2, n) below and above ``value``; none where a bound is NaN."""
    return np.vstack([(value - lo).clip(lower=0).fillna(0), (hi - value).clip(lower=0).fillna(0)])


def _lines(ax: Axes, frame: pd.DataFrame, x: str, y: str, by: str, name: str,
           lo: str | None = None, hi: str | None = None) -> None:
    """One line of ``y`` vs ``x`` per level of ``by`` (legend ``name level``), solid bars from ``lo``/``hi``
    (lines with bars are dodged sideways by a few percent, for log x axes, so the bars stay apart)."""
    levels = sorted(frame[by].unique())
    for i, level in enumerate(levels):
        part = frame[frame[by] == level].sort_values(x)
        xs, yerr = part[x], None
        if lo is not None:
            xs = xs * (1 + 0.04 * (i - (len(levels) - 1) / 2))
            yerr = _bars(part[y], part[lo], part[hi])
        bars = ax.errorbar(xs, part[y], yerr=yerr, capsize=2, markersize=4, label=f"{name} {level:g}",
                           **_style(i, len(levels)))
        for bar in bars.lines[2]:
            bar.set_linestyle("-")


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


def _finish(ax: Axes, xlabel: str, ylabel: str, title: str, logx: bool = False, logy: bool = False,
            xticks: Sequence[float] | None = None, extra: Sequence[Line2D] = ()) -> None:
    """Labels, log scales with plain-number ticks (``xticks`` where given), grid, and a legend
    (labelled lines, then the ``extra`` key entries) that moves outside the axes beyond six entries."""
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
    if len(handles) > 6:
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
    off-diagonal energy ratio ‖Σ − diag Σ‖²_F / ‖Σ‖²_F beside its null (± sd) per point."""
    _required(covmats, "covmats", ["point", "point_index", "row", "col", "corr"])
    _required(covariance, "covariance", ["point_index", "offdiag_ratio", "offdiag_ratio_null", "offdiag_ratio_null_sd"])
    title = "Claim D1: is the activation-gradient covariance close to diagonal?"
    notes: list[str] = []
    covmats = _clean(covmats, ["corr"], notes)
    covariance = _clean(covariance, ["offdiag_ratio"], notes)
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
            sns.heatmap(matrix, ax=ax, vmin=0, vmax=1, cmap="mako_r", square=True, xticklabels=False,
                        yticklabels=False, cbar=c == len(points) - 1, cbar_kws={"label": "|correlation|"})
            ax.set(xlabel="unit", ylabel="unit" if c == 0 else "")
            ax.set_title(f"{_model_label(model['depth'], model['width'])}\npoint {at['point'].iloc[0]}", fontsize=8)
    ax = fig.add_subplot(grid[:, -1])
    ratios = _only(covariance, dataset, family)
    for i, (_, model) in enumerate(chosen.iterrows()):
        part = over_seeds(ratios[(ratios["depth"] == model["depth"]) & (ratios["width"] == model["width"])],
                          ["offdiag_ratio", "offdiag_ratio_null", "offdiag_ratio_null_sd"], by=["point_index"])
        part = part.sort_values("point_index")
        style = _style(i, len(chosen))
        label = _model_label(model["depth"], model["width"])
        ax.plot(part["point_index"], part["offdiag_ratio"], label=f"{label}: measured", **style)
        ax.errorbar(part["point_index"], part["offdiag_ratio_null"], yerr=part["offdiag_ratio_null_sd"].fillna(0),
                    color=style["color"], marker=style["marker"], markerfacecolor="none", linestyle=":",
                    capsize=2, label=f"{label}: null (± sd)")
    _finish(ax, "insertion point index (block, input → output)", "off-diagonal energy ratio (unitless)",
            f"{dataset} / {family}: measured vs diagonal null")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(0, 1)
    _save(fig, out, title, notes, dpi)


# -- F2 ----------------------------------------------------------------------------------
SIGNALS = {"mu_sq": "‖μ‖² (activation-gradient mean)", "block_grad_norm": "‖∇θ L‖, new block at θ = 0"}


def fig_signal(signal: pd.DataFrame, out: str | Path, *, split: str = "test", dpi: int = DPI) -> None:
    """F2 (claim D2): ‖μ‖² and the inserted block's gradient norm vs depth on ``split``, one line per
    width, log y; median over insertion points per model, mean over seeds."""
    _required(signal, "signal", ["point_index", "split", *SIGNALS])
    title = f"Claim D2: does the first-order signal decay with depth? ({split} split, median over insertion points)"
    notes: list[str] = []
    if signal.empty:
        return _empty(out, title, notes, dpi)
    frame = signal[signal["split"] == choose(signal, "split", split)]
    panels = _panels(frame)
    fig, axes = _figure(len(SIGNALS), len(panels))
    for c, (name, part) in enumerate(panels):
        for r, (quantity, label) in enumerate(SIGNALS.items()):
            kept = _clean(part, [quantity], notes, positive=True)
            summary = over_seeds(over_points(kept, [quantity]), [quantity])
            _lines(axes[r, c], summary, "depth", quantity, "width", "width")
            _finish(axes[r, c], "depth (layers)", label, name, logy=True)
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
        ax = axes[1, c]
        sns.heatmap(table, ax=ax, annot=True, fmt=".3g", cmap="mako_r", annot_kws={"fontsize": 7},
                    cbar_kws={"label": "test loss (nats)"})
        best = np.unravel_index(np.nanargmin(table.to_numpy()), table.shape)
        ax.add_patch(Rectangle((best[1], best[0]), 1, 1, fill=False, edgecolor="black", linewidth=2))
        ax.set(xlabel="width", ylabel="depth (layers)", title=f"{name}: best cell framed")
        ax.title.set_fontsize(9)
    _save(fig, out, title, notes, dpi)


# -- F4 ----------------------------------------------------------------------------------
DIMENSIONS = {"d_align": "d_align = min(d_∥, d_2)", "d_par": "d_∥ = ‖μ‖⁴ / μᵀΣμ",
              "d_2": "d_2 = ‖μ‖⁴ / tr(Σ²)"}


def fig_dalign(dalign: pd.DataFrame, out: str | Path, *, view: str = "full", split: str = "train",
               dpi: int = DPI) -> None:
    """F4 (claim W1): d_align, d_∥, d_2 vs width (log–log), one line per depth, facets per
    dataset/family; median over insertion points of the estimate and of its interval bounds."""
    bounds = [f"{q}_{b}" for q in DIMENSIONS for b in ("lo", "hi")]
    _required(dalign, "dalign", ["point_index", "view", "split", *DIMENSIONS, *bounds])
    title = f"Claim W1: does d_align grow with width? (view={view}, split={split}, median over insertion points)"
    notes: list[str] = []
    if dalign.empty:
        return _empty(out, title, notes, dpi)
    view, split = choose(dalign, "view", view), choose(dalign, "split", split)
    frame = dalign[(dalign["view"] == view) & (dalign["split"] == split)]
    if frame.empty:
        raise ValueError(f"dalign has no rows with view={view!r} and split={split!r} together")
    panels = _panels(frame)
    fig, axes = _figure(len(panels), len(DIMENSIONS))
    for r, (name, part) in enumerate(panels):
        for c, (quantity, label) in enumerate(DIMENSIONS.items()):
            columns = [quantity, f"{quantity}_lo", f"{quantity}_hi"]
            kept = _clean(part, [quantity], notes, positive=True)
            summary = over_seeds(over_points(kept, columns), columns)
            _lines(axes[r, c], summary, "width", quantity, "depth", "depth", lo=columns[1], hi=columns[2])
            _finish(axes[r, c], "width", label, name, logx=True, logy=True, xticks=summary["width"])
    _save(fig, out, title, notes, dpi)


# -- F5 ----------------------------------------------------------------------------------
def fig_misalignment(misalignment: pd.DataFrame, out: str | Path, M: int | None = None, K: int | None = None, *,
                     view: str = "full", stats_split: str | None = None, dpi: int = DPI) -> None:
    """F5 (claims W2, W3): P(μ_Mᵀ g_K ≤ 0) with Wilson bars vs width at fixed (M, K) beside the
    certificates B_exact (dashed) and B_align (dotted), one line per depth; and vs M = K, one line
    per width at the depth with most widths. Median over insertion points, mean over seeds."""
    values = ["p_misalign", "p_lo", "p_hi", "b_exact", "b_align"]
    _required(misalignment, "misalignment", ["point_index", "view", "stats_split", "M", "K", *values])
    notes: list[str] = []
    frame = _clean(misalignment, ["p_misalign"], notes)
    if frame.empty:
        return _empty(out, "Claims W2, W3: misalignment probability vs width and sample size", notes, dpi)
    frame = frame[frame["view"] == choose(frame, "view", view)]
    stats_split = choose(frame, "stats_split", stats_split)
    frame = frame[frame["stats_split"] == stats_split]
    if M is None or K is None:
        M, K = default_mk(frame)
    title = (f"Claims W2, W3: does misalignment fall with width and with M = K? "
             f"(M={M}, K={K}, view={view}, bounds from {stats_split}; median over insertion points)")
    panels = _panels(frame)
    fig, axes = _figure(len(panels), 2, width=4.2)
    for r, (name, part) in enumerate(panels):
        fixed = over_seeds(over_points(part[(part["M"] == M) & (part["K"] == K)], values), values)
        ax = axes[r, 0]
        depths = sorted(fixed["depth"].unique())
        for i, depth in enumerate(depths):
            line = fixed[fixed["depth"] == depth].sort_values("width")
            style = _style(i, len(depths))
            yerr = _bars(line["p_misalign"], line["p_lo"], line["p_hi"])
            ax.errorbar(line["width"], line["p_misalign"], yerr=yerr, capsize=2, markersize=4, label=f"depth {depth:g}",
                        **{**style, "linestyle": "-"})
            for bound, linestyle in (("b_exact", "--"), ("b_align", ":")):
                ax.plot(line["width"], line[bound], color=style["color"], linestyle=linestyle, marker=style["marker"],
                        markerfacecolor="none")
        kinds = [Line2D([], [], color="black", linestyle=s, label=t)
                 for s, t in [("-", "empirical P (Wilson 95%)"), ("--", "B_exact"), (":", "B_align")]]
        _finish(ax, "width", "P(misalign) / bound (probability)", f"{name}: M={M}, K={K}", logx=True,
                xticks=fixed["width"], extra=kinds)
        square = part[part["M"] == part["K"]]
        counts = square.groupby("depth")["width"].nunique()
        if counts.empty:
            axes[r, 1].axis("off")
            notes.append(f"{name}: no rows with M = K")
            continue
        depth = counts[counts == counts.max()].index.max()
        by_m = over_seeds(over_points(square[square["depth"] == depth], values, by=["M"]), values, by=["M"])
        _lines(axes[r, 1], by_m, "M", "p_misalign", "width", "width", lo="p_lo", hi="p_hi")
        _finish(axes[r, 1], "M = K (examples per draw)", "P(misalign) (probability)", f"{name}: depth {depth:g}",
                logx=True, xticks=by_m["M"])
    _save(fig, out, title, notes, dpi)


# -- F6 ----------------------------------------------------------------------------------
def fig_intervention(intervention: pd.DataFrame, out: str | Path, *, dpi: int = DPI) -> None:
    """F6 (claim W4): |observed ΔL_test| vs |predicted −η μ_Mᵀ g_K| log–log (filled: signs agree,
    open: they disagree) with y = x; and observed/predicted vs η, one line per model × point × view."""
    _required(intervention, "intervention",
              ["point_index", "view", "eta", "predicted", "observed", "ratio", "sign_agree"])
    title = "Claim W4: does a zero-init residual step change test loss as predicted to first order?"
    notes: list[str] = []
    frame = _clean(intervention, ["eta", "predicted", "observed", "ratio"], notes)
    frame = frame.assign(abs_predicted=frame["predicted"].abs(), abs_observed=frame["observed"].abs(),
                         sign_agree=frame["sign_agree"].astype(bool))
    if frame.empty:
        return _empty(out, title, notes, dpi)
    panels = _panels(frame)
    fig, axes = _figure(len(panels), 2, width=4.0, height=3.4)
    for r, (name, part) in enumerate(panels):
        ax = axes[r, 0]
        logged = _clean(part, ["abs_predicted", "abs_observed"], notes, positive=True)
        widths = sorted(logged["width"].unique())
        for i, width in enumerate(widths):
            style = _style(i, len(widths))
            for agree, suffix in ((True, ""), (False, " (sign differs)")):
                dots = logged[(logged["width"] == width) & (logged["sign_agree"] == agree)]
                if len(dots):
                    ax.scatter(dots["abs_predicted"], dots["abs_observed"], marker=style["marker"], s=18,
                               edgecolors=style["color"], facecolors=style["color"] if agree else "none",
                               label=f"width {width:g}{suffix}")
        if len(logged):
            both = logged[["abs_predicted", "abs_observed"]].to_numpy()
            ends = [both.min(), both.max()]
            ax.plot(ends, ends, color="black", linestyle="--", linewidth=1, label="y = x")
        _finish(ax, "|predicted ΔL| = |η μ_Mᵀ g_K| (nats)", "|observed ΔL_test| (nats)",
                f"{name}: filled = signs agree", logx=True, logy=True)
        ax = axes[r, 1]
        positive = _clean(part, ["eta"], notes, positive=True)
        ax.axhspan(0.96, 0.99, color="0.85", label="paper: 96–99 %")
        ax.axhline(1.0, color="black", linewidth=1)
        widths = sorted(positive["width"].unique())
        for i, width in enumerate(widths):
            style = _style(i, len(widths))
            series = positive[positive["width"] == width].groupby(model_keys() + ["point_index", "view"])
            for j, (_, line) in enumerate(series):
                line = line.sort_values("eta")
                ax.plot(line["eta"], line["ratio"], alpha=0.8, markersize=4,
                        label=f"width {width:g}" if j == 0 else None, **style)
        _finish(ax, "step size η (parameter units)", "observed / predicted (unitless)", name, logx=True)
        ax.set_yscale("symlog", linthresh=2.0)  # linear around the first-order regime (ratio ≈ 1), log beyond
    _save(fig, out, title, notes, dpi)


# -- F7 ----------------------------------------------------------------------------------
def fig_expansion(expansion: pd.DataFrame, out: str | Path, *, dpi: int = DPI) -> None:
    """F7 (claim D3, Paper D mechanism): test-loss change of the selected expanded model
    (L_test(f_selected) − L_test(f_old), solid, filled) and of the control (dashed, open) per
    insertion point, one colour per model (mean over seeds); × marks points where fallback was used."""
    _required(expansion, "expansion",
              ["point_index", "test_loss_old", "test_loss_selected", "test_loss_control", "fallback"])
    title = "Paper D mechanism (claim D3): does inserting a zero-init block lower test loss?"
    notes: list[str] = []
    frame = _clean(expansion, ["test_loss_old", "test_loss_selected"], notes)
    frame = frame.assign(d_selected=frame["test_loss_selected"] - frame["test_loss_old"],
                         d_control=frame["test_loss_control"] - frame["test_loss_old"],
                         fallback=frame["fallback"].fillna(False).astype(bool).astype(float))
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
            ax.plot(line["point_index"], line["d_selected"], markersize=5, label=_model_label(depth, width),
                    **{**style, "linestyle": "-"})
            ax.plot(line["point_index"], line["d_control"], color=style["color"], marker=style["marker"],
                    markerfacecolor="none", linestyle="--", markersize=5)
            fell = line[line["fallback"] > 0]
            ax.scatter(fell["point_index"], fell["d_selected"], marker="x", s=60, color="black", zorder=3)
        ax.axhline(0, color="black", linewidth=1)
        kinds = [Line2D([], [], color="black", linestyle="-", marker="o", label="selected − old"),
                 Line2D([], [], color="black", linestyle="--", marker="o", markerfacecolor="none",
                        label="control − old"),
                 Line2D([], [], color="black", linestyle="none", marker="x", label="fallback used")]
        _finish(ax, "insertion point index (block, input → output)", "Δ test loss (nats)", name, extra=kinds)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
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
