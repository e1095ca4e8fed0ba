"""W2's level: misalignment as rare as the d_align Paper W reports implies through its certificate.

Theorem 1 bounds misalignment by ``B_align = 1/(1 + n_eff(M, K)·d_align)``, and the certificate's own
signal-to-noise ratio ``r = E/√V(M, K)`` (W2's statistic, ``misalignment.alignment``) satisfies
``r² ≥ n_eff(M, K)·d_align`` (``V ≤ ‖μ‖⁴/(n_eff·d_align)``, docs/science.md §3.3). So the paper's least
d_align, 3.9 (width 512), implies ``r ≥ √(n_eff·3.9)`` at any (M, K): about 7.8 at M = K = 32, a
misalignment of at most ``B_align`` ≈ 0.016. At the grid's largest M = K, per model of ``LEVEL_FAMILIES`` the
mean ``r`` over its points (full view), across models the mean with a 95 % t interval (equal weights, as W2):
confirmed when it lies above the implied floor, refuted when below it (the row says how far), else not
detectable.
"""

from __future__ import annotations

import math

from ...stats.misalignment import effective_sample_size as n_eff
from ..common import NOT_DETECTABLE, REFUTED, Claim, NotMeasured, Result, Tables, below
from ..units import across_models, per_model
from .misalignment import COLUMNS, alignment
from .w1_level import BAND, LEVEL_FAMILIES

READS = {"misalignment": COLUMNS}


def implied_ratio(M: int, K: int, d_align: float = BAND[0]) -> float:
    """``√(n_eff(M, K)·d_align)``: the least ``E/√V(M, K)`` the paper's ``d_align`` implies."""
    return math.sqrt(n_eff(M, K) * d_align)


def rule_w2_level(tables: Tables) -> Result:
    """The mean ``E/√V`` at the largest M = K over models of ``LEVEL_FAMILIES`` against ``implied_ratio``."""
    frame = alignment(tables)
    frame = frame[frame["family"].isin(LEVEL_FAMILIES) & (frame["M"] == frame["K"])]
    if frame.empty:
        raise NotMeasured(f"misalignment has no {' or '.join(LEVEL_FAMILIES)} rows with M = K")
    M = int(frame["M"].max())
    rows = frame[(frame["M"] == M) & frame["r"].notna()]
    mean = across_models(per_model(rows, "r", None))
    if not mean.measured:
        raise NotMeasured(f"E/√V's level needs an interval: {mean.counted}, df {mean.df}")
    floor = implied_ratio(M, M)
    verdict = mean.verdict(sign=1, null=floor)
    b_align = 1 / (1 + n_eff(M, M) * BAND[0])
    statistic = (
        f"at M=K={M}: mean E/√V {mean.text()} over {mean.counted} vs ≥ {floor:.3g}, the paper's d_align ≥ "
        f"{BAND[0]:g} through the certificate"
    )
    if verdict == REFUTED:
        statistic += f": {below(mean.hi, floor)}"
    elif verdict == NOT_DETECTABLE:
        statistic += "; " + mean.null_text("mean E/√V", null=floor)
    detail = (
        f"E/√V = mu_cross/√v_mk (signed), families {', '.join(LEVEL_FAMILIES)}; r² ≥ n_eff·d_align with n_eff = "
        f"{n_eff(M, M):.3g} at M = K = {M} (B_align ≤ {b_align:.2g} at d_align = {BAND[0]:g}); {len(rows)} rows "
        f"with a ratio over {mean.counted}, per model the "
        f"mean over points, across models a t interval ({mean.df} df, equal weights)"
    )
    return Result(verdict, statistic, detail, (("mean E/√V", mean),))


W2_LEVEL = Claim(
    "W2 level",
    "Misalignment is as rare as the paper's d_align (≥ 3.9) implies through its certificate.",
    f"at the grid's largest M = K, every {'/'.join(LEVEL_FAMILIES)} row's E/√V(M, K) (signed); per model the "
    f"mean over points, across models a 95 % t interval: confirmed if it lies above √(n_eff(M, K)·"
    f"{BAND[0]:g}), the least value the paper's d_align implies (r² ≥ n_eff·d_align), refuted if below, else not "
    f"detectable with its limit and MDE",
    rule_w2_level,
    READS,
    figure="F5_misalignment",
)
