"""What the figures share: styles, the estimate markers with their intervals (``_estimates``), symlog
axes, panels per dataset/family, relative depth, and saving with notes (``_save``, which every figure
module calls as ``common._save``: one place to intercept a figure before it is written)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FormatStrFormatter, FuncFormatter, LogLocator, NullFormatter

from ..core.tables import check_columns, model_keys
from ..models import point_count

MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]
LINESTYLES = ["-", "--", "-.", ":"]
PANEL_KEYS = ["dataset", "family"]  # one facet per dataset/family
DPI = 150


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
    return [tuple(c) for c in colormaps["viridis"](np.linspace(0, 0.85, max(n, 1)))]


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
