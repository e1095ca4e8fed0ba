"""W2 and W3: misalignment judged in the population, on the certificate's own signal-to-noise ratio.

For draws of M train and K test examples, ``X = μ_Mᵀg_K`` has mean ``E = μ_trᵀμ_te`` and the variance
``V(M, K)`` of ``stats.two_sample_variance`` (every term estimated without bias from the cross-Gram; the
table's ``v_mk``); the table's ``b_exact = V/(V + E²)`` is Cantelli's bound on ``P(X ≤ 0)``. So the
certificate's own signal-to-noise ratio at (M, K) is ``r = E/√V`` (``b_exact = 1/(1 + r²)`` where E > 0),
and misalignment (≈ Φ(−r)) falls with width exactly when r rises. r keeps its sign: where E is estimated
≤ 0 (no certificate) r is negative, so a misalignment that rises with width is seen and refuted. A row
whose estimate of V is ≤ 0 has no ratio and is left out, counted in the detail.
W2 judges the width slope of r; the ``b_exact`` UCB is reported beside it (at this run's pool sizes
it is near 1 for every model, so as a gate it would decide nothing).
W3 judges ``E/SE`` (``mu_cross_se``, E's two-sample jackknife SE).
P̂ (share of misaligned draws from the two pools) and its Wilson interval cover only the draws, not
the pools: they are description here, never evidence.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...core.tables import model_keys
from ...figures.aggregate import default_mk
from ..common import NOT_DETECTABLE, Claim, NotMeasured, Result, Tables, only, table
from ..trend import trend
from ..units import across_models, per_model

W2_VIEW = "full"
W2_STRATA = ["dataset", "family", "depth"]
COLUMNS = ["point_index", "view", "M", "K", "p_misalign", "b_exact_ucb", "mu_cross", "mu_cross_se", "v_mk"]
READS = {"misalignment": COLUMNS}


def alignment(tables: Tables) -> pd.DataFrame:
    """The misalignment rows (view ``W2_VIEW``) with ``r = E/√V`` (``mu_cross/√v_mk``, signed; NaN where the
    estimate of V is ≤ 0) and ``t = E/SE``."""
    frame = only(table(tables, "misalignment", COLUMNS), "view", W2_VIEW, "misalignment")
    v = frame["v_mk"].astype(float)
    r = frame["mu_cross"].astype(float) / np.sqrt(v.where(v > 0))
    return frame.assign(r=r, t=frame["mu_cross"] / frame["mu_cross_se"])


def _described(rows: pd.DataFrame) -> str:
    below = (rows["p_misalign"] <= rows["b_exact_ucb"]).sum()
    return f"P̂ ≤ B_exact UCB in {below} of {rows['b_exact_ucb'].notna().sum()} rows with one (description only)"


def rule_w2(tables: Tables) -> Result:
    """At the default (M, K): slope of r = E/√V on log₂ width across models: confirmed above 0
    (misalignment falls with width), refuted below; the median B_exact UCB is stated beside it."""
    frame = alignment(tables)
    M, K = default_mk(frame)
    fixed = frame[(frame["M"] == M) & (frame["K"] == K)]
    if fixed.groupby(W2_STRATA)["width"].nunique().max() < 3:
        raise NotMeasured(f"misalignment has no (dataset, family, depth) with ≥ 3 widths at M={M}, K={K}")
    if fixed["r"].isna().all():
        raise NotMeasured(f"misalignment has no row with V(M, K) estimated above 0 (v_mk) at M={M}, K={K}")
    fit = trend(fixed, "r", None, "width", W2_STRATA)  # rows without a ratio (NaN) are left out
    verdict = fit.slope.verdict(sign=1)
    certificate = fixed.groupby("model")["b_exact_ucb"].median().median()
    statistic = f"at M=K={M}: {fit.text('E/√V', 'width')}; median B_exact UCB {certificate:.2g}"
    if verdict == NOT_DETECTABLE:
        statistic += "; " + fit.slope.null_text("slope")
    ends = per_model(fixed, "r", None).groupby("width")["y"].mean()
    detail = (
        f"E/√V = mu_cross/√v_mk, the two-sample certificate's own variance, signed; "
        f"{int((fixed['mu_cross'] <= 0).sum())} of {len(fixed)} rows with E estimated ≤ 0 (no certificate, "
        f"r < 0), {int(fixed['r'].isna().sum())} without a ratio (V estimated ≤ 0, left out); "
        f"{fit.detail(W2_STRATA)} (equal weights); mean E/√V by width: "
        + ", ".join(f"{w:g}: {v:.3g}" for w, v in ends.items())
        + f"; median E/√V {fixed['r'].median():.3g}"
    )
    if M == K:
        detail += f"; {_described(fixed)}"
    return Result(verdict, statistic, detail, (("slope", fit.slope),))


def rule_w3(tables: Tables) -> Result:
    """Mean over models of t = E/SE (one value per model × point; M, K do not change E): confirmed above 0
    (misalignment then falls to 0 as M, K grow), refuted below 0 (it rises to 1)."""
    frame = alignment(tables)
    square = frame[frame["M"] == frame["K"]]
    if square.empty:
        raise NotMeasured("misalignment has no rows with M = K")
    points = square.drop_duplicates(model_keys() + ["point_index"])
    finite = points[np.isfinite(points["t"])]
    if finite.empty:
        raise NotMeasured("misalignment has no finite E/SE (mu_cross, mu_cross_se)")
    mean = across_models(per_model(finite.assign(one=1.0), "t", "one"))
    ends = square.groupby("M")["b_exact_ucb"].median()
    statistic = (
        f"E/SE = {mean.text()} (mean over {mean.counted}); median B_exact UCB {ends.iloc[0]:.2g} at M=K="
        f"{ends.index[0]:g} → {ends.iloc[-1]:.2g} at {ends.index[-1]:g}"
    )
    verdict = mean.verdict(sign=1)
    if verdict == NOT_DETECTABLE:
        statistic += "; " + mean.null_text("E/SE")
    detail = (
        f"{len(finite)} of {len(points)} model × point rows with a finite E/SE; per model the mean, across models "
        f"a t interval with {mean.df} df; {_described(square)}"
    )
    return Result(verdict, statistic, detail, (("E/SE", mean),))


W2 = Claim(
    "W2",
    "Misalignment falls with width at fixed (M, K); B_exact and B_align bound it, B_align conservatively.",
    "at the largest M = K with some misaligned draw, every row's E/√V(M, K), the signal-to-noise ratio of the "
    "two-sample certificate (its own variance V, signed: negative where E is estimated ≤ 0); "
    "per model the mean over points; across models a regression on log₂ width, one intercept per (dataset, "
    "family, depth), with a 95 % t interval: confirmed if the slope's interval is above 0, refuted if below, "
    "else not detectable with its limit and minimum detectable slope; the median B_exact UCB and P̂ are description",
    rule_w2,
    READS,
    figure="F5_misalignment",
)
W3 = Claim(
    "W3",
    "Larger M, K lower misalignment further.",
    "V(M, K) falls in M, K, so misalignment falls towards 0 iff E = μ_trᵀμ_te > 0 (rises towards 1 iff E < 0): "
    "E/SE per model × point, per model the mean, across models a 95 % t interval: confirmed above 0, refuted "
    "below, else not detectable with its limit and MDE; B_exact UCB at the smallest and largest M = K and P̂ "
    "are description",
    rule_w3,
    READS,
    figure="F5_misalignment",
)
