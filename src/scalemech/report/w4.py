"""W4: a zero-init residual step along −μ_M changes test loss with the predicted sign (held out).

At each series' smallest η, a row's held-out sign agreement is 0 or 1 (prediction from test pool A,
outcome on pool B). Points and views of one model share pools, so models are the units: per model the
share of agreeing rows, across models its mean with a 95 % t interval (``units``). The median held-out
ratio observed/predicted gets a percentile interval from a bootstrap over models (scipy.stats.bootstrap).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from ..core.tables import model_keys
from ..figures.aggregate import as_flag
from .common import CONFIRMED, LEVEL, NOT_CONFIRMED, NOT_DETECTABLE, REFUTED, Claim, NotMeasured, Result, Tables, table
from .misalignment import pool_sizes
from .units import across_models, per_model

P_NULL = 0.5  # sign agreement of a prediction that carries nothing (a coin flip)
W4_MIN_SIGN_AGREE = 0.95
W4_RATIO_RANGE = (0.9, 1.1)  # median held-out observed/predicted at the smallest η (paper: 0.96–0.99)
BOOTSTRAP_DRAWS, BOOTSTRAP_SEED = 999, 0


def _median_ratio(per_model_ratio: np.ndarray) -> tuple[float, float, float]:
    """Median over models of their median held-out ratio, with a percentile bootstrap interval over models."""
    median = float(np.median(per_model_ratio))
    if len(per_model_ratio) < 3:
        return median, np.nan, np.nan
    ci = stats.bootstrap(
        (per_model_ratio,),
        np.median,
        confidence_level=LEVEL,
        n_resamples=BOOTSTRAP_DRAWS,
        method="percentile",
        rng=np.random.default_rng(BOOTSTRAP_SEED),
    ).confidence_interval
    return median, float(ci.low), float(ci.high)


def _certificate(rows: pd.DataFrame, tables: Tables) -> float:
    """Mean B_exact UCB of the misalignment rows at the intervention's (point, view, M, K), M, K the pool
    sizes (NaN where none match)."""
    sizes, misalignment = pool_sizes(tables), tables.get("misalignment")
    if sizes is None or misalignment is None or "b_exact_ucb" not in misalignment:
        return np.nan
    keys = model_keys() + ["point_index", "view", "M", "K"]
    rows = rows.merge(sizes.rename(columns={"n_tr": "M", "n_te": "K"}), on=model_keys() + ["point_index"])
    bounds = misalignment.dropna(subset=["b_exact_ucb"]).groupby(keys, as_index=False)["b_exact_ucb"].first()
    return float(rows.merge(bounds, on=keys)["b_exact_ucb"].mean())


def rule_w4(tables: Tables) -> Result:
    """Refuted if agreement's interval is below 1/2 or disagreement's lower bound exceeds the B_exact UCB;
    not detectable if it contains 1/2; confirmed if agreement ≥ 95 % and the median ratio is in range."""
    frame = table(tables, "intervention", ["point_index", "view", "eta", "ratio_heldout", "sign_agree_heldout"])
    frame = frame[np.isfinite(frame["eta"].astype(float))]
    series = model_keys() + ["point_index", "view"]
    smallest = frame[frame["eta"] == frame.groupby(series)["eta"].transform("min")]
    rows = smallest.assign(agree=as_flag(smallest["sign_agree_heldout"]))
    rows = rows[rows["agree"].notna() & np.isfinite(rows["ratio_heldout"].astype(float))]
    if rows.empty:
        raise NotMeasured(f"intervention has no held-out measurement at the smallest η ({len(smallest)} rows)")
    agree = across_models(per_model(rows, "agree", None))
    ratio, ratio_lo, ratio_hi = _median_ratio(rows.groupby("model")["ratio_heldout"].median().to_numpy(float))
    bound = _certificate(rows, tables)
    statistic = (
        f"held-out sign agreement {agree.text()} over {agree.units} models; median observed/predicted "
        f"{ratio:.3g} [{ratio_lo:.3g}, {ratio_hi:.3g}]"
    )
    detail = f"{len(rows)} of {len(smallest)} rows at the smallest η; mean B_exact UCB at the pools {bound:.3g}"
    low, high = W4_RATIO_RANGE
    if agree.hi < P_NULL or 1 - agree.hi > bound:
        return Result(REFUTED, statistic, detail)
    if not agree.lo > P_NULL:
        return Result(NOT_DETECTABLE, statistic, detail)
    confirmed = agree.value >= W4_MIN_SIGN_AGREE and low <= ratio <= high
    return Result(CONFIRMED if confirmed else NOT_CONFIRMED, statistic, detail)


W4 = Claim(
    "W4",
    "A zero-init residual step along −μ_M changes test loss with the predicted sign and keeps 96–99 % "
    "of the predicted magnitude at small η.",
    f"held out (prediction from test pool A, loss change on pool B) at each series' smallest η; per model the "
    f"share of rows whose signs agree, across models its mean with a 95 % t interval: refuted if below "
    f"{P_NULL:g} or if the disagreement's lower bound exceeds the mean B_exact UCB at the pool sizes; not "
    f"detectable if it contains {P_NULL:g}; confirmed if agreement ≥ {W4_MIN_SIGN_AGREE:.0%} and the median over "
    f"models of the held-out ratio is in [{W4_RATIO_RANGE[0]}, {W4_RATIO_RANGE[1]}] (bootstrap over models)",
    rule_w4,
)
