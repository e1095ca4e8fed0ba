"""F5 (claims W2, W3): the misalignment probability against width and against M = K, beside the
certificates B_exact and B_align."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from matplotlib.lines import Line2D

from . import common
from .aggregate import choose, default_mk
from .common import DPI, _clean, _detection_key, _empty, _estimates, _figure, _finish, _panels, _required, _style

CERTIFICATES = {  # line style, marker (shows a bound at a width without neighbours), legend
    "b_exact": ("--", "x", "B_exact (two-sample)"),
    "b_align": (":", "+", "B_align (one-sample)"),
}


TOP = 1.08  # the probability axes end above 1, so that a bound at 1 is a line, not the border


def fig_misalignment(
    misalignment: pd.DataFrame,
    verdicts: pd.DataFrame,
    out: str | Path,
    M: int | None = None,
    K: int | None = None,
    *,
    view: str = "full",
    dpi: int = DPI,
) -> None:
    """F5 (claims W2, W3): one row per dataset/family. Left, P(μ_Mᵀ g_K ≤ 0) over draws from each model's
    own pools, every insertion point and seed with its Wilson interval (filled where it excludes 1/2), vs
    width at fixed (M, K), one colour per depth, beside the median certificates B_exact (two-sample, dashed)
    and B_align (one-sample, dotted) where defined (a gap: no certificate at that width); right, vs M = K,
    one colour per width, at the depth with most widths. Each panel's legend is its own colour scale, off
    the data; what line styles and markers mean is the key under the panels, W2's and W3's verdicts under it."""
    values = ["p_misalign", "p_lo", "p_hi", "b_exact", "b_align"]
    _required(misalignment, "misalignment", ["point_index", "view", "M", "K", *values])
    notes: list[str] = []
    frame = _clean(misalignment, ["p_misalign"], notes, why="no draws")
    if frame.empty:
        return _empty(out, "Claims W2, W3: misalignment probability vs width and sample size", notes, dpi, verdicts)
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
    fig, axes = _figure(len(panels), 2, width=4.6, height=3.2)
    for r, (name, part) in enumerate(panels):
        fixed = part[(part["M"] == M) & (part["K"] == K)]
        ax = axes[r, 0]
        _estimates(ax, fixed, "width", "p_misalign", "depth", "depth", lo="p_lo", hi="p_hi", null=0.5,
                   two_sided=True, logx=True)  # fmt: skip
        depths = sorted(fixed["depth"].unique())
        for i, depth in enumerate(depths):
            line = fixed[fixed["depth"] == depth].groupby("width")[list(CERTIFICATES)].median()  # NaN skipped
            for bound, (linestyle, marker, _) in CERTIFICATES.items():
                ax.plot(line.index, line[bound], color=_style(i, len(depths))["color"], linestyle=linestyle,
                        linewidth=1, marker=marker, markersize=4)  # fmt: skip
        ax.axhline(0.5, color="black", linewidth=0.8, linestyle="-.")
        _finish(ax, "width", "P(misalign) / bound (probability)", f"{name}: M={M}, K={K}", logx=True,
                xticks=fixed["width"])  # fmt: skip
        ax.set_ylim(-0.02, TOP)
        square = part[part["M"] == part["K"]]
        counts = square.groupby("depth")["width"].nunique()
        if counts.empty:
            axes[r, 1].axis("off")
            notes.append(f"{name}: no rows with M = K")
            continue
        depth = counts[counts == counts.max()].index.max()
        _estimates(axes[r, 1], square[square["depth"] == depth], "M", "p_misalign", "width", "width", lo="p_lo",
                   hi="p_hi", null=0.5, two_sided=True, logx=True)  # fmt: skip
        axes[r, 1].axhline(0.5, color="black", linewidth=0.8, linestyle="-.")
        _finish(axes[r, 1], "M = K (examples per draw)", "P(misalign) (probability)", f"{name}: depth {depth:g}",
                logx=True, xticks=square["M"])  # fmt: skip
        axes[r, 1].set_ylim(-0.02, TOP)
    kinds = [
        Line2D([], [], color="black", linestyle=style, marker=marker, label=text)
        for style, marker, text in [
            ("-", "None", "P: median (Wilson 95% bars)"),
            *CERTIFICATES.values(),
            ("-.", "None", "P = 1/2"),
        ]  # fmt: skip
    ]
    common._save(fig, out, title, notes, dpi, verdicts, key=kinds + _detection_key(0.5))


STEM = "F5_misalignment"
TABLES = ["misalignment", "verdicts"]  # the tables ``draw`` reads, in its argument order
draw = fig_misalignment
