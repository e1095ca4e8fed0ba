"""W2 and W3: misalignment judged in the population, on E = μ_trᵀμ_te and its two-sample SE.

For draws of M train and K test examples, ``μ_Mᵀg_K`` has mean E and a variance ``V(M, K)`` that falls
in M and K; to first order ``V(M, K) ≈ SE²·(1/M + 1/K)/(1/n_tr + 1/n_te)`` where SE (``mu_cross_se``)
is E's standard error from pools of n_tr, n_te examples. So the alignment signal-to-noise at (M, K) is
``z_MK = (E/SE)·c``, ``c = √((1/n_tr + 1/n_te)/(1/M + 1/K))``, with SE ``c`` (E's own uncertainty);
misalignment (≈ Φ(−z_MK), and its Cantelli bound) falls with width exactly when z_MK rises.
P̂ (share of misaligned draws from the two pools) and its Wilson interval cover only the draws, not
the pools: they are description here, never evidence.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..core.tables import model_keys
from ..figures.aggregate import default_mk
from .common import CONFIRMED, NOT_CONFIRMED, Claim, NotMeasured, Result, Tables, only, table
from .trend import trend
from .units import across_models, per_model

W2_VIEW = "full"
W2_STRATA = ["dataset", "family", "depth"]
VACUOUS = 0.5  # a certificate B ≥ this says nothing a coin flip would not
COLUMNS = ["point_index", "view", "M", "K", "p_misalign", "mu_cross", "mu_cross_se", "b_exact_ucb"]


def pool_sizes(tables: Tables) -> pd.DataFrame | None:
    """Per model × point: n_tr and n_te, the train and test pool sizes (signal table's ``n`` per split)."""
    signal = tables.get("signal")
    if signal is None or signal.empty or not {"split", "n", "point_index"} <= set(signal.columns):
        return None
    sizes = signal.pivot_table(index=model_keys() + ["point_index"], columns="split", values="n", aggfunc="first")
    if not {"train", "test"} <= set(sizes.columns):
        return None
    return sizes[["train", "test"]].set_axis(["n_tr", "n_te"], axis=1).reset_index().dropna()


def alignment(tables: Tables) -> pd.DataFrame:
    """The misalignment rows (view ``W2_VIEW``) with ``t = E/SE`` and ``z_MK``, ``z_MK_se`` (module doc;
    c = 1 where the pool sizes are unknown, i.e. pools taken as M, K)."""
    frame = only(table(tables, "misalignment", COLUMNS), "view", W2_VIEW, "misalignment")
    sizes = pool_sizes(tables)
    if sizes is not None:
        frame = frame.merge(sizes, on=model_keys() + ["point_index"], how="left")
    n_tr, n_te = (frame[c] if c in frame else frame[m] for c, m in (("n_tr", "M"), ("n_te", "K")))
    c = np.sqrt((1 / n_tr.fillna(frame["M"]) + 1 / n_te.fillna(frame["K"])) / (1 / frame["M"] + 1 / frame["K"]))
    t = frame["mu_cross"] / frame["mu_cross_se"]
    return frame.assign(t=t, z_mk=t * c, z_mk_se=c)


def _described(rows: pd.DataFrame) -> str:
    below = (rows["p_misalign"] <= rows["b_exact_ucb"]).sum()
    return f"P̂ ≤ B_exact UCB in {below} of {rows['b_exact_ucb'].notna().sum()} rows with one (description only)"


def rule_w2(tables: Tables) -> Result:
    """At the default (M, K): slope of z_MK on log₂ width across models (confirmed above 0: misalignment
    falls); not confirmed if the B_exact UCBs there are vacuous (median ≥ VACUOUS)."""
    frame = alignment(tables)
    M, K = default_mk(frame)
    fixed = frame[(frame["M"] == M) & (frame["K"] == K)]
    if fixed.groupby(W2_STRATA)["width"].nunique().max() < 3:
        raise NotMeasured(f"misalignment has no (dataset, family, depth) with ≥ 3 widths at M={M}, K={K}")
    fit = trend(fixed, "z_mk", "z_mk_se", "width", W2_STRATA)
    verdict = fit.slope.verdict(sign=1)
    certificate = fixed.groupby("model")["b_exact_ucb"].median().median()
    statistic = f"at M=K={M}: {fit.text('z_MK = E/√V(M,K)', 'width')}; median B_exact UCB {certificate:.2g}"
    if verdict == CONFIRMED and not certificate < VACUOUS:
        verdict = NOT_CONFIRMED
    detail = f"{fit.detail(W2_STRATA)}; {_described(fixed)}" if M == K else fit.detail(W2_STRATA)
    return Result(verdict, statistic, detail)


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
        f"E/SE = {mean.text()} (mean over {mean.units} models); median B_exact UCB {ends.iloc[0]:.2g} at M=K="
        f"{ends.index[0]:g} → {ends.iloc[-1]:.2g} at {ends.index[-1]:g}"
    )
    detail = (
        f"{len(finite)} of {len(points)} model × point rows with a finite E/SE; per model the mean, across models "
        f"a t interval with {mean.df} df; {_described(square)}"
    )
    return Result(mean.verdict(sign=1), statistic, detail)


W2 = Claim(
    "W2",
    "Misalignment falls with width at fixed (M, K); B_exact and B_align bound it, B_align conservatively.",
    "at the largest M = K with some misaligned draw, every row's z_MK = (E/SE)·√((1/n_tr+1/n_te)/(1/M+1/K)) "
    "(E = μ_trᵀμ_te, SE its two-sample SE); per model the mean over points; across models a weighted regression "
    "on log₂ width, one intercept per (dataset, family, depth): confirmed if the slope's 95 % t interval is above "
    f"0 and the median B_exact UCB < {VACUOUS:g} (else not confirmed), refuted if below 0; P̂ is description",
    rule_w2,
)
W3 = Claim(
    "W3",
    "Larger M, K lower misalignment further.",
    "V(M, K) falls in M, K, so misalignment falls towards 0 iff E = μ_trᵀμ_te > 0 (rises towards 1 iff E < 0): "
    "E/SE per model × point, per model the mean, across models a 95 % t interval: confirmed above 0, refuted "
    "below; B_exact UCB at the smallest and largest M = K and P̂ are description",
    rule_w3,
)
