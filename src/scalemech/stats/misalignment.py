"""Theorem 1's misalignment certificates: the one-sample Cantelli bounds ``B_exact <= B_align`` and the
two-sample certificate of train and test rows from different distributions (from ``C = Q_tr Q_teᵀ``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from .intervals import _jackknife_se, _upper_z
from .levels import UCB_LEVEL
from .moments import AlignmentStats, _ratio


@dataclass(frozen=True)
class Certificates:
    """Theorem 1 of Paper W for train/test draws of sizes ``(M, K)`` (floats, or arrays on a grid)."""

    n_eff: float | np.ndarray  # M K / (M + K + 1)
    mean: float | np.ndarray  # E[μ_Mᵀ g_K] = ‖μ‖²
    var: float | np.ndarray  # Var(μ_Mᵀ g_K) = (1/M + 1/K) μᵀΣμ + tr Σ² / (M K)
    b_exact: float | np.ndarray  # 1 / (1 + ‖μ‖⁴ / var)
    b_align: float | np.ndarray  # 1 / (1 + n_eff d_align) >= b_exact


def effective_sample_size(M, K):
    """``n_eff(M, K) = M·K/(M + K + 1)`` (numbers, arrays or tensors): ``B_align = 1/(1 + n_eff·d_align)``."""
    return M * K / (M + K + 1)


def _cantelli(t: Tensor) -> Tensor:
    """``1/(1+t)`` for ``t >= 0`` (``0`` at ``t = inf``); ``nan`` for ``t < 0`` or ``nan``: no certificate."""
    return torch.where(t >= 0, 1 / (1 + t), math.nan)


def certificates(stats: AlignmentStats, M: int | np.ndarray, K: int | np.ndarray) -> Certificates:
    """Misalignment bounds ``P(μ_Mᵀ g_K <= 0) <= B_exact <= B_align``; ``M``, ``K`` broadcast.

    ``B_exact = 1/(1 + ‖μ‖⁴/Var)``, ``B_align = 1/(1 + n_eff·d_align)``. With estimated moments a
    ``Var`` estimate ``<= 0`` gives ``‖μ‖⁴/Var = inf`` (``B = 0``) by the ``_ratio`` rule, and a
    ``‖μ‖⁴`` or ``d_align`` estimate ``<= 0`` / ``nan`` gives ``B = nan``. ``B_exact <= B_align``
    holds whenever ``‖μ‖⁴ > 0`` and ``μᵀΣμ, tr Σ² >= 0``, estimates included.
    """
    M_, K_ = (torch.as_tensor(np.asarray(x), dtype=torch.float64) for x in (M, K))
    if (M_ < 1).any() or (K_ < 1).any():
        raise ValueError(f"M and K must be >= 1; got M = {M}, K = {K}")
    n_eff = effective_sample_size(M_, K_)
    var = (1 / M_ + 1 / K_) * stats.mu_sigma_mu + stats.tr_sigma_sq / (M_ * K_)
    mu_four = torch.full_like(var, stats.mu_four)
    b_exact = _cantelli(_ratio(mu_four, var))
    b_align = _cantelli(n_eff * stats.d_align)
    mean = torch.full_like(var, stats.mu_sq)
    out = [x.numpy() if x.ndim else x.item() for x in (n_eff, mean, var, b_exact, b_align)]
    return Certificates(*out)


TWO_SAMPLE_FIELDS = ("mu_cross", "mu_te_sigma_tr_mu_te", "mu_tr_sigma_te_mu_tr", "tr_sigma_tr_sigma_te", "mu_cross_sq")
"""Two-sample estimates, in the order of the last axis of ``_two_sample_estimates``."""


def _two_sample_estimates(C: Tensor) -> Tensor:
    """``(..., n, m)`` cross-Gram ``C_ij = q_iᵀ r_j`` -> ``(..., 5)`` unbiased estimates, ``TWO_SAMPLE_FIELDS`` order.

    ``E = μ_trᵀμ_te ≈ V1``, ``E² ≈ W``, ``μ_teᵀΣ_trμ_te ≈ A - W``, ``μ_trᵀΣ_teμ_tr ≈ B - W``,
    ``tr(Σ_trΣ_te) ≈ V2 - A - B + W``, with (``T = Σ_ij C_ij``, rows ``a_i = Σ_j C_ij``, columns
    ``b_j = Σ_i C_ij``, ``P = Σ_ij C_ij²``; inclusion–exclusion, O(nm)):

    - ``V1 = avg_{i,j} C_ij = T / nm``                                   (E = μ_trᵀμ_te)
    - ``V2 = avg_{i,j} C_ij² = P / nm``                                  (E = tr S_tr S_te)
    - ``A = avg_{i; j≠l} C_ij C_il = (Σ_i a_i² - P) / nm(m-1)``          (E = μ_teᵀ S_tr μ_te)
    - ``B = avg_{i≠k; j} C_ij C_kj = (Σ_j b_j² - P) / mn(n-1)``          (E = μ_trᵀ S_te μ_tr)
    - ``W = avg_{i≠k; j≠l} C_ij C_kl = (T² - Σa² - Σb² + P) / n(n-1)m(m-1)``  (E = (μ_trᵀμ_te)²)

    where ``S = Σ + μμᵀ`` are second moments (every product pairs independent rows, so
    ``E[C_ij C_il] = E[μ_teᵀ q_i q_iᵀ μ_te]`` etc.).
    """
    n, m = C.shape[-2:]
    total = C.sum((-2, -1))
    row_sq_sum = (C.sum(-1) ** 2).sum(-1)  # Σ_i a_i²
    col_sq_sum = (C.sum(-2) ** 2).sum(-1)  # Σ_j b_j²
    sq_sum = (C**2).sum((-2, -1))  # P
    return _two_sample_from_sums(n, m, total, row_sq_sum, col_sq_sum, sq_sum)


def _two_sample_from_sums(
    n: int, m: int, total: Tensor, row_sq_sum: Tensor, col_sq_sum: Tensor, sq_sum: Tensor
) -> Tensor:
    """``_two_sample_estimates`` from ``T``, ``Σa²``, ``Σb²``, ``P`` of an ``n × m`` cross-Gram (broadcast)."""
    v1, v2 = total / (n * m), sq_sum / (n * m)
    a = (row_sq_sum - sq_sum) / (n * m * (m - 1))
    b = (col_sq_sum - sq_sum) / (m * n * (n - 1))
    w = (total**2 - row_sq_sum - col_sq_sum + sq_sum) / (n * (n - 1) * m * (m - 1))
    return torch.stack([v1, a - w, b - w, v2 - a - b + w, w], dim=-1)


@dataclass(frozen=True)
class TwoSampleStats:
    """Unbiased moment estimates for train rows ``q ~ (μ_tr, Σ_tr)`` and independent test rows ``r ~ (μ_te, Σ_te)``.

    ``E[μ_Mᵀg_K] = μ_trᵀμ_te``,
    ``Var(μ_Mᵀg_K) = μ_teᵀΣ_trμ_te/M + μ_trᵀΣ_teμ_tr/K + tr(Σ_trΣ_te)/(MK)``
    (see ``two_sample_variance``); every term is estimated without bias from ``C = Q_tr Q_teᵀ``
    by the U-statistics of ``_two_sample_estimates``.
    """

    n_train: int  # rows of the train sample (0 for population moments)
    n_test: int  # rows of the test sample
    mu_cross: float  # E = μ_trᵀμ_te (V1)
    mu_te_sigma_tr_mu_te: float  # μ_teᵀΣ_trμ_te (A - W)
    mu_tr_sigma_te_mu_tr: float  # μ_trᵀΣ_teμ_tr (B - W)
    tr_sigma_tr_sigma_te: float  # tr(Σ_trΣ_te) (V2 - A - B + W)
    mu_cross_sq: float  # E² = (μ_trᵀμ_te)² (W); not mu_cross², which is biased up by Var(V1)

    @classmethod
    def from_cross(cls, C: Tensor) -> TwoSampleStats:
        """Estimates from the cross-Gram ``C = Q_tr Q_teᵀ`` (n_train × n_test, both >= 2), O(n_train·n_test)."""
        if C.ndim != 2 or min(C.shape) < 2:
            raise ValueError(f"C must be an (n_train, n_test) cross-Gram with both >= 2; got shape {tuple(C.shape)}")
        values = _two_sample_estimates(C.to(torch.float64))
        return cls(C.shape[0], C.shape[1], **dict(zip(TWO_SAMPLE_FIELDS, values.tolist())))

    @classmethod
    def from_grams(cls, G_tr: Tensor, G_te: Tensor, C: Tensor) -> TwoSampleStats:
        """Estimates from ``G_tr = Q_trQ_trᵀ``, ``G_te = Q_teQ_teᵀ``, ``C = Q_trQ_teᵀ`` (float64).

        Only ``C`` enters the estimates: each term is a moment of the products ``q_iᵀr_j`` (one
        train and one test row; see ``_two_sample_estimates``), and a within-sample product
        ``q_iᵀq_k`` carries no information about ``μ_te`` or ``Σ_te``. ``G_tr`` and ``G_te`` fix
        and check the sample sizes (they are what the one-sample ``stats_from_gram`` uses).
        """
        for name, G in (("G_tr", G_tr), ("G_te", G_te)):
            if G.ndim != 2 or G.shape[0] != G.shape[1]:
                raise ValueError(f"{name} must be a square (n, n) Gram matrix; got shape {tuple(G.shape)}")
        if tuple(C.shape) != (G_tr.shape[0], G_te.shape[0]):
            raise ValueError(
                f"C must have shape (n_train, n_test) = {(G_tr.shape[0], G_te.shape[0])}; got {tuple(C.shape)}"
            )
        return cls.from_cross(C)

    @classmethod
    def from_moments(cls, mu_tr: Tensor, sigma_tr: Tensor, mu_te: Tensor, sigma_te: Tensor) -> TwoSampleStats:
        """Exact population values from means ``(D,)`` and covariances ``(D, D)`` (``n_train = n_test = 0``)."""
        mu_tr, sigma_tr, mu_te, sigma_te = (x.to(torch.float64) for x in (mu_tr, sigma_tr, mu_te, sigma_te))
        e = (mu_tr @ mu_te).item()
        return cls(
            0,
            0,
            e,
            (mu_te @ sigma_tr @ mu_te).item(),
            (mu_tr @ sigma_te @ mu_tr).item(),
            (sigma_tr * sigma_te.T).sum().item(),
            e**2,
        )


def two_sample_variance(stats: TwoSampleStats, M: int, K: int) -> float:
    """``Var(μ_Mᵀg_K) = μ_teᵀΣ_trμ_te/M + μ_trᵀΣ_teμ_tr/K + tr(Σ_trΣ_te)/(MK)`` for i.i.d. draws.

    Derivation: write ``μ_M = μ_tr + a``, ``g_K = μ_te + b`` with independent zero-mean ``a``, ``b``,
    ``Cov a = Σ_tr/M``, ``Cov b = Σ_te/K``. Then ``μ_Mᵀg_K - μ_trᵀμ_te = μ_teᵀa + μ_trᵀb + aᵀb``,
    three uncorrelated terms (odd in ``a`` or ``b``) with variances ``μ_teᵀΣ_trμ_te/M``,
    ``μ_trᵀΣ_teμ_tr/K`` and ``E[aᵀbbᵀa] = tr(Σ_trΣ_te)/(MK)``.

    Draws without replacement of ``M`` (``K``) rows from a pool of ``n`` (``m``) rows: with the
    pool's own moments (covariance normalized by ``1/n``) the three terms get the factors
    ``f_M = (n-M)/(n-1)``, ``f_K = (m-K)/(m-1)`` and ``f_M f_K``, all ``<= 1``, so this (the
    population formula) bounds that variance from above and the certificate stays valid there.
    """
    if M < 1 or K < 1:
        raise ValueError(f"M and K must be >= 1; got M = {M}, K = {K}")
    return stats.mu_te_sigma_tr_mu_te / M + stats.mu_tr_sigma_te_mu_tr / K + stats.tr_sigma_tr_sigma_te / (M * K)


def _delete_one_row(C: Tensor) -> Tensor:
    """``(n, 5)``: row ``i`` holds ``_two_sample_estimates`` of ``C`` (n × m) without its row ``i``, O(nm).

    With row sums ``a``, column sums ``b`` and ``s_i = Σ_j C_ij²``, removing row ``i`` gives
    ``T - a_i``, ``Σa² - a_i²``, ``Σb² - 2(Cb)_i + s_i`` and ``P - s_i``.
    """
    n, m = C.shape
    a, b, s = C.sum(1), C.sum(0), (C**2).sum(1)
    return _two_sample_from_sums(
        n - 1, m, a.sum() - a, (a**2).sum() - a**2, (b**2).sum() - 2 * (C @ b) + s, s.sum() - s
    )


@dataclass(frozen=True)
class TwoSampleBounds:
    """The two-sample estimates (``TwoSampleStats``) with their two-sample delete-one jackknife (Arvesen 1969):
    for a statistic ``θ`` of the ``n`` train and ``m`` test rows,
    ``se² = (n-1)/n Σ_i (θ_(i·) - θ̄_(··))² + (m-1)/m Σ_j (θ_(·j) - θ̄_(··))²`` over the values with one train
    row (one test row) removed, each mean taken over its own sample. ``C = Q_tr Q_teᵀ`` holds everything.
    """

    stats: TwoSampleStats
    without_train_row: Tensor  # (n, 5) TWO_SAMPLE_FIELDS without one train row
    without_test_row: Tensor  # (m, 5) … without one test row

    @classmethod
    def from_cross(cls, C: Tensor) -> TwoSampleBounds:
        """Estimates and leave-one-out values of ``C`` (n_train × n_test, both >= 3), O(n·m)."""
        if C.ndim != 2 or min(C.shape) < 3:
            raise ValueError(f"C must be an (n_train, n_test) cross-Gram with both >= 3; got shape {tuple(C.shape)}")
        C = C.to(torch.float64)
        columns_swapped = _delete_one_row(C.T)[:, [0, 2, 1, 3, 4]]  # Cᵀ swaps the roles of A and B
        return cls(TwoSampleStats.from_cross(C), _delete_one_row(C), columns_swapped)

    def se(self, weights: Sequence[float]) -> float:
        """Jackknife standard error of the linear combination ``Σ_k w_k θ_k`` of the ``TWO_SAMPLE_FIELDS``."""
        w = torch.tensor(weights, dtype=torch.float64)
        parts = [_jackknife_se(loo @ w) ** 2 for loo in (self.without_train_row, self.without_test_row)]
        return math.sqrt(sum(parts))

    def mu_cross_interval(self, level: float) -> tuple[float, float, float]:
        """``(se, lo, hi)`` of ``E = μ_trᵀμ_te``: ``Ê ∓ z_{(1+level)/2}·se``, two-sided at ``level``."""
        se = self.se([1, 0, 0, 0, 0])
        z = _upper_z((1 + level) / 2)
        return se, self.stats.mu_cross - z * se, self.stats.mu_cross + z * se

    def certificate_ucb(self, M: int, K: int, level: float = UCB_LEVEL) -> float:
        """A one-sided ``level`` upper confidence bound of the two-sample certificate ``Var/(Var + E²)``.

        The certificate rises with ``Var`` and falls with ``E > 0``, so it is bounded by plugging in
        ``Var⁺ = V̂ar + z·se_Var`` and ``E⁻ = Ê - z·se_E`` with ``z = z_{1-α/2}``, ``α = 1 - level``
        (both hold with probability ``>= 1 - α``, Bonferroni): ``B⁺ = Var⁺/(Var⁺ + (E⁻)²)``. ``V̂ar`` is
        ``two_sample_variance``, linear in the estimates (its ``se`` by the jackknife).
        ``1`` (the trivial bound: nothing certified) when ``E⁻ <= 0``; ``nan`` when an input is not
        finite or ``Var⁺ <= 0``.
        """
        z = _upper_z(1 - (1 - level) / 2)
        weights = [0, 1 / M, 1 / K, 1 / (M * K), 0]
        var_hi = two_sample_variance(self.stats, M, K) + z * self.se(weights)
        e_lo = self.stats.mu_cross - z * self.se([1, 0, 0, 0, 0])
        if not (math.isfinite(var_hi) and math.isfinite(e_lo) and var_hi > 0):
            return math.nan
        return var_hi / (var_hi + e_lo**2) if e_lo > 0 else 1.0


def two_sample_certificate(stats: TwoSampleStats, M: int, K: int) -> float:
    """Cantelli bound ``P(μ_Mᵀg_K <= 0) <= Var/(Var + E²)``, ``E = μ_trᵀμ_te > 0``; ``nan``: no certificate.

    Cantelli: ``P(X - E <= -E) <= Var/(Var + E²)`` for ``E > 0``, with ``X = μ_Mᵀg_K`` and
    ``Var`` from ``two_sample_variance``. ``E²`` is its unbiased estimate ``mu_cross_sq``.

    ``nan`` (the caller reports "no certificate") when
    - ``mu_cross <= 0``: for ``E <= 0`` the bound is ``1`` or undefined -- the training direction
      is not expected to align at all, so there is nothing to certify;
    - ``mu_cross_sq <= 0``: ``E`` is not detected above noise;
    - the variance estimate is ``<= 0``: ``Var/(Var + E²)`` would be ``<= 0``, a claim of
      certainty the data do not support (unlike ``certificates``, which maps this case to
      ``B_exact = 0``);
    - any input is ``nan``.

    Same distribution (``μ_tr = μ_te = μ``, ``Σ_tr = Σ_te = Σ``): ``E = ‖μ‖²``, ``E² = ‖μ‖⁴`` and
    ``Var = μᵀΣμ (1/M + 1/K) + tr Σ²/(MK)``, Theorem 1's variance, so ``Var/(Var + ‖μ‖⁴) =
    1/(1 + ‖μ‖⁴/Var) = B_exact`` of ``certificates`` (whenever both are finite and positive).
    """
    var = two_sample_variance(stats, M, K)
    if not (stats.mu_cross > 0 and stats.mu_cross_sq > 0 and var > 0):
        return math.nan
    return var / (var + stats.mu_cross_sq)
