"""The covariance-structure check of Paper D (claim D1): off-diagonal energy ratios, plug-in and
unbiased, beside their permutation nulls, and the correlation matrix."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from .moments import _estimates, _ratio, _u_from_sums, u_statistics


def _covariance(Q_pooled: Tensor) -> Tensor:
    """Sample covariance ``Σ̂ = (Q - Q̄)ᵀ(Q - Q̄)/(n - 1)`` of ``(n, p)`` rows -> ``(p, p)``, float64."""
    if Q_pooled.ndim != 2 or Q_pooled.shape[0] < 2:
        raise ValueError(f"Q_pooled must have shape (n, p) with n >= 2; got {tuple(Q_pooled.shape)}")
    centred = Q_pooled.to(torch.float64) - Q_pooled.to(torch.float64).mean(0)
    return centred.T @ centred / (Q_pooled.shape[0] - 1)


def offdiag_ratio(Q_pooled: Tensor) -> float:
    """Off-diagonal energy ``‖Σ̂ - diag Σ̂‖_F² / ‖Σ̂‖_F²`` of the pooled view (nan if ``Σ̂ = 0``)."""
    cov = _covariance(Q_pooled)
    energy = (cov**2).sum()
    return ((energy - (cov.diagonal() ** 2).sum()) / energy).item()


def offdiag_null(Q_pooled: Tensor, draws: int = 20, seed: int = 0) -> tuple[float, float]:
    """Mean and sd of ``offdiag_ratio`` under independence, same ``n``, same marginals.

    Each draw permutes every column independently: the marginal distribution of each unit is
    kept exactly (heavy tails included, which a Gaussian null would miss and which set the
    sampling noise of ``Σ̂_ij``), while any dependence between units is destroyed. The observed
    ratio is "close to diagonal" when it lies near this null.
    """
    return _permutation_null(Q_pooled, offdiag_ratio, draws, seed)


def _permutation_null(Q: Tensor, statistic: Callable[[Tensor], float], draws: int, seed: int) -> tuple[float, float]:
    """Mean and sd of ``statistic`` over ``draws`` copies of ``Q`` (n×p) with each column permuted independently."""
    if draws < 2:
        raise ValueError(f"draws must be >= 2; got {draws}")
    n, p = Q.shape
    generator = torch.Generator().manual_seed(seed)
    values = []
    for _ in range(draws):
        order = torch.rand(n, p, generator=generator).argsort(0).to(Q.device)  # (n, p)
        values.append(statistic(Q.gather(0, order)))
    null = torch.tensor(values, dtype=torch.float64)
    return null.mean().item(), null.std().item()


def _offdiag_energies(Q: Tensor) -> Tensor:
    """``(..., n, p)`` rows -> ``(..., 2)``: unbiased ``(Σ_{k≠l} Σ_kl², tr Σ²)``, O(n²p) (n >= 4).

    ``tr Σ² = ‖Σ‖_F² ≈ U2 - 2U3 + U4`` of ``G = QQᵀ`` (``_estimates``, as in ``stats_from_gram``).
    ``Σ_k Σ_kk²``: the same estimator on each column ``x = Q[:, k]`` alone (a 1-vector with
    ``tr Σ² = Σ_kk²``), whose Gram ``x xᵀ`` needs only power sums ``s_t = Σ_i x_iᵗ`` (O(n)); the
    sums of ``_u_from_sums`` are ``S = s1² - s2``, ``R = Σ_i x_i²(s1 - x_i)² = s1²s2 - 2s1s3 + s4``
    and ``Q = Σ_{i≠j} x_i²x_j² = s2² - s4``.
    Both are U-statistics of ``h = ¼((q_i - q_k)ᵀ(q_j - q_l))²`` (resp. its per-coordinate
    terms) over distinct ``i, j, k, l`` -- expand the square: ``¼(4U2 - 8U3 + 4U4)`` -- so they
    are invariant to shifting the rows, and the rows are centred first (exact, for precision).
    Off-diagonal energy ``= tr Σ² - Σ_k Σ_kk²``.
    """
    if Q.ndim < 2 or Q.shape[-2] < 4:
        raise ValueError(f"Q must have shape (..., n, p) with n >= 4; got {tuple(Q.shape)}")
    Q = Q.to(torch.float64)
    Q = Q - Q.mean(-2, keepdim=True)
    n = Q.shape[-2]
    total = _estimates(u_statistics(Q @ Q.transpose(-1, -2)))[..., 3]  # tr Σ²
    s1, s2, s3, s4 = ((Q**t).sum(-2) for t in (1, 2, 3, 4))  # (..., p)
    per_column = _estimates(_u_from_sums(n, s1**2 - s2, s1**2 * s2 - 2 * s1 * s3 + s4, s2**2 - s4))[..., 3]
    return torch.stack([total - per_column.sum(-1), total], dim=-1)


def offdiag_energy(Q: Tensor) -> tuple[float, float]:
    """``(Σ_{k≠l} Σ_kl², ‖Σ‖_F²)`` of the pooled view ``Q`` (n×p, n >= 4), both unbiased U-statistics.

    Unlike the plug-in ``‖Σ̂ - diag Σ̂‖_F²``, whose mean is ``Σ_{k≠l} Σ_kl² + O(p²/n)`` (every
    ``Σ̂_kl²`` carries ``Var Σ̂_kl ≈ (Σ_kkΣ_ll + Σ_kl²)/n``, Gaussian rows), the estimate has mean
    exactly the population off-diagonal energy (``0`` for independent coordinates); it can be negative. See
    ``_offdiag_energies``.
    """
    if Q.ndim != 2:
        raise ValueError(f"Q must have shape (n, p); got {tuple(Q.shape)}")
    offdiag, total = _offdiag_energies(Q).tolist()
    return offdiag, total


def offdiag_ratio_unbiased(Q: Tensor) -> float:
    """``offdiag / total`` of ``offdiag_energy(Q)``: a ratio of unbiased estimates (not itself unbiased,
    but free of the plug-in's ``O(p/n)`` upward bias: about 0 for a diagonal population at ``p = n``,
    where ``offdiag_ratio`` gives about 0.5). Degenerate denominators follow ``_ratio``."""
    offdiag, total = torch.tensor(offdiag_energy(Q), dtype=torch.float64)
    return _ratio(offdiag, total).item()


def offdiag_null_unbiased(Q: Tensor, draws: int = 20, seed: int = 0) -> tuple[float, float]:
    """Mean and sd of ``offdiag_ratio_unbiased`` over ``draws`` column-wise permutations of ``Q``.

    Same permutations as ``offdiag_null`` (same ``seed``). A permutation keeps every marginal and
    makes the columns independent; the off-diagonal energy estimate then has expectation exactly 0
    (each kernel term holds a factor ``(y_i - y_k)(y_j - y_l)`` of another column ``y``, whose rows
    ``i, j, k, l`` are a uniform draw of 4 distinct entries under the permutation: mean 0), so this
    null sits near 0 whatever ``p/n``.
    """
    return _permutation_null(Q, offdiag_ratio_unbiased, draws, seed)


def correlation(Q_pooled: Tensor) -> Tensor:
    """Correlation matrix ``Σ̂_ij / sqrt(Σ̂_ii Σ̂_jj)`` (p×p, float64); nan rows for constant units."""
    cov = _covariance(Q_pooled)
    sd = cov.diagonal().sqrt()
    return cov / (sd[:, None] * sd[None, :])
