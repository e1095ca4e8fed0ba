"""G5 (E12, *extension*): the certificate's placement beats LLaMA-Pro's, ADEPT's and block influence's on
new-domain gain, at no more forgetting, at equal new parameters (docs/science.md §5 E12, §6).

Per base and rival placement ``r`` (``every:K``, ``adept``, ``bi``: the rules of the literature; ``top`` is
stated beside, not decided on), the grown rows' paired differences against the certificate's placement
with as many new layers (``equal_reference``: ``best`` for a one-layer rule, ``best:K``, the certificate's
first ``K`` points grown at once, for ``every:K``'s ``K`` layers), over the same held-out windows:
``vs_equal_new = L_r(B) − L_cert(B)`` (> 0: the certificate learns B better) and ``vs_equal_forgetting =
F_r − F_cert`` (> 0: it forgets less). A rival whose equal reference did not run is stated beside, as is
``every:K`` against the one-layer ``best`` (``vs_best_new``: unequal new parameters, the comparison G5 made
before issue 58). Across bases random-effects means (``g4.over_bases``), each at the two-sided level
``1 − 0.05/(2R)`` for ``R`` rivals (Bonferroni over the 2R intervals). The gains decide (``combined``):
confirmed when every rival's lies above 0, refuted when one lies below (not confirmed when another lies
above). Forgetting is a safeguard (``g4.safeguarded``): where the certificate forgets detectably more than a
rival, a confirmation becomes "not confirmed" and anything else "refuted".
"""

from __future__ import annotations

import numpy as np

from ..common import LEVEL, NOT_DETECTABLE, REFUTED, Claim, NotMeasured, Result, Tables, combined
from .g4 import CERTIFICATE, adaptation_rows, over_bases, safeguarded

DESCRIBED = ("top",)  # placements stated beside the verdict
READS = {
    "adaptation": [
        "placement",
        "arm",
        "equal_reference",
        "vs_equal_new",
        "vs_equal_new_se",
        "vs_equal_forgetting",
        "vs_equal_forgetting_se",
        "vs_best_new",
        "vs_best_new_se",
    ]
}


def rivals(placements: list[str]) -> list[str]:
    """The literature's placements among ``placements``: ``every:K``, ``adept``, ``bi``."""
    return [p for p in placements if p.startswith("every:") or p in ("adept", "bi")]


def rule_g5(tables: Tables) -> Result:
    """Per rival the certificate's new-domain advantage at equal new parameters, its forgetting as a
    safeguard, Bonferroni over the intervals: confirmed when every advantage is above 0 and no rival forgets
    detectably less."""
    rows = adaptation_rows(tables, READS["adaptation"], "grown")
    found = sorted(rows["placement"].unique())
    paired = rows[rows["equal_reference"].notna() & np.isfinite(rows["vs_equal_new"].astype(float))]
    chosen = rivals(sorted(paired["placement"].unique()))
    if CERTIFICATE not in found or not chosen:
        raise NotMeasured(
            f"adaptation's grown rows have placements {found}: need {CERTIFICATE} and a rival paired with the "
            "certificate at its new parameters"
        )
    level, parts = 1 - (1 - LEVEL) / (2 * len(chosen)), len(chosen)
    at = {r: paired[paired["placement"] == r] for r in chosen}
    gains = {r: over_bases(at[r], "vs_equal_new", level) for r in chosen}
    forgets = {r: over_bases(at[r], "vs_equal_forgetting", level) for r in chosen}
    references = {r: "/".join(sorted(at[r]["equal_reference"].unique())) for r in chosen}
    harmed = [r for r, e in forgets.items() if e.verdict(sign=1) == REFUTED]
    verdict = safeguarded(combined(*(e.verdict(sign=1) for e in gains.values())), bool(harmed))
    statistic = "L_r(B) − L_cert(B): " + ", ".join(f"{r} vs {references[r]} {gains[r].text(2)}" for r in chosen)
    statistic += f"; forgets detectably more than {', '.join(harmed)}" if harmed else "; no detectable extra forgetting"
    if verdict == NOT_DETECTABLE:
        statistic += "; MDE " + ", ".join(f"{gains[r].mde(parts):.2g}" for r in chosen)
    unpaired = [p for p in rivals(found) if p not in chosen] + [p for p in DESCRIBED if p in found]
    aside = {p: over_bases(rows[rows["placement"] == p], "vs_best_new") for p in unpaired}
    unequal = {
        p: over_bases(rows[rows["placement"] == p], "vs_best_new") for p in chosen if references[p] != CERTIFICATE
    }
    units = next(iter(gains.values())).units
    detail = (
        f"grown rows of {units} bases; per rival L_r(B) − L_cert(B) and F_r − F_cert paired over the held-out "
        f"windows against the certificate at equal new parameters, across bases random-effects means with "
        f"{100 * level:.3g} % t intervals (Bonferroni over {2 * len(chosen)}); "
        + "; ".join(f"{r}: gain {gains[r].verdict(sign=1)}, F_r − F_cert {e.text(2)}" for r, e in forgets.items())
        + "".join(f"; {p} against the one-layer best (unequal new parameters): {e.text(2)}" for p, e in unequal.items())
        + "".join(f"; {p} (description): L_{p}(B) − L_best(B) {e.text(2)}" for p, e in aside.items())
    )
    estimates = tuple((f"{r} gain", gains[r]) for r in chosen) + tuple((f"{r} forgetting", forgets[r]) for r in chosen)
    return Result(verdict, statistic, detail, estimates)


G5 = Claim(
    "G5",
    "Growing where the certificate says learns the new domain better than LLaMA-Pro's, ADEPT's and block "
    "influence's placements, at no more forgetting, at equal new parameters (E12, extension).",
    "per base and rival placement (every:K, adept, bi) the grown model's L_r(B) − L_cert(B) and F_r − F_cert "
    "against the certificate's placement with as many new layers (best, or best:K for every:K), with paired SEs "
    "over the held-out windows; across bases random-effects means with t intervals at "
    "1 − 0.05/(2 × rivals) (Bonferroni): confirmed if every rival's gain is above 0 and no rival forgets detectably "
    "less (else not confirmed), refuted if a gain is below 0 (not confirmed if another is above) or a rival forgets "
    "detectably less, else not detectable with each limit and MDE",
    rule_g5,
    READS,
    figure="F11_adaptation",
)
