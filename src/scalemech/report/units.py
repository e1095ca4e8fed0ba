"""Models are the independent units: rows (insertion points, views, steps) of one model are summarised
first, then compared across models (a two-stage random-effects meta-regression).

Stage 1, per model (× ``by``): ``y_m`` = mean of the rows' values, ``s_m`` = mean of their standard
errors (exact when the rows are perfectly correlated, conservative otherwise).
Stage 2, across models: weighted least squares of ``y_m`` on ``log₂ x`` with one intercept per stratum,
weights ``1/(s_m² + τ²)`` where ``τ² = max(0, σ̂²_OLS − mean s_m²)`` is the between-model variance; the
scale is re-estimated from the residuals (Knapp–Hartung), so the slope's interval is a t interval
with G − (strata) − 1 degrees of freedom (G models): valid even where ``s_m`` misstates the noise.
No row is dropped for its significance; a row without a finite value or SE is counted and left out.
A null states the limit of its interval in the claim's direction and the minimum detectable effect of
the t test at the run's number of models, ``(t_{1−α/2, df} + t_{power, df})·SE`` (``Estimate.null_text``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import statsmodels.api as sm
from scipy import stats

from ..core.tables import first_rows, group_codes, model_keys
from .common import CONFIRMED, LEVEL, NOT_DETECTABLE, POWER, REFUTED

MIN_DF = 2  # residual degrees of freedom an interval needs (t with 1 df spans ±12.7 SE)


@dataclass(frozen=True)
class Estimate:
    """A slope or a mean across models with its ``LEVEL`` t interval (NaN when too few units)."""

    value: float
    lo: float
    hi: float
    units: int  # models (× by) that entered
    df: int
    se: float = np.nan  # NaN: taken from the interval's half width
    level: float = LEVEL  # two-sided level of [lo, hi]

    @property
    def standard_error(self) -> float:
        if np.isfinite(self.se):
            return float(self.se)
        if self.df < 1 or not np.isfinite(self.hi - self.lo):
            return np.nan
        return float((self.hi - self.lo) / (2 * stats.t.ppf(1 - (1 - self.level) / 2, self.df)))

    def mde(self) -> float:
        """Minimum detectable effect of the two-sided ``level`` t test at ``POWER``:
        ``(t_{1−α/2, df} + t_{power, df})·SE``."""
        if self.df < 1:
            return np.nan
        quantile = stats.t.ppf(1 - (1 - self.level) / 2, self.df)
        return float((quantile + stats.t.ppf(POWER, self.df)) * self.standard_error)

    def null_text(self, name: str, sign: int = 1, null: float = 0.0, digits: int = 2) -> str:
        """What a null bounds: the interval's limit in the claim's direction (``sign``) and the MDE
        (from ``null``) at this many models."""
        if not np.isfinite(self.lo):
            return f"{name}: no interval ({self.units} models, df {self.df})"
        limit, op = (self.hi, "≤") if sign > 0 else (self.lo, "≥")
        origin = f" from {null:g}" if null else ""
        return (
            f"{name} {op} {limit:.{digits}g} ({100 * self.level:.3g} % limit); MDE {self.mde():.{digits}g}{origin} at "
            f"{self.units} models ({self.df} df, {100 * POWER:.0f} % power)"
        )

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
    y = rows[value].astype(float).to_numpy()
    s = rows[se].astype(float).to_numpy() if se else np.full(len(rows), np.nan)
    if scale_cells:
        rms = np.sqrt((pd.Series(y) ** 2).groupby([rows[c].to_numpy() for c in scale_cells]).transform("mean"))
        rms = rms.where(rms > 0, 1.0)
        y, s = (y / rms).to_numpy(), (s / rms).to_numpy()
    keys = model_keys() + list(by)
    codes = group_codes(rows, keys)
    kept = codes >= 0
    means = pd.DataFrame({"y": y[kept], "s": s[kept]}).groupby(codes[kept]).mean()
    firsts = first_rows(codes)
    return pd.DataFrame({key: rows[key].array[firsts] for key in keys} | {c: means[c].to_numpy() for c in means})


def _weights(y: np.ndarray, s: np.ndarray, design: np.ndarray) -> np.ndarray:
    """``1/(s² + τ²)``, τ² from the OLS residual variance minus the mean sampling variance; equal without SEs."""
    if not np.isfinite(s).all():
        return np.ones_like(y)
    residuals = y - design @ np.linalg.lstsq(design, y, rcond=None)[0]
    ols_scale = float(residuals @ residuals) / (len(y) - np.linalg.matrix_rank(design))  # σ̂² of OLS
    tau2 = max(0.0, ols_scale - float(np.mean(s**2)))
    floor = 1e-12 * max(float(np.var(y)), 1e-300)
    return 1.0 / (s**2 + tau2 + floor)


def across_models(
    units: pd.DataFrame, x: str | None = None, strata: Sequence[str] = (), level: float = LEVEL
) -> Estimate:
    """Stage 2: the common within-stratum slope of ``y`` on log₂ ``x``, one intercept per stratum (strata
    with fewer than 2 distinct ``x`` left out); ``x`` None: the mean of ``y`` (``strata`` ignored); a
    two-sided ``level`` t interval."""
    units = units[np.isfinite(units["y"])]
    if x is None:
        design = np.ones((len(units), 1))
    else:
        if strata:
            units = units[units.groupby(list(strata))[x].transform("nunique") >= 2]
            codes = units.groupby(list(strata)).ngroup().to_numpy() if len(units) else np.zeros(0, int)
        else:
            codes = np.zeros(len(units), int)
        intercepts = np.eye(codes.max() + 1 if len(codes) else 1)[codes]
        design = np.column_stack([intercepts, np.log2(units[x].to_numpy(float))])
    df = len(units) - design.shape[1]
    y, s = units["y"].to_numpy(float), units["s"].to_numpy(float)
    if len(units) == 0:
        return Estimate(np.nan, np.nan, np.nan, 0, df, level=level)
    if df < MIN_DF:
        value = float(np.mean(y)) if x is None else np.nan
        return Estimate(value, np.nan, np.nan, len(units), df, level=level)
    fit = sm.WLS(y, design, weights=_weights(y, s, design)).fit()
    lo, hi = fit.conf_int(alpha=1 - level)[-1]
    return Estimate(float(fit.params[-1]), float(lo), float(hi), len(units), df, float(fit.bse[-1]), level)
