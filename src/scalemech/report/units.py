"""Models are the independent units: rows (insertion points, views, steps) of one model are summarised
first, then compared across models (a two-stage random-effects meta-regression).

Stage 1, per model (× ``by``): ``y_m`` = mean of the rows' values, ``s_m`` = mean of their standard
errors (exact when the rows are perfectly correlated, conservative otherwise).
Stage 2, across models: weighted least squares of ``y_m`` on ``log₂ x`` with one intercept per stratum,
weights ``1/(s_m² + τ²)`` where ``τ² = max(0, σ̂²_OLS − mean s_m²)`` is the between-model variance; the
scale is re-estimated from the residuals (Knapp–Hartung), so the slope's interval is a t interval
with G − (strata) − 1 degrees of freedom (G models): valid even where ``s_m`` misstates the noise.
No row is dropped for its significance; a row without a finite value or SE is counted and left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import statsmodels.api as sm

from ..core.tables import model_keys
from .common import CONFIRMED, LEVEL, NOT_DETECTABLE, REFUTED

MIN_DF = 2  # residual degrees of freedom an interval needs (t with 1 df spans ±12.7 SE)


@dataclass(frozen=True)
class Estimate:
    """A slope or a mean across models with its ``LEVEL`` t interval (NaN when too few units)."""

    value: float
    lo: float
    hi: float
    units: int  # models (× by) that entered
    df: int

    def verdict(self, sign: int = 1, null: float = 0.0) -> str:
        """CONFIRMED when the interval lies beyond ``null`` on the side of ``sign``, REFUTED when on the other."""
        if sign * (self.lo - null) > 0 and sign * (self.hi - null) > 0:
            return CONFIRMED
        if sign * (self.lo - null) < 0 and sign * (self.hi - null) < 0:
            return REFUTED
        return NOT_DETECTABLE

    def text(self, digits: int = 3) -> str:
        if not np.isfinite(self.lo):
            return f"{self.value:.{digits}g} (no interval: {self.units} units, df {self.df} < {MIN_DF})"
        return f"{self.value:.{digits}g} [{self.lo:.{digits}g}, {self.hi:.{digits}g}]"


def per_model(
    rows: pd.DataFrame, value: str, se: str | None, by: Sequence[str] = (), scale_cells: Sequence[str] = ()
) -> pd.DataFrame:
    """Stage 1: one row per model (× ``by``), columns model keys, ``by``, ``y``, ``s`` (NaN without ``se``).
    ``scale_cells``: first divide value and SE by the root mean square of the values within each cell
    (so strata or steps whose magnitudes differ by decades weigh alike)."""
    frame = rows.assign(y=rows[value].astype(float), s=rows[se].astype(float) if se else np.nan)
    if scale_cells:
        rms = frame.groupby(list(scale_cells))["y"].transform(lambda v: np.sqrt(np.nanmean(v**2)))
        rms = rms.where(rms > 0, 1.0)
        frame = frame.assign(y=frame["y"] / rms, s=frame["s"] / rms)
    return frame.groupby(model_keys() + list(by), as_index=False)[["y", "s"]].mean()


def _weights(y: np.ndarray, s: np.ndarray, design: np.ndarray) -> np.ndarray:
    """``1/(s² + τ²)``, τ² from the OLS residual variance minus the mean sampling variance; equal without SEs."""
    if not np.isfinite(s).all():
        return np.ones_like(y)
    tau2 = max(0.0, sm.OLS(y, design).fit().scale - float(np.mean(s**2)))
    floor = 1e-12 * max(float(np.var(y)), 1e-300)
    return 1.0 / (s**2 + tau2 + floor)


def across_models(units: pd.DataFrame, x: str | None = None, strata: Sequence[str] = ()) -> Estimate:
    """Stage 2: the common within-stratum slope of ``y`` on log₂ ``x``, one intercept per stratum (strata
    with fewer than 2 distinct ``x`` left out); ``x`` None: the mean of ``y`` (``strata`` ignored)."""
    units = units[np.isfinite(units["y"])]
    if x is None:
        design = np.ones((len(units), 1))
    else:
        if strata:
            units = units[units.groupby(list(strata))[x].transform("nunique") >= 2]
        labels = units[list(strata)].astype(str).agg("/".join, axis=1) if strata else pd.Series("", units.index)
        intercepts = pd.get_dummies(labels, dtype=float).to_numpy()
        design = np.column_stack([intercepts, np.log2(units[x].to_numpy(float))])
    df = len(units) - design.shape[1]
    y, s = units["y"].to_numpy(float), units["s"].to_numpy(float)
    if len(units) == 0:
        return Estimate(np.nan, np.nan, np.nan, 0, df)
    if df < MIN_DF:
        value = float(np.mean(y)) if x is None else np.nan
        return Estimate(value, np.nan, np.nan, len(units), df)
    fit = sm.WLS(y, design, weights=_weights(y, s, design)).fit()
    lo, hi = fit.conf_int(alpha=1 - LEVEL)[-1]
    return Estimate(float(fit.params[-1]), float(lo), float(hi), len(units), df)
