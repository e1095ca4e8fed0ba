"""What ``d_align`` costs (claim W5): the Gram U-statistics against the D×D covariance.

Both paths read the same moments ``‖μ‖²``, ``μᵀΣμ``, ``tr Σ²`` from ``n`` rows of dimension
``D``: the Gram path in O(n²·D) time and O(n²) memory (``stats.alignment_stats``), the
covariance path by forming ``Σ̂ = (Q − q̄)ᵀ(Q − q̄)/(n − 1)`` in O(n·D²) time and O(D²) memory.
Timed in the same process, one after the other, ``repeats`` times in alternating order (after one
untimed warm-up of each), so the ratio survives a noisy machine: the repeats are the units, the ratio
their geometric mean ``exp(mean log(t_gram/t_cov))`` with a t interval on the log ratios.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch
from scipy import stats
from torch import Tensor

from .moments import alignment_stats


def covariance_moments(rows: Tensor) -> dict[str, float]:
    """Plug-in ``‖q̄‖²``, ``q̄ᵀΣ̂q̄``, ``‖Σ̂‖_F²`` through the ``D×D`` sample covariance (the baseline)."""
    mean = rows.mean(0)  # (D,)
    centred = rows - mean
    sigma = centred.T @ centred / (rows.shape[0] - 1)  # (D, D)
    return {
        "mu_sq": (mean @ mean).item(),
        "mu_sigma_mu": (mean @ sigma @ mean).item(),
        "tr_sigma_sq": (sigma * sigma).sum().item(),
    }


def _seconds(work, rows: Tensor) -> float:
    start = time.perf_counter()
    work(rows)
    return time.perf_counter() - start


def paired_seconds(rows: Tensor, repeats: int) -> tuple[np.ndarray, np.ndarray]:
    """Seconds of the Gram and the covariance path on ``rows``, ``repeats`` times each, the pair's order
    alternating (whatever the machine drifts by falls on both), after one untimed call of each."""
    paths = [alignment_stats, covariance_moments]
    for work in paths:
        work(rows)
    seconds = np.empty((repeats, 2))
    for r in range(repeats):
        for i in (0, 1) if r % 2 == 0 else (1, 0):
            seconds[r, i] = _seconds(paths[i], rows)
    return seconds[:, 0], seconds[:, 1]


def ratio_interval(gram: np.ndarray, covariance: np.ndarray, level: float = 0.95) -> tuple[float, float, float]:
    """The geometric mean of ``gram/covariance`` over paired repeats and its two-sided ``level`` t interval
    (``exp`` of the t interval of the mean log ratio, ``len − 1`` df)."""
    logs = np.log(gram / covariance)
    half = stats.t.ppf(0.5 + level / 2, len(logs) - 1) * logs.std(ddof=1) / math.sqrt(len(logs))
    mean = float(logs.mean())
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


def cost_table(dims: Sequence[int], n: int, max_covariance_mb: int, repeats: int = 5, seed: int = 0) -> pd.DataFrame:
    """One row per ``D``: the median seconds of each path over ``repeats`` paired timings, their ratio's
    geometric mean with its 95 % interval (``ratio_interval``), and the bytes each path must hold.

    The covariance is formed only up to ``max_covariance_mb`` (float32); beyond, its path is
    infeasible on this machine: the Gram path is timed alone, ``covariance_seconds`` is NaN and the
    time ratio and its interval are 0.
    """
    if repeats < 3:
        raise ValueError(f"cost repeats {repeats}: need ≥ 3 paired timings for an interval of the ratio")
    rows = []
    for dim in sorted(set(dims)):
        q = torch.randn(n, dim, generator=torch.Generator().manual_seed(seed)).add_(0.05)  # (n, D)
        feasible = 4 * dim * dim <= max_covariance_mb * 2**20
        if feasible:
            gram, covariance = paired_seconds(q, repeats)
            ratio, lo, hi = ratio_interval(gram, covariance)
        else:
            gram = np.array([_seconds(alignment_stats, q) for _ in range(repeats)])
            covariance, (ratio, lo, hi) = np.full(repeats, math.nan), (0.0, 0.0, 0.0)
        rows.append(
            {
                "dim": dim,
                "n": n,
                "repeats": repeats,
                "gram_seconds": float(np.median(gram)),
                "covariance_seconds": float(np.median(covariance)),
                "gram_over_cov_time": ratio,
                "gram_over_cov_time_lo": lo,
                "gram_over_cov_time_hi": hi,
                "gram_bytes": 8 * n * n,
                "covariance_bytes": 4 * dim * dim,
            }
        )
    return pd.DataFrame(rows)
