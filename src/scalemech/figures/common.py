"""What the figures share: styles, the estimate markers with their intervals (``_estimates``), symlog
axes, one number format per axis (``OneFormat``), panels per dataset/family (one colour scale and legend
each), relative depth, and saving (``_save``, which every figure module calls as ``common._save``: one place
to intercept a figure before it is written): the title wrapped to the figure, a shared key below the
panels, legends moved off the data, and under it the claims' verdicts (the run's verdict table) and the
notes, wrapped."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import Formatter, LogLocator, NullFormatter

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
    scale.set_major_formatter(OneFormat())


class OneFormat(Formatter):
    """Tick labels in one number format per axis: plain numbers (``0.25``, ``8``, ``-10``) where every
    nonzero tick lies between 1e-3 and 1e4 in size, else every one as a power of ten (``−10⁻⁶``, ``2×10⁻⁴``);
    0 as ``0``."""

    ticks: Sequence[float] = ()

    def set_locs(self, locs: Sequence[float]) -> None:
        self.ticks = list(locs)

    def __call__(self, x: float, pos: int | None = None) -> str:
        sizes = [abs(v) for v in self.ticks if v != 0]
        if x == 0:
            return "0"
        if all(1e-3 <= size < 1e4 for size in sizes):
            return f"{x:g}"
        exponent = math.floor(math.log10(abs(x)) + 1e-9)
        mantissa = abs(x) / 10**exponent
        sign = "-" if x < 0 else ""
        scale = "" if math.isclose(mantissa, 1, rel_tol=1e-6) else f"{mantissa:.2g}\\times"
        return f"${sign}{scale}10^{{{exponent}}}$"


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


VERDICT_COLOURS = {"confirmed": "#1a6b2f", "refuted": "#a3221b", "fragile": "#9a4a00"}  # others: dark grey
FOOTER_FONT = 7  # points: the verdicts and notes under the panels


def _wrapped(text: str, fig: Figure, fontsize: float) -> str:
    """``text`` wrapped to the figure's width (a character is about 0.55 of the font size wide)."""
    width = max(40, int(fig.get_figwidth() * 72 / (0.55 * fontsize)))
    return "\n".join(textwrap.wrap(text, width, break_on_hyphens=False))


def verdict_lines(verdicts: pd.DataFrame | None, stem: str) -> list[tuple[str, str]]:
    """``(line, verdict)`` per row of the run's verdict table (``report.verdict_rows``) whose figure is
    ``stem``: ``claim (regime): verdict: deciding number``, the regime where the table has one."""
    if verdicts is None or "figure" not in verdicts:
        return []
    shown = verdicts.astype(object).where(verdicts.notna(), "")  # an empty cell read back from CSV: NaN
    rows = shown[shown["figure"] == stem]
    lines = []
    for row in rows.to_dict("records"):
        regime = f" ({row['regime']})" if row.get("regime") else ""
        lines.append((f"{row['claim']}{regime}: {row['verdict']}: {row['statistic']}", str(row["verdict"])))
    return lines


def _plotted_segments(ax: Axes) -> tuple[np.ndarray, np.ndarray]:
    """Display coordinates of what ``ax`` plots in data coordinates, as segments ``(starts, ends)``, each
    (n, 2): every line's consecutive vertices, every error bar, and every marker as a segment of length 0
    (axis-spanning reference lines, drawn in axes coordinates, left out)."""
    starts, ends = [np.empty((0, 2))], [np.empty((0, 2))]
    for line in ax.lines:
        if line.get_transform() == ax.transData and line.get_visible():
            xy = ax.transData.transform(np.asarray(line.get_xydata(), dtype=float))
            starts += [xy, xy[:-1]]
            ends += [xy, xy[1:]]
    for collection in ax.collections:
        offsets = np.asarray(collection.get_offsets(), dtype=float)
        if len(offsets) and collection.get_offset_transform() == ax.transData:
            xy = ax.transData.transform(offsets)
            starts.append(xy)
            ends.append(xy)
        for segment in getattr(collection, "get_segments", list)():
            if len(segment) >= 2 and collection.get_transform() == ax.transData:
                xy = ax.transData.transform(np.asarray(segment, dtype=float))
                starts.append(xy[:-1])
                ends.append(xy[1:])
    starts, ends = np.concatenate(starts), np.concatenate(ends)
    finite = np.isfinite(starts).all(axis=1) & np.isfinite(ends).all(axis=1)
    return starts[finite], ends[finite]


def crosses(box, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Whether each segment ``starts[i] → ends[i]`` (display coordinates) meets the rectangle ``box``
    (Liang–Barsky clipping: the segment's parameter range inside every slab is not empty)."""
    low, high = np.zeros(len(starts)), np.ones(len(starts))
    meets = np.ones(len(starts), dtype=bool)
    step = ends - starts
    for axis, (floor, ceiling) in enumerate(((box.x0, box.x1), (box.y0, box.y1))):
        for p, q in ((-step[:, axis], starts[:, axis] - floor), (step[:, axis], ceiling - starts[:, axis])):
            flat = p == 0
            meets &= ~(flat & (q < 0))  # parallel to this edge and outside it
            ratio = np.divide(q, p, out=np.zeros_like(q), where=~flat)
            low = np.where(~flat & (p < 0), np.maximum(low, ratio), low)
            high = np.where(~flat & (p > 0), np.minimum(high, ratio), high)
    return meets & (low <= high)


def _covers(legend: Artist, ax: Axes, renderer) -> bool:
    """Whether ``legend``'s box covers anything ``ax`` plots: a marker, a line or an error bar."""
    return bool(crosses(legend.get_window_extent(renderer), *_plotted_segments(ax)).any())


def _legends_off_the_data(fig: Figure) -> None:
    """Each axes legend placed where it covers none of its panel's points: inside ("best") where that
    leaves them clear, else beside the panel, on its right."""
    for _ in range(3):  # moving one legend out shrinks the panels: look again
        fig.draw_without_rendering()
        renderer = fig.canvas.get_renderer()
        moved = False
        for ax in fig.axes:
            legend = ax.get_legend()
            if legend is not None and legend.get_bbox_to_anchor() is ax.bbox and _covers(legend, ax, renderer):
                ax.legend(handles=legend.legend_handles, labels=[t.get_text() for t in legend.texts], fontsize=7,
                          loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0)  # fmt: skip
                moved = True
        if not moved:
            return


def _save(
    fig: Figure,
    out: str | Path,
    title: str,
    notes: list[str],
    dpi: int,
    verdicts: pd.DataFrame | None = None,
    key: Sequence[Artist] = (),
) -> None:
    """Title the figure (wrapped to its width), put the ``key`` (what markers and line styles mean, shared
    by its panels) under the panels, move each panel's legend off its data (``_legends_off_the_data``),
    print the claims' verdicts of this figure (``verdict_lines`` of the run's ``verdicts`` table for the
    figure ``out`` names, ``<stem>.pdf``, coloured by verdict) and the ``notes`` under it, and write ``out``
    as .pdf and .png."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    FigureCanvasAgg(fig)
    fig.suptitle(_wrapped(title, fig, 10), fontsize=10)
    footer = [
        (line, VERDICT_COLOURS.get(verdict, "0.2"), "bold") for line, verdict in verdict_lines(verdicts, out.stem)
    ]
    footer += [("Note: " + "; ".join(notes), "black", "normal")] if notes else []
    _footer(fig, list(key), [(_wrapped(text, fig, FOOTER_FONT), colour, weight) for text, colour, weight in footer])
    _legends_off_the_data(fig)
    for suffix in (".pdf", ".png"):
        fig.savefig(out.with_suffix(suffix), dpi=dpi, bbox_inches="tight")


KEY_COLUMNS = 4  # entries per row of the shared key


def _footer(fig: Figure, key: list[Artist], blocks: list[tuple[str, str, str]], gap: float = 3.0) -> None:
    """The shared ``key`` (a legend, ``KEY_COLUMNS`` entries a row), then the ``(text, colour, weight)``
    ``blocks``, in a band added under the panels: the figure grows by the band's height and the layout keeps
    above it, so neither the panels nor the footer move into the other."""
    rows = -(-len(key) // KEY_COLUMNS)
    heights = [rows * 1.5 * FOOTER_FONT / 72 + (0.05 if key else 0)]  # inches
    heights += [((text.count("\n") + 1) * 1.3 * FOOTER_FONT + gap) / 72 for text, _, _ in blocks]
    if not key and not blocks:
        return
    band = sum(heights) + 0.1
    total = fig.get_figheight() + band
    fig.set_figheight(total)
    fig.get_layout_engine().set(rect=(0, band / total, 1, 1 - band / total))
    top = band - 0.02
    if key:
        fig.legend(handles=key, loc="upper center", bbox_to_anchor=(0.5, top / total), ncol=min(len(key), KEY_COLUMNS),
                   fontsize=FOOTER_FONT, frameon=False, borderaxespad=0, borderpad=0)  # fmt: skip
    y = top - heights[0]
    for (text, colour, weight), height in zip(blocks, heights[1:]):
        fig.text(0.005, y / total, text, fontsize=FOOTER_FONT, ha="left", va="top", color=colour, fontweight=weight)
        y -= height


def _empty(out: str | Path, title: str, notes: list[str], dpi: int, verdicts: pd.DataFrame | None = None) -> None:
    """A placeholder figure for a table with nothing to plot (this configuration did not measure it)."""
    fig, axes = _figure(1, 1, width=6.0, height=1.2)
    axes[0, 0].axis("off")
    axes[0, 0].text(0.5, 0.5, "no rows to plot in this configuration", ha="center", va="center")
    _save(fig, out, title, notes, dpi, verdicts)


def _finish(
    ax: Axes,
    xlabel: str,
    ylabel: str,
    title: str,
    logx: bool = False,
    logy: bool = False,
    xticks: Sequence[float] | None = None,
    legend: bool = True,
) -> None:
    """Labels, log scales, ticks in one number format per axis (``OneFormat``; ``xticks`` where given, never
    rotated: labels that would run into each other are thinned), grid, and (if ``legend``) the panel's legend
    of its labelled lines, its own colour scale (``_save`` moves it off the data)."""
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    ax.title.set_fontsize(9)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
        low, high = ax.get_ylim()
        ax.yaxis.set_major_locator(LogLocator(subs=(1, 2, 5) if np.log10(high / low) < 2 else (1,)))
        ax.yaxis.set_major_formatter(OneFormat())
        ax.yaxis.set_minor_formatter(NullFormatter())
    if xticks is not None:
        ticks = sorted(set(float(t) for t in xticks))
        ax.set_xticks(ticks, labels=_thinned(ticks, logx))
        ax.xaxis.set_minor_formatter(NullFormatter())
        if len(ticks) == 1:  # one value: a span around it, not the few percent its dodged markers cover
            tick = ticks[0]
            ax.set_xlim(
                *(
                    (tick / 2, tick * 2)
                    if logx and tick > 0
                    else (tick - max(abs(tick), 1) / 2, tick + max(abs(tick), 1) / 2)
                )
            )
    ax.grid(alpha=0.3, which="both")
    if legend and ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)


def _thinned(ticks: list[float], log: bool, closest: float = 0.12) -> list[str]:
    """Labels of ``ticks`` in one format (``OneFormat``), blank where a label would sit closer than
    ``closest`` of the axis' span (in log units on a log axis) to the last one kept."""
    formatter = OneFormat()
    formatter.set_locs(ticks)
    where = np.log10(ticks) if log and min(ticks) > 0 else np.asarray(ticks)
    span = float(where.max() - where.min()) or 1.0
    labels, last = [], None
    for tick, at in zip(ticks, where):
        keep = last is None or (at - last) / span >= closest
        labels.append(formatter(tick) if keep else "")
        last = at if keep else last
    return labels


def _spread(values: Sequence, k: int) -> list:
    """Up to ``k`` evenly spaced items of the sorted ``values`` (first, middle, last for k=3)."""
    values = sorted(values)
    picks = np.unique(np.round(np.linspace(0, len(values) - 1, min(k, len(values)))).astype(int))
    return [values[i] for i in picks]


def _only(frame: pd.DataFrame, dataset: str, family: str) -> pd.DataFrame:
    return frame[(frame["dataset"] == dataset) & (frame["family"] == family)]


def _model_label(depth: float, width: float) -> str:
    return f"depth {depth:g}, width {width:g}"
