"""The U-statistics of a Gram matrix and the moment estimates and effective dimensions from them
(``AlignmentStats``)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from .grams import Rows, _gram_and_dim

FIELDS = ("mu_sq", "mu_four", "mu_sigma_mu", "tr_sigma_sq", "d_par", "d_2", "d_align")
"""Estimated quantities, in the order of the last axis of ``_estimates``."""


def _u_from_sums(n: int | Tensor, total: Tensor, row_sq_sum: Tensor, offdiag_sq_sum: Tensor) -> Tensor:
    """U1..U4 (last axis) from ``S = Σ_{i≠j} G_ij``, ``R = Σ_i r_i²``, ``Q = Σ_{i≠j} G_ij²``.

    With ``r_i = Σ_{j≠i} G_ij`` (inclusion–exclusion over coinciding indices):

    - ``U1 = S / n(n-1)``
    - ``U2 = Q / n(n-1)``
    - ``U3 = (R - Q) / n(n-1)(n-2)``                    (``Σ_i Σ_{j≠k, both ≠ i} G_ij G_ik``)
    - ``U4 = (S² - 4R + 2Q) / n(n-1)(n-2)(n-3)``        (pairs ``(i,j)``, ``(k,l)`` all distinct)
    """
    pairs = n * (n - 1)
    u1 = total / pairs
    u2 = offdiag_sq_sum / pairs
    u3 = (row_sq_sum - offdiag_sq_sum) / (pairs * (n - 2))
    u4 = (total**2 - 4 * row_sq_sum + 2 * offdiag_sq_sum) / (pairs * (n - 2) * (n - 3))
    return torch.stack([u1, u2, u3, u4], dim=-1)


def _check_gram(G: Tensor, min_n: int = 4) -> Tensor:
    """``G`` as float64, checked square with at least ``min_n`` rows."""
    if G.ndim < 2 or G.shape[-1] != G.shape[-2]:
        raise ValueError(f"G must be a square (..., n, n) Gram matrix; got shape {tuple(G.shape)}")
    if G.shape[-1] < min_n:
        raise ValueError(f"need n >= {min_n} rows for these U-statistics; got n = {G.shape[-1]}")
    return G.to(torch.float64)


def _offdiag_row_sums(G: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """``(G_ii, r_i = Σ_{j≠i} G_ij, s_i = Σ_{j≠i} G_ij²)`` along the last axis, with no n×n temporary
    (``s_i = ‖G_i‖² − G_ii²`` in float64: the memory floor is ``G`` itself)."""
    diag = G.diagonal(dim1=-2, dim2=-1)
    return diag, G.sum(-1) - diag, torch.linalg.vector_norm(G, dim=-1) ** 2 - diag**2


def u_statistics(G: Tensor) -> Tensor:
    """``(U1, U2, U3, U4)`` of a Gram matrix ``(..., n, n)`` -> ``(..., 4)``, O(n²), n >= 4.

    Averages over distinct indices (unbiased for the moments of ``q``):
    ``U1 = avg_{i≠j} G_ij`` (``E = ‖μ‖²``), ``U2 = avg_{i≠j} G_ij²`` (``E = tr (Σ+μμᵀ)²``),
    ``U3 = avg_{i,j,k distinct} G_ij G_ik`` (``E = μᵀ(Σ+μμᵀ)μ``),
    ``U4 = avg_{i,j,k,l distinct} G_ij G_kl`` (``E = ‖μ‖⁴``).
    """
    G = _check_gram(G)
    _, row_sums, row_sq = _offdiag_row_sums(G)  # (..., n) each
    return _u_from_sums(G.shape[-1], row_sums.sum(-1), (row_sums**2).sum(-1), row_sq.sum(-1))


def leave_one_out_u(G: Tensor) -> Tensor:
    """``(n, 4)``: row ``m`` holds U1..U4 of ``G`` with row and column ``m`` removed, O(n²) total.

    With ``A = G - diag G``, ``r = A 1``, ``s_m = Σ_j A_mj²``, removing ``m`` gives
    ``S_m = S - 2 r_m``, ``Q_m = Q - 2 s_m``, ``R_m = R - r_m² - 2 (A r)_m + s_m``.
    """
    G = _check_gram(G, min_n=5)
    if G.ndim != 2:
        raise ValueError(f"G must be one (n, n) Gram matrix; got shape {tuple(G.shape)}")
    diag, row_sums, row_sq = _offdiag_row_sums(G)  # (n,) each
    total, row_sq_sum, offdiag_sq_sum = row_sums.sum(), (row_sums**2).sum(), row_sq.sum()
    offdiag_times_row_sums = G @ row_sums - diag * row_sums  # A r
    return _u_from_sums(
        G.shape[0] - 1,
        total - 2 * row_sums,
        row_sq_sum - row_sums**2 - 2 * offdiag_times_row_sums + row_sq,
        offdiag_sq_sum - 2 * row_sq,
    )


def _ratio(num: Tensor, den: Tensor) -> Tensor:
    """``num/den`` if ``den > 0``; else ``+inf`` if ``num > 0``, else ``nan`` (elementwise)."""
    fallback = torch.where(num > 0, math.inf, math.nan).to(num.dtype)
    return torch.where(den > 0, num / den, fallback)


def _with_dimensions(moments: Tensor) -> Tensor:
    """``(..., 4)`` moments ``(‖μ‖², ‖μ‖⁴, μᵀΣμ, tr Σ²)`` -> ``(..., 7)`` adding ``d_par, d_2, d_align``.

    ``d_align = min(d_par, d_2)`` propagates ``nan``.
    """
    mu_four, mu_sigma_mu, tr_sigma_sq = moments[..., 1], moments[..., 2], moments[..., 3]
    d_par, d_2 = _ratio(mu_four, mu_sigma_mu), _ratio(mu_four, tr_sigma_sq)
    return torch.cat([moments, torch.stack([d_par, d_2, torch.minimum(d_par, d_2)], dim=-1)], dim=-1)


def _estimates(u: Tensor) -> Tensor:
    """``(..., 4)`` U1..U4 -> ``(..., 7)`` estimates in ``FIELDS`` order.

    ``‖μ‖² = U1``, ``‖μ‖⁴ = U4``, ``μᵀΣμ = U3 - U4``, ``tr Σ² = U2 - 2 U3 + U4``.
    """
    u1, u2, u3, u4 = u.unbind(-1)
    return _with_dimensions(torch.stack([u1, u4, u3 - u4, u2 - 2 * u3 + u4], dim=-1))


@dataclass(frozen=True)
class AlignmentStats:
    """Moment estimates of the activation gradient ``q`` and its effective dimensions."""

    n: int  # rows (examples) used
    dim: int  # D, the length of one row
    mu_sq: float  # ‖μ‖² (U1)
    mu_four: float  # ‖μ‖⁴ (U4)
    mu_sigma_mu: float  # μᵀΣμ (U3 - U4)
    tr_sigma_sq: float  # tr Σ² (U2 - 2 U3 + U4)
    d_par: float  # ‖μ‖⁴ / μᵀΣμ, directional effective dimension
    d_2: float  # ‖μ‖⁴ / tr Σ², covariance-energy effective dimension
    d_align: float  # min(d_par, d_2)

    @classmethod
    def from_moments(
        cls, n: int, dim: int, mu_sq: float, mu_four: float, mu_sigma_mu: float, tr_sigma_sq: float
    ) -> AlignmentStats:
        """Stats from given moments (e.g. exact population moments), deriving the ``d``'s."""
        values = _with_dimensions(torch.tensor([mu_sq, mu_four, mu_sigma_mu, tr_sigma_sq], dtype=torch.float64))
        return cls(n, dim, **dict(zip(FIELDS, values.tolist())))


def stats_from_gram(G: Tensor, dim: int) -> AlignmentStats:
    """``AlignmentStats`` of the rows behind Gram matrix ``G`` (n×n, n >= 4) of ``dim``-vectors."""
    values = _estimates(u_statistics(G))
    return AlignmentStats(G.shape[0], dim, **dict(zip(FIELDS, values.tolist())))


def alignment_stats(Q: Rows, chunk_size: int = 8192, device: torch.device | str | None = None) -> AlignmentStats:
    """``stats_from_gram(gram(Q, chunk_size, device), D)``; see ``gram`` for inputs and memory."""
    return stats_from_gram(*_gram_and_dim(Q, chunk_size, device))
