"""What ``d_align`` costs (claim W5): the Gram U-statistics against the D×D covariance.

Both paths read the same moments ``‖μ‖²``, ``μᵀΣμ``, ``tr Σ²`` from ``n`` rows of dimension
``D``: the Gram path in O(n²·D) time and O(n²) memory (``stats.alignment_stats``), the
covariance path by forming ``Σ̂ = (Q − q̄)ᵀ(Q − q̄)/(n − 1)`` in O(n·D²) time and O(D²) memory.
Timed in the same process, one after the other, so the ratio survives a noisy machine.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

import pandas as pd
import torch
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


def cost_table(dims: Sequence[int], n: int, max_covariance_mb: int, seed: int = 0) -> pd.DataFrame:
    """One row per ``D``: seconds of each path, their ratio, and the bytes each must hold.

    The covariance is formed only up to ``max_covariance_mb`` (float32); beyond, its path is
    infeasible on this machine: ``covariance_seconds`` is NaN and the time ratio 0.
    """
    rows = []
    for dim in sorted(set(dims)):
        q = torch.randn(n, dim, generator=torch.Generator().manual_seed(seed)).add_(0.05)  # (n, D)
        gram_s = _seconds(alignment_stats, q)
        feasible = 4 * dim * dim <= max_covariance_mb * 2**20
        covariance_s = _seconds(covariance_moments, q) if feasible else math.nan
        rows.append(
            {
                "dim": dim,
                "n": n,
                "gram_seconds": gram_s,
                "covariance_seconds": covariance_s,
                "gram_over_cov_time": gram_s / covariance_s if feasible else 0.0,
                "gram_bytes": 8 * n * n,
                "covariance_bytes": 4 * dim * dim,
            }
        )
    return pd.DataFrame(rows)
