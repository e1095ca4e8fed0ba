"""Paper D's power law of test loss in depth and width (D4), fitted over a trained grid.

    L(D, W) = a·(D/D₀)^(−α) + b·(W/W₀)^(−β) + c

with D₀, W₀ the grid's smallest depth and width (the exponents do not depend on them; a and b are the
excess losses there). Least squares over every model (seeds are replicates) with
``scipy.optimize.curve_fit`` (trust-region reflective, a, b ≥ 0, α, β ∈ [−2, 4], the best of a few
starting exponents), the analytic Jacobian J, and parameter intervals ``θ̂ ± t_{df}·se`` from
``Cov θ̂ = s²(JᵀJ)⁻¹``, ``s² = RSS/df``, ``df = n − 5``. Where JᵀJ is singular (a = 0 leaves α free) the
SEs are infinite: a free parameter is not distinguishable from anything.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import optimize
from scipy import stats as sps

from ..core.tables import columns

PARAMETERS = ("a", "alpha", "b", "beta", "c")
LOWER, UPPER = (0.0, -2.0, 0.0, -2.0, -np.inf), (np.inf, 4.0, np.inf, 4.0, np.inf)
STARTS = (0.25, 1.0)  # starting α and β (every pair): the fit with the smallest RSS is kept
MIN_LEVELS = 3  # distinct depths and widths a fit needs
LEVEL = 0.95


def law(x: np.ndarray, a: float, alpha: float, b: float, beta: float, c: float) -> np.ndarray:
    """``a·d^(−α) + b·w^(−β) + c`` at ``x = (d, w)`` (depth and width relative to their references)."""
    d, w = x
    return a * d**-alpha + b * w**-beta + c


def jacobian(x: np.ndarray, a: float, alpha: float, b: float, beta: float, c: float) -> np.ndarray:
    """(n, 5): ∂L/∂(a, α, b, β, c)."""
    d, w = x
    dd, ww = d**-alpha, w**-beta
    return np.column_stack([dd, -a * np.log(d) * dd, ww, -b * np.log(w) * ww, np.ones_like(d)])


@dataclass(frozen=True)
class PowerLawFit:
    """Fitted parameters (``PARAMETERS`` order) with SEs and ``LEVEL`` t intervals, and the grid's references."""

    values: np.ndarray
    se: np.ndarray
    df: int
    rss: float
    depth_ref: float
    width_ref: float

    @property
    def half_width(self) -> np.ndarray:
        return sps.t.ppf(0.5 + LEVEL / 2, self.df) * self.se


def _covariance(x: np.ndarray, values: np.ndarray, rss: float, df: int) -> np.ndarray:
    """``s²(JᵀJ)⁻¹``; infinite where JᵀJ is singular to working precision."""
    jtj = (lambda j: j.T @ j)(jacobian(x, *values))
    if not np.isfinite(jtj).all() or np.linalg.cond(jtj) > 1e12:
        return np.full((len(values), len(values)), np.inf)
    return rss / df * np.linalg.inv(jtj)


def fit_power_law(depth: np.ndarray, width: np.ndarray, loss: np.ndarray) -> PowerLawFit:
    """The least-squares fit of ``law`` to ``loss`` (n ≥ 6 points over ≥ 3 depths and ≥ 3 widths)."""
    depth, width, loss = (np.asarray(v, float) for v in (depth, width, loss))
    x = np.array([depth / depth.min(), width / width.min()])
    spread = max(float(np.ptp(loss)), 1e-12)
    best = None
    for alpha, beta in itertools.product(STARTS, STARTS):
        p0 = [spread / 2, alpha, spread / 2, beta, float(loss.min()) - 0.1 * spread]
        values, _ = optimize.curve_fit(law, x, loss, p0=p0, bounds=(LOWER, UPPER), jac=jacobian, max_nfev=10_000)
        rss = float(np.sum((loss - law(x, *values)) ** 2))
        if best is None or rss < best[1]:
            best = (values, rss)
    values, rss = best
    df = len(loss) - len(PARAMETERS)
    se = np.sqrt(np.abs(np.diag(_covariance(x, values, rss, df))))
    return PowerLawFit(values, se, df, rss, float(depth.min()), float(width.min()))


def fit_grid(grid: pd.DataFrame) -> PowerLawFit | None:
    """The fit over the models of ``grid`` (training rows of one dataset and family) with a finite test
    loss; None with fewer than ``MIN_LEVELS`` depths or widths among them, or no more models than the
    law has parameters (no residual degree of freedom: a cross of 3 depths and 3 widths has 5)."""
    grid = grid[np.isfinite(grid["test_loss"].astype(float))]
    if grid["depth"].nunique() < MIN_LEVELS or grid["width"].nunique() < MIN_LEVELS or len(grid) <= len(PARAMETERS):
        return None
    return fit_power_law(grid["depth"], grid["width"], grid["test_loss"])


def powerlaw_table(training: pd.DataFrame) -> pd.DataFrame:
    """The ``powerlaw`` table: one row per parameter of each (run, dataset, family) of ``training`` with
    ≥ ``MIN_LEVELS`` depths and widths among its models with a finite test loss (others have no rows)."""
    rows = []
    for (run, dataset, family), grid in training.groupby(["run", "dataset", "family"]):
        fit = fit_grid(grid)
        if fit is None:
            continue
        grid = grid[np.isfinite(grid["test_loss"].astype(float))]
        shared = dict(run=run, dataset=dataset, family=family, df=fit.df, models=len(grid), rss=fit.rss)
        shared |= dict(depths=grid["depth"].nunique(), widths=grid["width"].nunique())
        shared |= dict(depth_ref=fit.depth_ref, width_ref=fit.width_ref)
        for name, value, se, half in zip(PARAMETERS, fit.values, fit.se, fit.half_width):
            rows.append(shared | dict(parameter=name, value=value, se=se, lo=value - half, hi=value + half))
    return pd.DataFrame(rows, columns=columns("powerlaw"))
