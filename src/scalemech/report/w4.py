"""W4: a zero-init residual step along −μ_M changes test loss with the predicted sign (held out) and
keeps 96–99 % of the predicted magnitude at small η.

At each series' smallest η, a row's held-out sign agreement is 0 or 1 (prediction from test pool A,
outcome on pool B). Points and views of one model share pools, so models are the units: per model the
share of agreeing rows, across models its mean with a 95 % t interval (``units``). The median held-out
ratio observed/predicted gets a percentile interval from a bootstrap over models (scipy.stats.bootstrap).
Each part is decided by its interval against its band: inside the band, confirmed; outside it,
refuted; overlapping its edge, not detectable. The misalignment certificate at the largest M = K the
grid has is stated as description (the grid stops below the pool sizes the intervention uses).
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from ..core.tables import model_keys
from ..figures.aggregate import as_flag
from .common import (
    CONFIRMED,
    LEVEL,
    NOT_DETECTABLE,
    REFUTED,
    Claim,
    NotMeasured,
    Result,
    Tables,
    combined,
    table,
)
from .units import across_models, per_model

W4_SIGN_BAND = (0.95, 1.0)  # held-out sign agreement: "with the predicted sign" (≥ 95 %, our choice)
W4_RATIO_BAND = (0.96, 0.99)  # median held-out observed/predicted at the smallest η (Paper W: 96–99 %)
BOOTSTRAP_DRAWS, BOOTSTRAP_SEED = 999, 0
PAPER_BAND = f"{100 * W4_RATIO_BAND[0]:.0f}–{100 * W4_RATIO_BAND[1]:.0f} %"
READS = {"intervention": ["point_index", "view", "eta", "ratio_heldout", "sign_agree_heldout"]}


def _median_ratio(per_model_ratio: np.ndarray) -> tuple[float, float, float]:
    """Median over models of their median held-out ratio, with a percentile bootstrap interval over models."""
    median = float(np.median(per_model_ratio))
    if len(per_model_ratio) < 3:
        return median, np.nan, np.nan
    if np.ptp(per_model_ratio) == 0:
        return median, median, median
    ci = stats.bootstrap(
        (per_model_ratio,),
        np.median,
        confidence_level=LEVEL,
        n_resamples=BOOTSTRAP_DRAWS,
        method="percentile",
        rng=np.random.default_rng(BOOTSTRAP_SEED),
    ).confidence_interval
    return median, float(ci.low), float(ci.high)


def in_band(lo: float, hi: float, band: tuple[float, float]) -> str:
    """CONFIRMED when [lo, hi] lies inside ``band``, REFUTED when it lies outside, else NOT_DETECTABLE."""
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return NOT_DETECTABLE
    if band[0] <= lo and hi <= band[1]:
        return CONFIRMED
    if hi < band[0] or lo > band[1]:
        return REFUTED
    return NOT_DETECTABLE


def _band_text(name: str, verdict: str, band: tuple[float, float], lo: float, hi: float) -> str:
    """Why a part is not detectable: which edge its interval crosses, and the width the band allows."""
    if verdict != NOT_DETECTABLE:
        return f"{name} {verdict}"
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return f"{name} not detectable (no interval: fewer than 3 models)"
    return (
        f"{name} not detectable (interval width {hi - lo:.2g} against the band's {band[1] - band[0]:.2g}; "
        f"it reaches {lo:.3g} below {band[0]:g})"
        if lo < band[0]
        else f"{name} not detectable (interval reaches {hi:.3g} above {band[1]:g})"
    )


def _certificate(tables: Tables) -> str:
    """The median B_exact UCB at the largest M = K of the misalignment grid (description)."""
    misalignment = tables.get("misalignment")
    if misalignment is None or not {"M", "K", "b_exact_ucb"} <= set(misalignment.columns):
        return "no misalignment table"
    square = misalignment[misalignment["M"] == misalignment["K"]]
    if square.empty:
        return "no misalignment rows with M = K"
    largest = square[square["M"] == square["M"].max()]
    return (
        f"median B_exact UCB {largest['b_exact_ucb'].median():.2g} at the grid's largest M = K = {largest['M'].max():g}"
    )


def rule_w4(tables: Tables) -> Result:
    """Sign agreement's t interval against W4_SIGN_BAND and the median ratio's bootstrap interval against
    W4_RATIO_BAND: confirmed when both lie inside, refuted when either lies outside."""
    frame = table(tables, "intervention", READS["intervention"])
    frame = frame[np.isfinite(frame["eta"].astype(float))]
    series = model_keys() + ["point_index", "view"]
    smallest = frame[frame["eta"] == frame.groupby(series)["eta"].transform("min")]
    rows = smallest.assign(agree=as_flag(smallest["sign_agree_heldout"]))
    rows = rows[rows["agree"].notna() & np.isfinite(rows["ratio_heldout"].astype(float))]
    if rows.empty:
        raise NotMeasured(f"intervention has no held-out measurement at the smallest η ({len(smallest)} rows)")
    agree = across_models(per_model(rows, "agree", None))
    ratio, ratio_lo, ratio_hi = _median_ratio(rows.groupby("model")["ratio_heldout"].median().to_numpy(float))
    sign = in_band(agree.lo, min(agree.hi, 1.0), W4_SIGN_BAND)  # a share cannot pass 1
    magnitude = in_band(ratio_lo, ratio_hi, W4_RATIO_BAND)
    statistic = (
        f"held-out sign agreement {agree.text()} over {agree.units} models; median observed/predicted "
        f"{ratio:.3g} [{ratio_lo:.3g}, {ratio_hi:.3g}] (paper: {PAPER_BAND})"
    )
    parts = [
        _band_text("sign", sign, W4_SIGN_BAND, agree.lo, agree.hi),
        _band_text("ratio", magnitude, W4_RATIO_BAND, ratio_lo, ratio_hi),
    ]
    detail = (
        f"{len(rows)} of {len(smallest)} rows at the smallest η over {agree.units} models; sign agreement: per model "
        f"the share, a t interval with {agree.df} df against [{W4_SIGN_BAND[0]:g}, {W4_SIGN_BAND[1]:g}]; ratio: "
        f"per model the median, the median over models with a {100 * LEVEL:.0f} % percentile bootstrap interval "
        f"({BOOTSTRAP_DRAWS} draws) against [{W4_RATIO_BAND[0]:g}, {W4_RATIO_BAND[1]:g}]; "
        + "; ".join(parts)
        + f"; {_certificate(tables)} (description)"
    )
    return Result(combined(sign, magnitude), statistic, detail)


W4 = Claim(
    "W4",
    "A zero-init residual step along −μ_M changes test loss with the predicted sign and keeps 96–99 % "
    "of the predicted magnitude at small η.",
    f"held out (prediction from test pool A, loss change on pool B) at each series' smallest η; per model the "
    f"share of rows whose signs agree, across models its mean with a 95 % t interval; per model the median "
    f"held-out ratio observed/predicted, across models the median with a 95 % bootstrap interval; each part "
    f"confirmed if its interval lies inside its band (agreement [{W4_SIGN_BAND[0]:g}, {W4_SIGN_BAND[1]:g}], ratio "
    f"[{W4_RATIO_BAND[0]:g}, {W4_RATIO_BAND[1]:g}], the paper's), refuted if it lies outside, else not detectable; "
    f"confirmed if both are, refuted if either is (not confirmed if one is confirmed and the other refuted)",
    rule_w4,
    READS,
)
