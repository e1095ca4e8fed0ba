"""Architectures are the independent units, seeds nested in them: rows (insertion points, views, steps) of one
model are summarised first, the seeds of one architecture next, then architectures are compared (a two-stage
random-effects meta-regression).

Stage 1, per model (× ``by``): ``y_m`` = mean of the rows' values, ``s_m`` = mean of their standard
errors (exact when the rows are perfectly correlated, conservative otherwise).
Seeds nested (``nested``): the models of one architecture (every key but ``seed`` and ``model``: dataset,
family, depth, width) differ only in their training randomness, and two seeds of one architecture are not
independent evidence about a trend across architectures (an offset of the architecture, unrelated to depth
or width, is shared by its seeds), so each architecture enters once: ``y`` the mean of its seeds' ``y_m``,
``s = √(mean s_m² / n)``; the seeds' spread is part of the residual scatter the interval rests on.
Stage 2, across architectures (called models below: with one seed they are the models): weighted least
squares of ``y_m`` on ``log₂ x`` with one intercept per stratum,
weights ``w_m = 1/(s_m² + τ²)``. The between-model variance τ² is Paule–Mandel's: the τ² ≥ 0 at which the
weighted residuals' ``Q(τ²) = Σ w_m (y_m − ŷ_m)²`` equals its expectation, the residual degrees of
freedom (0 where ``Q(0)`` is already below them). Unlike ``max(0, σ̂²_OLS − mean s_m²)`` it does not
collapse to 0 when the ``s_m`` span decades: models with small SEs that scatter beyond them raise it.
The weights' Kish effective number of models ``G_eff = (Σ w)²/Σ w²`` is stated with every estimate;
below ``KISH_FLOOR``·G (half the models) the weights would let a few models carry the estimate, and the
models are weighed equally instead (ordinary least squares: the interval stays valid, since its scale
is estimated from the residuals). The scale is re-estimated from the residuals (Knapp–Hartung), so the
slope's interval is a t interval with G − (strata) − 1 degrees of freedom: valid even where ``s_m``
misstates the noise.
No row is dropped for its significance; a row without a finite value or SE is counted and left out.
A null states the limit of its interval in the claim's direction (rounded outward) and the minimum
detectable effect of the verdict at the run's number of models, ``(t_{1−α/2, df} + t_{π, df})·SE``
(``Estimate.mde``) with π the power each of the claim's ``parts`` needs so that all are decided and the
reseed check (``seeds``, level ``RESEED_LEVEL``) passes with probability ``POWER``:
``π = (POWER/(1 − RESEED_LEVEL))^(1/parts)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import statsmodels.api as sm
from scipy import optimize, stats

from ..core.tables import first_rows, group_codes, model_keys
from .common import CONFIRMED, LEVEL, NOT_DETECTABLE, POWER, REFUTED, RESEED_LEVEL, outward

MIN_DF = 2  # residual degrees of freedom an interval needs (t with 1 df spans ±12.7 SE)
SEED_KEYS = ("seed", "model")  # the model keys that tell the seeds of one architecture apart
KISH_FLOOR = 0.5  # least Kish effective share of the models the weights may leave; below it, equal weights


def mde_factor(df: int, parts: int = 1, level: float = LEVEL) -> float:
    """``t_{1−α/2, df} + t_{π, df}``, π = ``(POWER/(1 − RESEED_LEVEL))^(1/parts)``: the verdict's minimum
    detectable effect in SEs of an estimate with ``df`` degrees of freedom, one of ``parts`` that must all
    be decided (the module doc)."""
    power = (POWER / (1 - RESEED_LEVEL)) ** (1 / parts)
    return float(stats.t.ppf(1 - (1 - level) / 2, df) + stats.t.ppf(power, df))


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
    effective: float = np.nan  # Kish effective number of models of the weights (NaN: not a weighted fit)
    models: int = 0  # models behind the units (seeds nested in architectures); 0: the units themselves

    @property
    def kind(self) -> str:
        """What the units are: ``architectures`` where seeds are nested in them, else ``models``."""
        return "architectures" if self.models > self.units else "models"

    @property
    def counted(self) -> str:
        """``N models``, or ``N architectures (M models)`` where seeds are nested."""
        return (
            f"{self.units} architectures ({self.models} models)"
            if self.kind == "architectures"
            else f"{self.units} models"
        )

    @property
    def standard_error(self) -> float:
        if np.isfinite(self.se):
            return float(self.se)
        if self.df < 1 or not np.isfinite(self.hi - self.lo):
            return np.nan
        return float((self.hi - self.lo) / (2 * stats.t.ppf(1 - (1 - self.level) / 2, self.df)))

    @property
    def measured(self) -> bool:
        """Whether the estimate has an interval (enough models: df ≥ ``MIN_DF``) and a finite SE."""
        return bool(np.isfinite(self.lo) and np.isfinite(self.hi) and np.isfinite(self.standard_error))

    def mde(self, parts: int = 1) -> float:
        """Minimum detectable effect of the verdict, ``mde_factor(df, parts, level)·SE`` (module doc)."""
        if self.df < 1:
            return np.nan
        return mde_factor(self.df, parts, self.level) * self.standard_error

    def null_text(self, name: str, sign: int = 1, null: float = 0.0, digits: int = 2, parts: int = 1) -> str:
        """What a null bounds: the interval's limit in the claim's direction (``sign``, rounded outward)
        and the verdict's MDE at ``POWER`` (from ``null``; ``parts`` as in ``mde``) at this many units."""
        if not np.isfinite(self.lo):
            return f"{name}: no interval ({self.counted}, df {self.df})"
        limit, op = (outward(self.hi, digits, up=True), "≤") if sign > 0 else (outward(self.lo, digits, up=False), "≥")
        origin = f" from {null:.3g}" if null else ""
        return (
            f"{name} {op} {limit}; MDE {self.mde(parts):.{digits}g}{origin} at {self.units} {self.kind}, {self.df} df"
        )

    def weights_text(self) -> str:
        """The Kish effective number of models behind a weighted estimate ('' when not weighted)."""
        if not np.isfinite(self.effective):
            return ""
        floor = " (below half: equal weights)" if self.effective < KISH_FLOOR * self.units - 1e-9 else ""
        return f"{self.effective:.3g} of {self.units} {self.kind} effective (Kish){floor}"

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
        lo, hi = outward(self.lo, digits, up=False), outward(self.hi, digits, up=True)
        return f"{self.value:.{digits}g} [{lo}, {hi}]"


def per_model(
    rows: pd.DataFrame,
    value: str,
    se: str | None,
    by: Sequence[str] = (),
    scale_cells: Sequence[str] = (),
    scale_by_se: bool = False,
) -> pd.DataFrame:
    """Stage 1: one row per model (× ``by``), columns model keys, ``by``, ``y``, ``s`` (NaN without ``se``).
    ``scale_cells``: first divide value and SE by the root mean square of the values within each cell
    (so strata or steps whose magnitudes differ by decades weigh alike); ``scale_by_se``: by the RMS of the
    SEs instead (signed gains: the values' RMS would carry the effect itself, so a subset of the models, a
    seed alone, would be put on another scale than the whole)."""
    y = rows[value].astype(float).to_numpy()
    s = rows[se].astype(float).to_numpy() if se else np.full(len(rows), np.nan)
    if scale_cells:
        basis = pd.Series(s if scale_by_se else y) ** 2
        rms = np.sqrt(basis.groupby([rows[c].to_numpy() for c in scale_cells]).transform("mean"))
        rms = rms.where(rms > 0, 1.0)
        y, s = (y / rms).to_numpy(), (s / rms).to_numpy()
    keys = model_keys() + list(by)
    codes = group_codes(rows, keys)
    kept = codes >= 0
    means = pd.DataFrame({"y": y[kept], "s": s[kept]}).groupby(codes[kept]).mean()
    firsts = first_rows(codes)
    return pd.DataFrame({key: rows[key].array[firsts] for key in keys} | {c: means[c].to_numpy() for c in means})


def _q(tau2: float, y: np.ndarray, s2: np.ndarray, design: np.ndarray) -> float:
    """Generalized Cochran's ``Q(τ²) = Σ w (y − ŷ_WLS)²``, ``w = 1/(s² + τ²)``."""
    w = 1.0 / (s2 + tau2)
    root = np.sqrt(w)
    beta = np.linalg.lstsq(design * root[:, None], y * root, rcond=None)[0]
    return float(np.sum(w * (y - design @ beta) ** 2))


def paule_mandel(y: np.ndarray, s: np.ndarray, design: np.ndarray) -> float:
    """Paule–Mandel τ²: the root of ``Q(τ²) = n − rank(design)`` (0 where ``Q(0)`` is below it). ``Q`` falls
    in τ², and at the OLS residual variance σ̂² it is at most ``n − rank`` (weights ≤ 1/σ̂²), which brackets it."""
    df = len(y) - np.linalg.matrix_rank(design)
    s2 = s**2 + _se_floor(y, s)  # a zero SE would give one model infinite weight
    if _q(0.0, y, s2, design) <= df:
        return 0.0
    residuals = y - design @ np.linalg.lstsq(design, y, rcond=None)[0]
    upper = float(residuals @ residuals) / df
    return float(optimize.brentq(lambda tau2: _q(tau2, y, s2, design) - df, 0.0, upper, xtol=1e-12 * upper))


def _se_floor(y: np.ndarray, s: np.ndarray) -> float:
    """A variance far below every model's spread, ``1e-12 · max(var y, mean s²)``, added to each ``s²``."""
    return 1e-12 * max(float(np.var(y)), float(np.mean(s**2)))


def kish(weights: np.ndarray) -> float:
    """Kish's effective number of units of ``weights``: ``(Σ w)²/Σ w²``."""
    return float(weights.sum() ** 2 / (weights**2).sum())


def _weights(y: np.ndarray, s: np.ndarray, design: np.ndarray) -> tuple[np.ndarray, float]:
    """``1/(s² + τ²)`` with Paule–Mandel's τ² and their Kish effective number of models; equal weights
    (effective: NaN) without SEs, and equal weights (effective: their Kish number) below ``KISH_FLOOR``."""
    if not np.isfinite(s).all():
        return np.ones_like(y), np.nan
    if _se_floor(y, s) == 0:  # every model the same value without any spread (a control left unchanged)
        return np.ones_like(y), float(len(y))
    weights = 1.0 / (s**2 + paule_mandel(y, s, design) + _se_floor(y, s))
    effective = kish(weights)
    if effective < KISH_FLOOR * len(y):
        return np.ones_like(y), effective
    return weights, effective


def nested(units: pd.DataFrame) -> pd.DataFrame:
    """Seeds nested in architectures (module doc): one row per value of every column but ``y``, ``s`` and
    ``SEED_KEYS``, ``y`` the mean of its rows' ``y``, ``s = √(mean s² / n)`` (NaN without SEs)."""
    keys = [c for c in units.columns if c not in ("y", "s", *SEED_KEYS)]
    if not keys:
        return units
    grouped = units.assign(s2=units["s"] ** 2).groupby(keys, sort=False, dropna=False)
    out = grouped.agg(y=("y", "mean"), s2=("s2", "mean"), n=("y", "size")).reset_index()
    return out.assign(s=np.sqrt(out["s2"] / out["n"])).drop(columns=["s2", "n"])


def across_models(
    units: pd.DataFrame, x: str | None = None, strata: Sequence[str] = (), level: float = LEVEL, nest: bool = True
) -> Estimate:
    """Stage 2: the common within-stratum slope of ``y`` on log₂ ``x``, one intercept per stratum (strata
    with fewer than 2 distinct ``x`` left out); ``x`` None: the mean of ``y`` (``strata`` ignored); a
    two-sided ``level`` t interval; ``nest``: over architectures, the seeds of each nested (``nested``),
    else over the rows of ``units`` as they are."""
    units = units[np.isfinite(units["y"])]
    models = len(units)
    if nest:
        units = nested(units)
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
        return Estimate(value, np.nan, np.nan, len(units), df, level=level, models=models)
    weights, effective = _weights(y, s, design)
    fit = sm.WLS(y, design, weights=weights).fit()
    lo, hi = fit.conf_int(alpha=1 - level)[-1]
    se = float(fit.bse[-1])
    return Estimate(float(fit.params[-1]), float(lo), float(hi), len(units), df, se, level, effective, models)
