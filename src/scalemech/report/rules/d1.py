"""D1: the activation-gradient covariance is close to diagonal.

The table's bias-corrected off-diagonal share ``r = ‖Σ−diag Σ‖²_F / ‖Σ‖²_F`` of a pooled view with
``p`` coordinates grows with ``p`` for the same correlations, so it is turned into the p-invariant
mean squared off-diagonal correlation ``ρ̄² = r / ((p − 1)(1 − r))`` (exact for equal variances:
``‖offdiag‖² / ‖diag‖² = (p − 1)·ρ̄²``; a variance-weighted mean otherwise), with SE from the
permutation null's sd of ``r`` by the delta method, ``sd_r / ((p − 1)(1 − r)²)``. Models are the
units (``units``); low-rank points (the last block before a low-rank head) are left out.
"""

from __future__ import annotations

import numpy as np

from ...figures.aggregate import as_flag
from ..common import LEVEL, NOT_DETECTABLE, Claim, NotMeasured, Result, Tables, table
from ..units import across_models, per_model

D1_MAX_MEAN_SQ_CORR = 0.05  # "close to diagonal": RMS off-diagonal correlation ≤ √0.05 ≈ 0.22 (our choice)
READS = {"covariance": ["dim", "offdiag_ratio", "offdiag_ratio_null_sd", "low_rank"]}


def rule_d1(tables: Tables) -> Result:
    """Confirmed when the mean ρ̄² over models has its interval below D1_MAX_MEAN_SQ_CORR, refuted above."""
    cov = table(tables, "covariance", READS["covariance"])
    low_rank = as_flag(cov["low_rank"]) == 1
    r, sd, p = (cov[c].astype(float) for c in ("offdiag_ratio", "offdiag_ratio_null_sd", "dim"))
    judged = cov[~low_rank & np.isfinite(r) & np.isfinite(sd) & (p >= 2) & (r < 1)]
    if judged.empty:
        raise NotMeasured(f"covariance has no row to judge ({int(low_rank.sum())} of {len(cov)} low-rank)")
    r, sd, p = r[judged.index], sd[judged.index], p[judged.index]
    rows = judged.assign(rho2=r / ((p - 1) * (1 - r)), rho2_se=sd / ((p - 1) * (1 - r) ** 2))
    mean = across_models(per_model(rows, "rho2", "rho2_se"))
    verdict = mean.verdict(sign=-1, null=D1_MAX_MEAN_SQ_CORR)
    statistic = (
        f"mean squared off-diagonal correlation ρ̄² = {mean.text()} (close to diagonal: ≤ {D1_MAX_MEAN_SQ_CORR:g})"
    )
    if verdict == NOT_DETECTABLE:
        statistic += "; " + mean.null_text("ρ̄²", sign=-1, null=D1_MAX_MEAN_SQ_CORR)
    detail = (
        f"{len(judged)} of {len(cov)} model × point rows ({int(low_rank.sum())} low-rank, excluded; "
        f"{len(cov) - len(judged) - int(low_rank.sum())} without a ratio or null) over {mean.counted}; "
        f"pooled dims p = {', '.join(f'{d:g}' for d in sorted(p.unique()))}; median ρ̄² by p: "
        + ", ".join(f"{d:g}: {m:.3g}" for d, m in rows.groupby("dim")["rho2"].median().items())
    )
    return Result(verdict, statistic, detail, (("ρ̄²", mean),))


D1 = Claim(
    "D1",
    "The activation-gradient covariance is close to diagonal.",
    f"ρ̄² = r/((p−1)(1−r)) from the bias-corrected off-diagonal share r of the pooled view (p-invariant mean "
    f"squared off-diagonal correlation), SE from the permutation null's sd; per model the mean over its "
    f"non-low-rank points, then the weighted mean across models with a {LEVEL:.0%} t interval: confirmed if it lies "
    f"below {D1_MAX_MEAN_SQ_CORR:g}, refuted if above, else not detectable with its lower limit and the minimum "
    f"detectable distance from {D1_MAX_MEAN_SQ_CORR:g} (80 % power) at the run's number of models",
    rule_d1,
    READS,
    figure="F1_covariance",
)
