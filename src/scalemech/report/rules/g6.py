"""G6 (E12, *extension*): the certificate predicts forgetting. Its predicted forgetting orders a base's
insertion points as growing there realizes it, and growing where it predicts the best trade (``pareto``)
forgets less than the gain-only certificate (``best``), ADEPT and block influence at equal new parameters,
at no detectable loss on the new domain (docs/science.md §5 E12, §6, §7.5.1). Fixed before any
``adaptation`` table carried the predicted forgetting (issue 58).

- **Ranking.** Per base, over its points grown one layer each (grown rows with one new layer, each point
  once: ``copied``), Spearman's ρ between ``predicted_forgetting`` (``forget_A = −μ_Bᵀμ_A`` at the point, the
  base's certificate) and the grown arm's realized ``forgetting`` (fewer than ``g1.MIN_POINTS`` points, or a
  constant column: not usable). Fisher's z as G1's (``g1.fisher_z``); across bases the mean z with a t
  interval (equal weights: z has no per-base SE; the bases are the units, as in G4 and G5: E12's two
  architectures would leave no interval with their seeds nested).
- **Dominance.** Per base and rival ``r`` (``best``, ``adept``, ``bi``: one new layer, as ``pareto``), the
  grown rows' ``vs_pareto_forgetting = F_r − F_pareto`` (> 0: pareto forgets less) and, as a safeguard,
  ``vs_pareto_new = L_r(B) − L_pareto(B)`` (< 0: pareto learns B worse); across bases random-effects
  means (``g4.over_bases``).

Every interval is two-sided at ``1 − 0.05/(1 + 2R)`` for ``R`` rivals (Bonferroni over the ranking's, the
R forgetting and the R safeguard intervals). The ranking and the forgetting saved decide (``combined``):
confirmed when every one lies above 0, refuted when one lies below (not confirmed when another lies
above); a rival detectably better on B turns a confirmation into "not confirmed" and anything else into
"refuted" (``g4.safeguarded``). Where ``pareto`` grows ``best``'s point, their difference is 0 at that base.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from ...core.tables import model_keys
from ..common import LEVEL, NOT_DETECTABLE, REFUTED, Claim, NotMeasured, Result, Tables, combined
from ..units import across_models, per_model
from .g1 import MIN_POINTS, fisher_z, rho_text
from .g4 import adaptation_rows, over_bases, safeguarded

FORGETTING_AWARE = "pareto"
RIVALS = ("best", "adept", "bi")
READS = {
    "adaptation": [
        "placement",
        "arm",
        "inserted",
        "copied",
        "predicted_forgetting",
        "forgetting",
        "vs_pareto_new",
        "vs_pareto_new_se",
        "vs_pareto_forgetting",
        "vs_pareto_forgetting_se",
    ]
}


def point_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """The grown rows of one new layer, one per base and point (``copied``), with both values finite."""
    single = rows[~rows["inserted"].astype(str).str.contains(",")]
    finite = np.isfinite(single[["predicted_forgetting", "forgetting"]].astype(float)).all(axis=1)
    return single[finite].drop_duplicates([*model_keys(), "copied"])


def rank_correlations(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per base: model keys, ``n`` (points), ``rho`` (``scipy.stats.spearmanr`` of predicted and
    realized forgetting; NaN below ``MIN_POINTS`` or for a constant column) and ``z``."""
    out = []
    for keys, part in point_rows(rows).groupby(model_keys(), sort=True):
        x, y = part["predicted_forgetting"].astype(float), part["forgetting"].astype(float)
        usable = len(part) >= MIN_POINTS and x.nunique() > 1 and y.nunique() > 1
        rho = float(stats.spearmanr(x, y).statistic) if usable else np.nan
        z = fisher_z(rho, len(part)) if usable else np.nan
        out.append(dict(zip(model_keys(), keys)) | dict(n=len(part), rho=rho, z=z))
    return pd.DataFrame(out, columns=[*model_keys(), "n", "rho", "z"])


def rule_g6(tables: Tables) -> Result:
    """The mean Fisher z of Spearman(predicted, realized forgetting) over bases, and per rival the forgetting
    pareto saves, Bonferroni over every interval, the new domain a safeguard."""
    rows = adaptation_rows(tables, READS["adaptation"], "grown")
    found = set(rows["placement"])
    chosen = [r for r in RIVALS if r in found]
    if FORGETTING_AWARE not in found or not chosen:
        raise NotMeasured(
            f"adaptation's grown rows have placements {sorted(found)}: need {FORGETTING_AWARE} and a rival"
        )
    bases = rank_correlations(rows)
    usable = bases[bases["z"].notna()]
    if usable.empty:
        raise NotMeasured(f"no base has ≥ {MIN_POINTS} points grown one layer each with finite forgetting")
    level = 1 - (1 - LEVEL) / (1 + 2 * len(chosen))
    ranking = across_models(per_model(usable, "z", None), level=level, nest=False)  # bases as units, as G4's
    at = {r: rows[rows["placement"] == r] for r in chosen}
    saved = {r: over_bases(at[r], "vs_pareto_forgetting", level) for r in chosen}
    new = {r: over_bases(at[r], "vs_pareto_new", level) for r in chosen}
    harmed = [r for r, e in new.items() if e.verdict(sign=1) == REFUTED]
    verdict = safeguarded(combined(ranking.verdict(sign=1), *(e.verdict(sign=1) for e in saved.values())), bool(harmed))
    statistic = f"ρ(predicted, realized forgetting) {rho_text(ranking)} ({ranking.units} bases); F_r − F_pareto: "
    statistic += ", ".join(f"{r} {saved[r].text(2)}" for r in chosen)
    statistic += (
        f"; pareto learns B detectably worse than {', '.join(harmed)}" if harmed else "; no detectable loss on B"
    )
    if verdict == NOT_DETECTABLE:
        parts = 1 + len(chosen)
        statistic += f"; MDE mean z {ranking.mde(parts):.2g}, " + ", ".join(
            f"{saved[r].mde(parts):.2g}" for r in chosen
        )
    detail = (
        f"{len(usable)} of {len(bases)} bases with ≥ {MIN_POINTS} points grown one layer each (median "
        f"{usable['n'].median():g}); mean z {ranking.text(2)} ({ranking.df} df); per rival F_r − F_pareto and "
        f"L_r(B) − L_pareto(B) paired over the held-out windows, across bases random-effects means; every interval "
        f"{100 * level:.3g} % t (Bonferroni over {1 + 2 * len(chosen)}); "
        + "; ".join(f"{r}: forgetting saved {saved[r].verdict(sign=1)}, on B {new[r].text(2)}" for r in chosen)
    )
    estimates = (("ranking (mean z)", ranking), *((f"{r} forgetting saved", saved[r]) for r in chosen))
    return Result(verdict, statistic, detail, (*estimates, *((f"{r} on B", new[r]) for r in chosen)))


G6 = Claim(
    "G6",
    "The certificate predicts forgetting: its predicted forgetting orders the insertion points as growing there "
    "realizes it, and growing where it predicts the best trade (pareto) forgets less than the gain-only "
    "certificate, ADEPT and block influence at equal new parameters, at no loss on the new domain (E12, extension).",
    "per base Spearman ρ of predicted (−μ_Bᵀμ_A) and realized forgetting over its points grown one layer each, "
    "Fisher z, across bases the mean z with a t interval; per base and rival (best, adept, bi) F_r − F_pareto and "
    "L_r(B) − L_pareto(B) with paired SEs, across bases random-effects means; every interval at 1 − 0.05/(1 + 2 × "
    "rivals) (Bonferroni): confirmed if the mean z and every forgetting saved are above 0 and no rival is detectably "
    "better on the new domain (else not confirmed), refuted if one is below 0 (not confirmed if another is above) "
    "or a rival is detectably better on the new domain, else not detectable with each limit and MDE",
    rule_g6,
    READS,
    figure="F11_adaptation",
)
