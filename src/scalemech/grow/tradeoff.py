"""The decision under ``--retain``: learn the new domain, keep the old one.

Every model ``a`` (``old`` is the reference, not an arm) is scored per held-out window ``w`` on the new
domain, ``n_a(w)``, and on the retain data, ``r_a(w)``. Per arm, paired over the same windows
(``stats.paired_difference``, each with ``SE = sd_w / √W``):

- its gain ``G_a = mean_w (n_old(w) − n_a(w))`` (> 0: it learned the new domain);
- its forgetting ``F_a = mean_w (r_a(w) − r_old(w))`` and the upper end of its interval,
  ``F_a + GAIN_SE · SE`` (``forgetting_hi``), which the budget ``max_forgetting`` is tested on;
- the grown model's gain over it, ``mean_w (n_a(w) − n_grown(w))``.

The Pareto front holds the arms that no other dominates (``dominates``: lower by more than ``GAIN_SE``
paired SE on one axis, new-domain loss or retain loss, and not higher by more than ``GAIN_SE`` paired
SE on the other). The arm named, ``winner``, is always on the front, so no arm beats it on both axes
by more than ``GAIN_SE`` paired SE:

1. among the front arms within the budget (``forgetting_hi <= max_forgetting``), the one of lowest
   new-domain loss;
2. when no front arm is within the budget, the front arm that forgets least: every arm competes, the
   grown one included.

The grown model is recommended when it is the winner and decisively so: the only arm on the front
(it dominates every other), or within the budget and lower on the new domain by more than ``GAIN_SE``
paired SE than every other front arm within the budget. Otherwise the winner is the one to use
instead (``--fallback`` writes it).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import stats
from ..experiments.decision import GAIN_SE

MAX_FORGETTING = 0.02
"""Default ``--max-forgetting`` in nats per token: ``e^0.02 ≈ 1.02``, a 2 % rise of the old domain's
perplexity, small beside what continued training on a new domain usually costs and large enough to
be measured from a few hundred held-out windows (the SE of ``F`` is printed beside it)."""
REFERENCE = "old"


def _paired(name: str, a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    """``{name: mean(a − b), name_se: its paired SE}``."""
    difference = stats.paired_difference(a, b)
    return {name: difference.mean, f"{name}_se": difference.se}


def summary(new: dict[str, np.ndarray], retain: dict[str, np.ndarray] | None = None) -> dict[str, dict[str, Any]]:
    """Per model of ``new`` (per-window held-out losses by model, ``old`` among them): its mean new-domain
    loss, its ``gain`` over ``old`` and (arms other than ``grown``) the grown model's gain over it
    ``grown_gain``, each with its paired SE; with ``retain``, also its mean retain loss, its forgetting
    ``F`` with its paired SE and ``forgetting_hi = F + GAIN_SE · SE`` (module doc)."""
    rows = {}
    for name in new:
        row: dict[str, Any] = {"new_loss": float(new[name].mean()), **_paired("gain", new[REFERENCE], new[name])}
        if name != "grown" and "grown" in new:
            row.update(_paired("grown_gain", new[name], new["grown"]))
        if retain is not None:
            row.update(retain_loss=float(retain[name].mean()), **_paired("forgetting", retain[name], retain[REFERENCE]))
            row["forgetting_hi"] = row["forgetting"] + GAIN_SE * row["forgetting_se"]
        rows[name] = row
    return rows


def dominates(a: str, b: str, new: dict[str, np.ndarray], retain: dict[str, np.ndarray]) -> bool:
    """Arm ``a`` dominates arm ``b``: on one axis (new-domain loss, or retain loss, whose paired differences
    are those of forgetting) ``a`` is lower by more than ``GAIN_SE`` paired SE, and on the other it is not
    higher by more than ``GAIN_SE`` paired SE (the same windows scored by both)."""
    lower = [stats.paired_difference(losses[b], losses[a]).exceeds(GAIN_SE) for losses in (new, retain)]
    higher = [stats.paired_difference(losses[a], losses[b]).exceeds(GAIN_SE) for losses in (new, retain)]
    return any(lower) and not any(higher)


def pareto_front(names: list[str], new: dict[str, np.ndarray], retain: dict[str, np.ndarray]) -> list[str]:
    """The arms of ``names`` that no other dominates (``dominates``): a difference within the noise of
    the held-out windows decides nothing."""
    return [b for b in names if not any(dominates(a, b, new, retain) for a in names if a != b)]


def winner(rows: dict[str, dict[str, Any]], front: list[str], max_forgetting: float) -> tuple[str, str]:
    """The front arm to use (module doc: the lowest new-domain loss within the budget, else the least
    forgetting) and why."""
    within = [name for name in front if rows[name]["forgetting_hi"] <= max_forgetting]
    if within:
        best = min(within, key=lambda name: rows[name]["new_loss"])
        because = (
            f"lowest new-domain loss ({rows[best]['new_loss']:.4f}) of the front arms whose forgetting is within "
            f"{max_forgetting:g} at the upper end of its interval"
        )
        return best, because
    best = min(front, key=lambda name: rows[name]["forgetting"])
    row = rows[best]
    because = (
        f"no front arm's forgetting is within {max_forgetting:g} at the upper end of its interval; it forgets least "
        f"of the front arms, grown included ({row['forgetting']:.4f} ± {row['forgetting_se']:.4f})"
    )
    return best, because


def _grown_falls_short(
    rows: dict[str, dict[str, Any]],
    front: list[str],
    chosen: str,
    max_forgetting: float,
    new: dict[str, np.ndarray],
    retain: dict[str, np.ndarray],
) -> list[str]:
    """Why the grown model is not recommended (empty: it is): dominated, over the budget while another
    front arm is within it, or named yet not ahead of another front arm within the budget by > 2 SE."""
    grown = rows["grown"]
    if front == ["grown"]:
        return []
    if "grown" not in front:
        over = [a for a in rows if a not in (REFERENCE, "grown") and dominates(a, "grown", new, retain)]
        how = f"lower by > {GAIN_SE:g} paired SE on one axis, not higher on the other"
        return [f"is dominated by {', '.join(over)} ({how})"]
    if grown["forgetting_hi"] > max_forgetting:
        return [f"forgets {grown['forgetting']:.4f} (upper end {grown['forgetting_hi']:.4f}) > {max_forgetting:g}"]
    if chosen != "grown":
        return [f"has a higher new-domain loss ({grown['new_loss']:.4f}) than {chosen}"]
    within = [a for a in front if a != "grown" and rows[a]["forgetting_hi"] <= max_forgetting]
    close = [a for a in within if not rows[a]["grown_gain"] > GAIN_SE * rows[a]["grown_gain_se"]]
    return [f"is not ahead of {', '.join(close)} on the new domain by > {GAIN_SE:g} paired SE"] if close else []


def decide_tradeoff(new: dict[str, np.ndarray], retain: dict[str, np.ndarray], max_forgetting: float) -> dict[str, Any]:
    """``{"recommended", "why", "winner", "rule", "pareto_front"}`` (module doc) from per-window held-out
    losses by model on the new domain (``new``) and the retain data (``retain``), both holding ``old``,
    ``grown`` and the other trained arms."""
    rows = summary(new, retain)
    arms = [name for name in rows if name != REFERENCE]
    front = pareto_front(arms, new, retain) or arms  # empty only if noise-level dominance ran in a cycle
    rule = (
        f"the arm named is on the Pareto front of (new-domain loss, forgetting) judged at {GAIN_SE:g} paired SE: "
        f"the lowest new-domain loss of the front arms whose forgetting + {GAIN_SE:g} SE <= {max_forgetting:g}, "
        "else the front arm that forgets least; the grown model is recommended when it is named and is the only "
        f"front arm, or leads every other front arm within the budget on the new domain by > {GAIN_SE:g} paired SE"
    )
    chosen, because = winner(rows, front, max_forgetting)
    lacks = _grown_falls_short(rows, front, chosen, max_forgetting, new, retain)
    if not lacks:
        why = "the only arm on the Pareto front" if front == ["grown"] else because
        if front == ["grown"] and rows["grown"]["forgetting_hi"] > max_forgetting:
            forgets = rows["grown"]["forgetting"]
            why += f" (it forgets {forgets:.4f} > {max_forgetting:g}; no arm forgets detectably less)"
        return {"recommended": True, "why": f"grown: {why}", "winner": "grown", "rule": rule, "pareto_front": front}
    why = f"grown {' and '.join(lacks)}; {chosen} is named: {because}"
    return {"recommended": False, "why": why, "winner": chosen, "rule": rule, "pareto_front": front}
