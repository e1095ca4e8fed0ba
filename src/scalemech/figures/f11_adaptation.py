"""F11 (E12): the Pareto picture of growth for domain adaptation, new-domain gain against forgetting, one
point per arm × placement rule, the forgetting-aware ``pareto`` marked; beside it, the certificate's
predicted forgetting against the realized one at every point (``adaptation`` table; G4, G5, G6)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from ..core.tables import model_keys
from ..experiments.decision import ARMS
from . import common
from .common import DPI, _clean, _empty, _figure, _required

MARKERS = ("o", "s", "D", "^", "v", "P", "X", "*", "h", "<")  # one per placement rule, in the table's order
FORGETTING_AWARE = "pareto"  # the placement drawn larger, ringed


def over_bases(frame: pd.DataFrame) -> pd.DataFrame:
    """Per placement × arm: the mean over bases of ``gain`` and ``forgetting`` and their SEs across
    bases (``sd/√G``, G bases: what varies from base to base, the windows' noise included)."""
    groups = frame.groupby(["placement", "arm"], sort=False)
    means = groups[["gain", "forgetting"]].mean()
    ses = groups[["gain", "forgetting"]].std(ddof=1).div(np.sqrt(groups.size()), axis=0)
    return means.join(ses.add_suffix("_se")).assign(bases=groups.size()).reset_index()


def rule_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of the placement rules, not of the single points ``layer.i`` grown for G6's ranking."""
    return frame[~frame["placement"].astype(str).str.match(r"layer\.\d+$")]


def _pareto_picture(ax, frame: pd.DataFrame) -> list[Line2D]:
    """Panel (a): each arm × placement rule's mean gain against its mean forgetting, ±2 SE across bases;
    returns the key (arms by colour, placements by marker)."""
    points = over_bases(rule_rows(frame))
    placements = list(dict.fromkeys(points["placement"]))
    arms = [a for a in ARMS if a in set(points["arm"])] + sorted(set(points["arm"]) - set(ARMS))
    colours = dict(zip(arms, ("C0", "C1", "C2", "C3", "C4", "C5", "C6", "C7")))
    markers = dict(zip(placements, MARKERS))
    for row in points.itertuples():
        ax.errorbar(
            row.forgetting,
            row.gain,
            xerr=2 * np.nan_to_num(row.forgetting_se),
            yerr=2 * np.nan_to_num(row.gain_se),
            fmt=markers[row.placement],
            color=colours[row.arm],
            markersize=9 if row.placement == FORGETTING_AWARE else 6,
            markeredgecolor="black" if row.placement == FORGETTING_AWARE else colours[row.arm],
            capsize=2,
            linewidth=0.8,
            alpha=0.9,
        )
    ax.axvline(0, color="black", linewidth=0.8)
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xlabel("forgetting (nats): L_arm(A) − L_old(A), held-out old domain")
    ax.set_ylabel("gain (nats): L_old(B) − L_arm(B), held-out new domain")
    ax.set_title("(a) every arm at every placement rule", fontsize=9)
    handles = [Line2D([], [], color=colours[a], marker="o", linestyle="none", label=a) for a in arms]
    handles += [Line2D([], [], color="grey", marker=markers[p], linestyle="none", label=f"at {p}") for p in placements]
    return handles


def _prediction(ax, frame: pd.DataFrame) -> None:
    """Panel (b): per base and point grown one layer, the certificate's predicted forgetting against the
    grown arm's realized one (±2 paired SE), a line per base; pareto's and best's points ringed."""
    grown = frame[frame["arm"] == "grown"]
    single = grown[~grown["inserted"].astype(str).str.contains(",")]
    single = single.dropna(subset=["predicted_forgetting", "forgetting"])
    for k, (_, base) in enumerate(single.groupby(model_keys(), sort=True)):
        points = base.drop_duplicates("copied").sort_values("predicted_forgetting")
        label = f"{base['model'].iloc[0]}"
        ax.errorbar(
            points["predicted_forgetting"],
            points["forgetting"],
            yerr=2 * points["forgetting_se"].astype(float),
            fmt="o-",
            color=f"C{k}",
            markersize=4,
            linewidth=0.8,
            capsize=2,
            label=label,
        )
        for placement, marker in ((FORGETTING_AWARE, "*"), ("best", "s")):
            chosen = base[base["placement"] == placement]
            ax.plot(chosen["predicted_forgetting"], chosen["forgetting"], marker, color=f"C{k}", markersize=11,
                    markerfacecolor="none")  # fmt: skip
    ax.axhline(0, color="black", linewidth=0.8)
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_xlabel("predicted forgetting −μ_Bᵀμ_A at the point (first order, per unit step)")
    ax.set_ylabel("realized forgetting of the grown arm (nats)")
    ax.set_title("(b) the certificate's forgetting, point by point (G6; star: pareto, square: best)", fontsize=9)
    ax.legend(fontsize=6, loc="upper left", frameon=False)


def fig_adaptation(adaptation: pd.DataFrame, verdicts: pd.DataFrame, out: str | Path, *, dpi: int = DPI) -> None:
    """F11: (a) each arm × placement rule's mean new-domain gain ``L_old(B) − L_arm(B)`` (up: learns B)
    against its mean forgetting ``L_arm(A) − L_old(A)`` (right: forgets A), ±2 SE across bases on both axes;
    arms by colour, placements by marker, the forgetting-aware ``pareto`` larger and ringed; the Pareto front
    lies up and to the left. (b) per base, at every point grown one layer, the certificate's predicted
    forgetting against the realized one (G6's ranking), ``pareto``'s and ``best``'s points marked. G4's, G5's
    and G6's verdicts under the panels, the key of (a) beside them."""
    _required(adaptation, "adaptation", ["placement", "arm", "gain", "forgetting"])
    title = "E12: growth into a new domain, new-domain gain against forgetting, and forgetting predicted"
    notes: list[str] = []
    frame = _clean(adaptation, ["gain", "forgetting"], notes)
    if frame.empty:
        return _empty(out, title, notes, dpi, verdicts)
    predicted = "predicted_forgetting" in frame and frame["predicted_forgetting"].notna().any()
    fig, axes = _figure(1, 2 if predicted else 1, width=6.4, height=4.6)
    key = _pareto_picture(axes[0, 0], frame)
    if predicted:
        _prediction(axes[0, 1], frame)
    bases = int(over_bases(rule_rows(frame))["bases"].max())
    notes.append(f"{bases} bases; the controls and lora barely depend on the placement, so their points overlap")
    common._save(fig, out, title, notes, dpi, verdicts, key=key)


STEM = "F11_adaptation"
TABLES = ["adaptation", "verdicts"]  # the tables ``draw`` reads, in its argument order
draw = fig_adaptation
