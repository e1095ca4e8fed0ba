"""D4: test loss follows Paper D's power law in depth and width, L = a·D^(−α) + b·W^(−β) + c.

Reads the ``powerlaw`` table (``scalemech.stats.powerlaw``: one least-squares fit per (dataset, family) over
models with ≥ 3 depths and ≥ 3 widths, t intervals from the fit's covariance). Each exponent is judged
like a trend's slope (``units.Estimate.verdict``): above 0 when its interval is, below when it is below.
"""

from __future__ import annotations

import numpy as np

from ...stats.powerlaw import LEVEL, MIN_LEVELS
from ..common import NOT_DETECTABLE, Claim, NotMeasured, Result, Tables, agreed
from ..units import Estimate

EXPONENTS = {"alpha": "α (depth)", "beta": "β (width)"}
READS = {"powerlaw": ["parameter", "value", "se", "lo", "hi", "df", "models", "depths", "widths", "rss"]}


def exponent_text(estimate: Estimate) -> str:
    """The exponent with its interval; an infinite one (JᵀJ singular) says the data leave it free."""
    if np.isinf(estimate.lo) or np.isinf(estimate.hi):
        return f"{estimate.value:.3g} (not identified: JᵀJ singular)"
    return estimate.text()


def rule_d4(tables: Tables) -> Result:
    """Confirmed when every fitted exponent's interval lies above 0 (loss falls with depth and width)."""
    fits = tables.get("powerlaw")
    if fits is None or fits.empty:
        raise NotMeasured(f"no (dataset, family) with ≥ {MIN_LEVELS} depths and ≥ {MIN_LEVELS} widths (powerlaw table)")
    parts, verdicts, bounds, deciding = [], [], [], []
    for (dataset, family), rows in fits.groupby(["dataset", "family"]):
        by = rows.set_index("parameter")
        estimates = {
            name: Estimate(
                by.at[name, "value"],
                by.at[name, "lo"],
                by.at[name, "hi"],
                int(by.at[name, "models"]),
                int(by.at[name, "df"]),
                float(by.at[name, "se"]) if "se" in by else np.nan,
            )
            for name in EXPONENTS
        }
        verdicts += [estimate.verdict(sign=1) for estimate in estimates.values()]
        deciding += [(f"{dataset}/{family} {name}", estimate) for name, estimate in estimates.items()]
        texts = ", ".join(f"{label} {exponent_text(estimates[name])}" for name, label in EXPONENTS.items())
        parts.append(f"{dataset}/{family}: {texts}")
        bounds += [
            f"{dataset}/{family} {estimates[name].null_text(label.split()[0], parts=len(EXPONENTS))}"
            for name, label in EXPONENTS.items()
            if np.isfinite(estimates[name].hi)
        ]
    detail = f"{LEVEL:.0%} t intervals from s²(JᵀJ)⁻¹, df = models − 5; " + "; ".join(
        f"{dataset}/{family}: {r.models} models over {r.depths} depths × {r.widths} widths, c {r.value:.3g}, "
        f"RSS {r.rss:.3g}"
        for (dataset, family), r in fits[fits["parameter"] == "c"].set_index(["dataset", "family"]).iterrows()
    )
    verdict = agreed(*verdicts)
    statistic = "; ".join(parts)
    if verdict == NOT_DETECTABLE:
        detail += "; " + "; ".join(bounds)
    return Result(verdict, statistic, detail, tuple(deciding))


D4 = Claim(
    "D4",
    "Test loss falls as a power law in depth and in width toward an irreducible loss: L = a·D^(−α) + b·W^(−β) + c.",
    f"per (dataset, family) with ≥ {MIN_LEVELS} depths and ≥ {MIN_LEVELS} widths, a least-squares fit of the law "
    f"to every model's test loss (a, b ≥ 0; α, β in [−2, 4]); confirmed (refuted) if the 95 % t intervals of α and "
    f"β from the fit's covariance are all above (below) 0, not confirmed if they disagree, else not detectable "
    f"(each exponent's limit and minimum detectable value in the detail)",
    rule_d4,
    READS,
    figure="F3_rebound",
)
