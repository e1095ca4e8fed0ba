"""G4 (E12, *extension*): at equal FLOPs, growth with frozen old layers forgets less than full fine-tuning,
at no loss on the new domain (docs/science.md §5 E12, §6).

At the certificate's placement (``best``: ``grow``'s greedy rule over its whole ranking), per base the ``control_flops``
row's paired differences against the grown arm (the same held-out windows): ``vs_grown_forgetting =
F_control_flops − F_grown`` (> 0: growth forgets less) and ``vs_grown_new = L_control_flops(B) −
L_grown(B)`` (> 0: growth learns B better), each with its SE over the windows. The bases are the
units: across bases a random-effects mean with a 95 % t interval (``units``), in nats. Two parts:
*forgetting*, confirmed when its interval lies above 0 and refuted when below; *no loss on B*, a
non-inferiority test whose margin is the run's own minimum detectable effect ``m`` of that mean (as
W4): confirmed when the interval lies above ``−m``, refuted when below. The claim is confirmed when both
parts are, refuted when one is refuted and the other not confirmed (one part confirmed and the other
refuted is a trade: not confirmed; ``combined``), else not detectable with each limit and MDE. The
helpers E12's rules share live here (``adaptation_rows``, ``over_bases``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..common import LEVEL, NOT_DETECTABLE, Claim, NotMeasured, Result, Tables, combined, table
from ..units import Estimate, across_models, per_model

CERTIFICATE = "best"  # grow --at best: the certificate's first-ranked point, grown whatever its verdict
PARTS = 2  # forgetting and no loss on B: both must be confirmed
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
    ``level`` t interval (``units``); rows without a finite value or SE are left out."""
    finite = np.isfinite(rows[[value, f"{value}_se"]].astype(float)).all(axis=1)
    return across_models(per_model(rows[finite], value, f"{value}_se"), level=level)


def non_inferior(estimate: Estimate, parts: int) -> str:
    """A non-inferiority verdict at the margin ``−m``, ``m`` the estimate's MDE at ``parts`` parts."""
    return estimate.verdict(sign=1, null=-estimate.mde(parts))


def rule_g4(tables: Tables) -> Result:
    """Forgetting saved and new-domain loss at the certificate's placement, control_flops against grown:
    confirmed when growth forgets less and is non-inferior on B, refuted when either part refutes."""
    rows = adaptation_rows(tables, READS["adaptation"], "control_flops", [CERTIFICATE])
    forgetting, new = over_bases(rows, "vs_grown_forgetting"), over_bases(rows, "vs_grown_new")
    verdict = combined(forgetting.verdict(sign=1), non_inferior(new, PARTS))
    statistic = (
        f"forgetting saved F(control_flops) − F(grown) {forgetting.text(2)} nats; on B L(control_flops) − L(grown) "
        f"{new.text(2)} vs margin −{new.mde(PARTS):.2g} ({forgetting.units} bases)"
    )
    if verdict == NOT_DETECTABLE:
        statistic += f"; MDE {forgetting.mde(PARTS):.2g} (forgetting)"
    undecided = forgetting.verdict(sign=1) == NOT_DETECTABLE
    detail = (
        f"{len(rows)} control_flops rows at placement {CERTIFICATE}; per base the paired differences over the "
        f"held-out windows, across bases a random-effects mean with a t interval ({forgetting.df} df; "
        f"{forgetting.weights_text() or 'equal weights'}); forgetting {forgetting.verdict(sign=1)}, no loss on B "
        f"(non-inferiority at the run's MDE) {non_inferior(new, PARTS)}; "
        + (forgetting.null_text("forgetting saved", parts=PARTS) if undecided else "")
    )
    return Result(verdict, statistic, detail, (("forgetting", forgetting), ("new domain", new)))


G4 = Claim(
    "G4",
    "At equal FLOPs, growing new layers with the old ones frozen forgets less of the old domain than full "
    "fine-tuning, at no loss on the new domain (E12, extension).",
    "at the certificate's placement, per base F(control_flops) − F(grown) and L(control_flops) − L(grown) on the "
    "new domain with their paired SEs over the held-out windows; across bases random-effects means with 95 % t "
    "intervals: confirmed if the forgetting saved is above 0 and the new-domain difference above minus its "
    "minimum detectable effect (non-inferiority), refuted if either lies below (not confirmed if the other is "
    "confirmed), else not detectable with each "
    "limit and MDE",
    rule_g4,
    READS,
    figure="F11_adaptation",
)
