"""The decision under ``--retain``: learn the new domain, keep the old one.

Every arm ``a`` (``old`` is the reference, not an arm) is scored per held-out window ``w`` on the new
domain, ``n_a(w)``, and on the retain data, ``r_a(w)``. Its forgetting is the paired difference
``F_a = mean_w (r_a(w) − r_old(w))`` with ``SE = sd_w(r_a − r_old) / √W`` (``stats.paired_difference``:
the same windows scored by both models). The grown model is recommended when

1. it beats every other arm on the new domain by more than ``GAIN_SE`` paired SE
   (``mean_w(n_a − n_grown) > 2 SE``) while ``F_grown ≤ max_forgetting``; or
2. it is the only arm on the Pareto front of (new-domain loss, ``F``): it dominates every other arm,
   lower by more than ``GAIN_SE`` paired SE on one axis and not higher by more than ``GAIN_SE`` paired
   SE on the other (``dominates``; a noise-level difference dominates nothing).

Otherwise the winning arm among the others is named, the one to use instead: the lowest new-domain
loss among the arms forgetting at most ``max_forgetting``, or, when none does, the arm that forgets
least.
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


def summary(new: dict[str, np.ndarray], retain: dict[str, np.ndarray]) -> dict[str, dict[str, Any]]:
    """Per model: mean new-domain and retain loss, forgetting ``F`` with its paired SE, and (arms other
    than ``grown``) the grown model's paired gain over it on the new domain, ``n_a − n_grown``."""
    rows = {}
    for name in new:
        forgetting = stats.paired_difference(retain[name], retain[REFERENCE])
        row = {
            "new_loss": float(new[name].mean()),
            "retain_loss": float(retain[name].mean()),
            "forgetting": forgetting.mean,
            "forgetting_se": forgetting.se,
        }
        if name != "grown" and "grown" in new:
            gain = stats.paired_difference(new[name], new["grown"])
            row.update(grown_gain=gain.mean, grown_gain_se=gain.se)
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


def decide_tradeoff(new: dict[str, np.ndarray], retain: dict[str, np.ndarray], max_forgetting: float) -> dict[str, Any]:
    """``{"recommended", "why", "winner", "rule", "pareto_front", "arms"}`` (module doc) from per-window
    held-out losses by model on the new domain (``new``) and the retain data (``retain``), both holding
    ``old``, ``grown`` and the other trained arms."""
    rows = summary(new, retain)
    arms = [name for name in rows if name != REFERENCE]
    front = pareto_front(arms, new, retain)
    rule = (
        f"recommended when the grown model beats every other arm on the new domain by > {GAIN_SE:g} paired SE "
        f"while forgetting <= {max_forgetting:g} nats/token, or is the only arm on the Pareto front of "
        "(new-domain loss, forgetting)"
    )
    grown = rows["grown"]
    others = [name for name in arms if name != "grown"]
    missed = [name for name in others if not rows[name]["grown_gain"] > GAIN_SE * rows[name]["grown_gain_se"]]
    kept = grown["forgetting"] <= max_forgetting
    if not missed and kept:
        forgets = f"forgetting {grown['forgetting']:.4f} <= {max_forgetting:g}"
        why = f"beats every other arm by > {GAIN_SE:g} SE on the new domain, {forgets}"
        recommended, winner = True, "grown"
    elif front == ["grown"]:
        recommended, winner, why = True, "grown", "the only arm on the Pareto front of (new-domain loss, forgetting)"
    else:
        recommended, (winner, because) = False, _winner(rows, others, max_forgetting)
        lacks = [f"does not beat {', '.join(missed)} by > {GAIN_SE:g} SE"] if missed else []
        lacks += [] if kept else [f"forgets {grown['forgetting']:.4f} > {max_forgetting:g}"]
        why = f"grown {' and '.join(lacks)}; {winner} wins among the other arms: {because}"
    return {"recommended": recommended, "why": why, "winner": winner, "rule": rule, "pareto_front": front, "arms": rows}


def _winner(rows: dict[str, dict[str, Any]], others: list[str], max_forgetting: float) -> tuple[str, str]:
    """The arm to use instead of the grown one, and why (module doc)."""
    within = [name for name in others if rows[name]["forgetting"] <= max_forgetting]
    if within:
        winner = min(within, key=lambda name: rows[name]["new_loss"])
        loss = rows[winner]["new_loss"]
        return winner, f"lowest new-domain loss ({loss:.4f}) of the arms forgetting <= {max_forgetting:g}"
    winner = min(others, key=lambda name: rows[name]["forgetting"])
    return winner, f"no arm forgets <= {max_forgetting:g}; it forgets least ({rows[winner]['forgetting']:.4f})"
