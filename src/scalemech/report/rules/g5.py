"""G5 (E12, *extension*): the certificate's placement beats LLaMA-Pro's, ADEPT's and block influence's on
new-domain gain, at equal forgetting (docs/science.md §5 E12, §6).

Per base and rival placement ``r`` (``every:K``, ``adept``, ``bi``: the rules of the literature; ``top`` is
stated beside, not decided on), the grown rows' paired differences against the certificate's (``best``)
over the same held-out windows: ``vs_best_new = L_r(B) − L_best(B)`` (> 0: the certificate learns B
better) and ``vs_best_forgetting = F_r − F_best`` (> 0: it forgets less). Across bases random-effects
means (``g4.over_bases``), each at the two-sided level ``1 − 0.05/R`` for ``R`` rivals (Bonferroni: a
refutation by any one rival keeps the family-wise level). Per rival two parts: the gain, confirmed above 0
and refuted below; forgetting, non-inferior at the run's own MDE ``m`` (above ``−m``: confirmed, below:
refuted). Confirmed when every part of every rival is, refuted when a part is and none is confirmed (both
at once: not confirmed; ``combined``), else not detectable.
"""

from __future__ import annotations

from ..common import CONFIRMED, LEVEL, NOT_DETECTABLE, Claim, NotMeasured, Result, Tables, combined
from .g4 import CERTIFICATE, adaptation_rows, non_inferior, over_bases

DESCRIBED = ("top",)  # placements stated beside the verdict
READS = {
    "adaptation": ["placement", "arm", "vs_best_new", "vs_best_new_se", "vs_best_forgetting", "vs_best_forgetting_se"]
}


def rivals(placements: list[str]) -> list[str]:
    """The literature's placements among ``placements``: ``every:K``, ``adept``, ``bi``."""
    return [p for p in placements if p.startswith("every:") or p in ("adept", "bi")]


def rule_g5(tables: Tables) -> Result:
    """Per rival the certificate's new-domain advantage and its forgetting non-inferiority, Bonferroni over
    rivals: confirmed when every part is, refuted when any is."""
    rows = adaptation_rows(tables, READS["adaptation"], "grown")
    found = sorted(rows["placement"].unique())
    chosen = rivals(found)
    if CERTIFICATE not in found or not chosen:
        raise NotMeasured(f"adaptation's grown rows have placements {found}: need {CERTIFICATE} and a rival")
    level, parts = 1 - (1 - LEVEL) / len(chosen), 2 * len(chosen)
    gains = {r: over_bases(rows[rows["placement"] == r], "vs_best_new", level) for r in chosen}
    forgets = {r: over_bases(rows[rows["placement"] == r], "vs_best_forgetting", level) for r in chosen}
    verdicts = [e.verdict(sign=1) for e in gains.values()] + [non_inferior(e, parts) for e in forgets.values()]
    verdict = combined(*verdicts)
    kept = sum(non_inferior(e, parts) == CONFIRMED for e in forgets.values())
    statistic = "L_r(B) − L_best(B): " + ", ".join(f"{r} {gains[r].text(2)}" for r in chosen)
    statistic += f"; forgetting non-inferior vs {kept} of {len(chosen)} rivals"
    if verdict == NOT_DETECTABLE:
        statistic += "; MDE " + ", ".join(f"{gains[r].mde(parts):.2g} ({r})" for r in chosen)
    described = [p for p in DESCRIBED if p in found]
    aside = {p: over_bases(rows[rows["placement"] == p], "vs_best_new") for p in described}
    units = next(iter(gains.values())).units
    detail = (
        f"grown rows of {units} bases; per rival L_r(B) − L_best(B) and F_r − F_best paired over the held-out "
        f"windows, across bases random-effects means with {100 * level:.3g} % t intervals (Bonferroni over "
        f"{len(chosen)} rivals); forgetting non-inferior at each estimate's MDE at {parts} parts; "
        + "; ".join(
            f"{r} gain {gains[r].verdict(sign=1)}, forgetting F_r − F_best {e.text(2)} vs −{e.mde(parts):.2g} "
            f"{non_inferior(e, parts)}"
            for r, e in forgets.items()
        )
        + "".join(f"; {p} (description): L_{p}(B) − L_best(B) {e.text(2)}" for p, e in aside.items())
    )
    estimates = tuple((f"{r} gain", gains[r]) for r in chosen) + tuple((f"{r} forgetting", forgets[r]) for r in chosen)
    return Result(verdict, statistic, detail, estimates)


G5 = Claim(
    "G5",
    "Growing where the certificate says learns the new domain better than LLaMA-Pro's, ADEPT's and block "
    "influence's placements, at no more forgetting (E12, extension).",
    "per base and rival placement (every:K, adept, bi) the grown model's L_r(B) − L_best(B) and F_r − F_best "
    "with paired SEs over the held-out windows; across bases random-effects means with t intervals at "
    "1 − 0.05/rivals (Bonferroni): confirmed if for every rival the gain is above 0 and the forgetting "
    "difference above minus its minimum detectable effect (non-inferiority), refuted if any lies below (not "
    "confirmed if another is confirmed), else "
    "not detectable with each limit and MDE",
    rule_g5,
    READS,
    figure="F11_adaptation",
)
