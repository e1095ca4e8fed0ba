"""A width or depth trend over all rows, models the units (``units``), and the bound a null states."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .common import mde
from .units import Estimate, across_models, per_model


@dataclass(frozen=True)
class Trend:
    """The slope of a claim's quantity on log₂ x and the rows behind it."""

    slope: Estimate
    rows: int  # rows with a finite estimate and SE (all of them entered)
    left_out: int  # rows without one

    def text(self, y: str, x: str) -> str:
        return f"slope of {y} per {x} doubling: {self.slope.text()} ({self.slope.counted})"

    def detail(self, strata: Sequence[str]) -> str:
        return (
            f"{self.rows} rows ({self.left_out} without a finite estimate or SE, left out), per model their mean, "
            f"then a weighted regression across {self.slope.counted} with one intercept per "
            f"({', '.join(strata)}), t with {self.slope.df} df"
        )


def trend(
    rows: pd.DataFrame, value: str, se: str | None, x: str, strata: list[str], scale_cells: Sequence[str] = ()
) -> Trend:
    """``units.per_model`` then ``units.across_models`` on every row with a finite ``value`` (and ``se``)."""
    finite = np.isfinite(rows[value].astype(float))
    if se is not None:
        finite &= np.isfinite(rows[se].astype(float))
    units = per_model(rows[finite], value, se, scale_cells=scale_cells)
    return Trend(across_models(units, x, strata), int(finite.sum()), int((~finite).sum()))


def null_bound(rows: pd.DataFrame, name: str, ucb: str, se: str) -> str:
    """The bound a null row states: the largest finite one-sided 95 % UCB over ``rows`` (each row below
    it at 95 %; rows whose bound is infinite, where the denominator is not bounded away from 0, are
    counted) and the minimum detectable effect of one row (``common.mde``) at the median pool size ``n``."""
    n = f" at n = {rows['n'].median():g}" if "n" in rows else ""
    bounds = rows[ucb].astype(float)
    bounded = bounds[np.isfinite(bounds)]
    where = "every row" if len(bounded) == len(bounds) else f"{len(bounded)}/{len(bounds)} rows bounded"
    largest = f"{bounded.max():.2g}" if len(bounded) else "inf"
    return f"{name} < {largest} (95 % UCB, {where}); MDE {mde(rows[se]):.2g}{n}"
