"""Paired differences: two models scored on the same examples (held-out losses of ``grow``'s arms, E8)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats as scipy_stats


@dataclass(frozen=True)
class PairedDifference:
    """``mean_i(a_i − b_i)`` over ``n`` shared examples and its standard error ``sd_i(a_i − b_i)/√n``
    (ddof 1, ``scipy.stats.sem``)."""

    mean: float
    se: float
    n: int

    def exceeds(self, multiple: float) -> bool:
        """Whether the difference is above ``multiple`` standard errors: ``mean > multiple·se``."""
        return bool(self.mean > multiple * self.se)


def paired_difference(a: np.ndarray, b: np.ndarray) -> PairedDifference:
    """``PairedDifference`` of ``a − b``, the per-example scores of two models on the same examples."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1 or len(a) < 2:
        raise ValueError(f"paired scores need two 1-D arrays of one length >= 2; got shapes {a.shape} and {b.shape}")
    diff = a - b
    return PairedDifference(float(diff.mean()), float(scipy_stats.sem(diff, ddof=1)), len(diff))
