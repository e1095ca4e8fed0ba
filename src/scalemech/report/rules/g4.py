"""G4 (E12, *extension*): at equal FLOPs, growth with frozen old layers forgets less than full fine-tuning,
at no loss on the new domain (docs/science.md §5 E12, §6).

At the certificate's placement (``best``: ``grow``'s greedy rule over its whole ranking), per base the
``control_flops`` row's paired differences against the grown arm (the same held-out windows):
``vs_grown_forgetting = F_control_flops − F_grown`` (> 0: growth forgets less) and ``vs_grown_new =
L_control_flops(B) − L_grown(B)`` (> 0: growth learns B better), each with its SE over the windows. The
bases are the units: across bases a random-effects mean with a t interval (``units``), in nats, each of
the two at the level ``1 − 0.05/2`` (Bonferroni over the two). The forgetting saved decides: confirmed
when its interval lies above 0, refuted when below. The new domain is a safeguard: where its interval
lies below 0 (growth learns B worse, detectably), a confirmation becomes "not confirmed" (a trade, not
the claim) and anything else "refuted". With a handful of bases no interval is narrow enough to show
equality on B (a non-inferiority margin the run could resolve would be wider than the effects), so the
claim reads "at no detectable loss", and the row states the new-domain interval. The helpers E12's rules
share live here (``adaptation_rows``, ``over_bases``, ``safeguarded``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..common import CONFIRMED, LEVEL, NOT_CONFIRMED, NOT_DETECTABLE, REFUTED, Claim, NotMeasured, Result, Tables, table
from ..units import Estimate, across_models, per_model

CERTIFICATE = "best"  # grow --at best: the certificate's first-ranked point, grown whatever its verdict
PARTS = 1  # the forgetting saved decides; the safeguard on B only vetoes
PART_LEVEL = 1 - (1 - LEVEL) / 2  # each of the two intervals (Bonferroni)
READS = {
    "adaptation": [
        "placement",
        "arm",
        "vs_grown_new",
        "vs_grown_new_se",
        "vs_grown_forgetting",
        "vs_grown_forgetting_se",
    ]
}


def adaptation_rows(tables: Tables, columns: list[str], arm: str, placements: list[str] | None = None) -> pd.DataFrame:
    """The ``adaptation`` rows of ``arm`` (at ``placements``, default every one) with ``columns``;
    NotMeasured without any."""
    frame = table(tables, "adaptation", columns)
    rows = frame[(frame["arm"] == arm) & (frame["placement"].isin(placements) if placements else True)]
    if rows.empty:
        raise NotMeasured(f"adaptation has no {arm} row at placements {placements or 'any'}")
    return rows


def over_bases(rows: pd.DataFrame, value: str, level: float = LEVEL) -> Estimate:
    """Per base the row's ``value`` with its paired SE, across bases the random-effects mean with a two-sided
    ``level`` t interval (``units``); rows without a finite value or SE are left out. Each base is a unit, its
    seeds not nested: E12's claims are about growing these trained bases (four, of two architectures in
    config/growth.yaml: nested, no interval would remain)."""
    finite = np.isfinite(rows[[value, f"{value}_se"]].astype(float)).all(axis=1)
    return across_models(per_model(rows[finite], value, f"{value}_se"), level=level, nest=False)


def safeguarded(primary: str, harmed: bool) -> str:
    """``primary``'s verdict unless the safeguard detected harm: then refuted, or not confirmed where the
    primary part was confirmed (a trade, not the claim)."""
    if not harmed:
        return primary
    return NOT_CONFIRMED if primary == CONFIRMED else REFUTED


def rule_g4(tables: Tables) -> Result:
    """Forgetting saved at the certificate's placement, control_flops against grown, with the new domain as a
    safeguard: confirmed when growth forgets less and is not detectably worse on B."""
    rows = adaptation_rows(tables, READS["adaptation"], "control_flops", [CERTIFICATE])
    forgetting = over_bases(rows, "vs_grown_forgetting", PART_LEVEL)
    new = over_bases(rows, "vs_grown_new", PART_LEVEL)
    harmed = new.verdict(sign=1) == REFUTED
    verdict = safeguarded(forgetting.verdict(sign=1), harmed)
    statistic = (
        f"forgetting saved F(control_flops) − F(grown) {forgetting.text(2)} nats; on B L(control_flops) − "
        f"L(grown) {new.text(2)} ({forgetting.units} bases)"
    )
    if verdict == NOT_DETECTABLE:
        statistic += f"; MDE {forgetting.mde(PARTS):.2g}"
    detail = (
        f"{len(rows)} control_flops rows at placement {CERTIFICATE}; per base the paired differences over the "
        f"held-out windows, across bases random-effects means with {100 * PART_LEVEL:.3g} % t intervals "
        f"({forgetting.df} df; {forgetting.weights_text() or 'equal weights'}); forgetting saved "
        f"{forgetting.verdict(sign=1)}; on B {'growth detectably worse' if harmed else 'no detectable loss'}"
        + (f"; {forgetting.null_text('forgetting saved', parts=PARTS)}" if verdict == NOT_DETECTABLE else "")
    )
    return Result(verdict, statistic, detail, (("forgetting", forgetting), ("new domain", new)))


G4 = Claim(
    "G4",
    "At equal FLOPs, growing new layers with the old ones frozen forgets less of the old domain than full "
    "fine-tuning, at no loss on the new domain (E12, extension).",
    "at the certificate's placement, per base F(control_flops) − F(grown) and L(control_flops) − L(grown) on the "
    "new domain with their paired SEs over the held-out windows; across bases random-effects means with 97.5 % t "
    "intervals: confirmed if the forgetting saved is above 0 and growth is not detectably worse on the new domain "
    "(its interval not below 0; otherwise not confirmed), refuted if the forgetting saved is below 0 or growth is "
    "detectably worse on the new domain, else not detectable with the limit and MDE",
    rule_g4,
    READS,
    figure="F11_adaptation",
)
