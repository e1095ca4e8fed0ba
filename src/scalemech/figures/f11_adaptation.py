"""F11 (E12): the Pareto picture of growth for domain adaptation: new-domain gain against forgetting,
one point per arm × placement (``adaptation`` table)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from ..experiments.decision import ARMS
from . import common
from .common import DPI, _clean, _empty, _figure, _required

MARKERS = ("o", "s", "D", "^", "v", "P", "X", "*")  # one per placement, in the table's order


def over_bases(frame: pd.DataFrame) -> pd.DataFrame:
    """Per placement × arm: the mean over bases of ``gain`` and ``forgetting`` and their SEs across
    bases (``sd/√G``, G bases: what varies from base to base, the windows' noise included)."""
    groups = frame.groupby(["placement", "arm"], sort=False)
    means = groups[["gain", "forgetting"]].mean()
    ses = groups[["gain", "forgetting"]].std(ddof=1).div(np.sqrt(groups.size()), axis=0)
    return means.join(ses, rsuffix="_se").assign(bases=groups.size()).reset_index()


def fig_adaptation(adaptation: pd.DataFrame, verdicts: pd.DataFrame, out: str | Path, *, dpi: int = DPI) -> None:
    """F11: each arm × placement's mean new-domain gain ``L_old(B) − L_arm(B)`` (up: learns B) against its
    mean forgetting ``L_arm(A) − L_old(A)`` (right: forgets A), ±2 SE across bases on both axes; arms by
    colour, placements by marker (the key under the panel). The Pareto front lies up and to the left; G4's
    and G5's verdicts under the panel."""
    _required(adaptation, "adaptation", ["placement", "arm", "gain", "forgetting"])
    title = "E12: growth into a new domain, new-domain gain against forgetting (mean over bases ± 2 SE)"
    notes: list[str] = []
    frame = _clean(adaptation, ["gain", "forgetting"], notes)
    if frame.empty:
        return _empty(out, title, notes, dpi, verdicts)
    points = over_bases(frame)
    placements = list(dict.fromkeys(points["placement"]))
    arms = [a for a in ARMS if a in set(points["arm"])] + sorted(set(points["arm"]) - set(ARMS))
    colours = dict(zip(arms, ("C0", "C1", "C2", "C3", "C4", "C5", "C6", "C7")))
    markers = dict(zip(placements, MARKERS))
    fig, axes = _figure(1, 1, width=6.4, height=4.6)
    ax = axes[0, 0]
    for row in points.itertuples():
        ax.errorbar(
            row.forgetting,
            row.gain,
            xerr=2 * np.nan_to_num(row.forgetting_se),
            yerr=2 * np.nan_to_num(row.gain_se),
            fmt=markers[row.placement],
            color=colours[row.arm],
            markersize=6,
            capsize=2,
            linewidth=0.8,
            alpha=0.9,
        )
    ax.axvline(0, color="black", linewidth=0.8)
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xlabel("forgetting (nats): L_arm(A) − L_old(A), held-out old domain")
    ax.set_ylabel("gain (nats): L_old(B) − L_arm(B), held-out new domain")
    handles = [Line2D([], [], color=colours[a], marker="o", linestyle="none", label=a) for a in arms]
    handles += [Line2D([], [], color="grey", marker=markers[p], linestyle="none", label=f"at {p}") for p in placements]
    bases = int(points["bases"].max())
    notes.append(f"{bases} bases; the controls and lora barely depend on the placement, so their points overlap")
    common._save(fig, out, title, notes, dpi, verdicts, key=handles)


STEM = "F11_adaptation"
TABLES = ["adaptation", "verdicts"]  # the tables ``draw`` reads, in its argument order
draw = fig_adaptation
