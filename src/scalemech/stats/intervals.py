"""Intervals of the ``FIELDS`` estimates from the Gram matrix alone: delete-one jackknife or subsampling,
and one-sided upper confidence bounds (``upper_bounds``)."""

from __future__ import annotations

import math
from dataclasses import asdict
from statistics import NormalDist

import torch
from torch import Tensor

from .levels import UCB_LEVEL
from .moments import FIELDS, AlignmentStats, _check_gram, _estimates, leave_one_out_u, u_statistics


def _jackknife_se(loo: Tensor) -> Tensor:
    """``se = sqrt((n-1)/n Σ_m (θ_(m) - θ̄)²)`` over leave-one-out values ``loo`` (n, k) -> (k,)."""
    n = loo.shape[0]
    return ((n - 1) / n * ((loo - loo.mean(0)) ** 2).sum(0)).sqrt()


def jackknife_se(G: Tensor) -> Tensor:
    """``(7,)`` delete-one jackknife standard errors of the ``FIELDS`` estimates of Gram matrix ``G``;
    ``nan`` where the estimate or a leave-one-out value is not finite (the data do not bound it)."""
    G = _check_gram(G, min_n=5)
    loo = _estimates(leave_one_out_u(G))  # (n, 7)
    finite = torch.isfinite(loo).all(0) & torch.isfinite(_estimates(u_statistics(G)))
    return torch.where(finite, _jackknife_se(loo), math.nan)


def _jackknife(G: Tensor, point: Tensor, z: float) -> tuple[Tensor, Tensor]:
    """``point ∓ z·se`` with the jackknife ``se`` of ``jackknife_se``."""
    se = jackknife_se(G)
    return point - z * se, point + z * se


def _subsample(G: Tensor, point: Tensor, level: float, draws: int, size: int, seed: int) -> tuple[Tensor, Tensor]:
    """Basic subsampling interval from ``draws`` subsets of ``size`` rows drawn without replacement.

    With ``Δ = θ_b - θ̂`` and ``c = sqrt(b/(n-b))`` (for a root-n statistic
    ``Var Δ ≈ σ²(1/b - 1/n)``): ``[θ̂ - c·Δ_{1-α/2}, θ̂ - c·Δ_{α/2}]``, ``α = 1 - level``.
    """
    n = G.shape[0]
    generator = torch.Generator().manual_seed(seed)
    subsets = torch.stack([torch.randperm(n, generator=generator)[:size] for _ in range(draws)]).to(G.device)
    per_batch = max(1, 2**22 // size**2)  # ~32 MiB of sub-Grams at a time
    values = torch.cat(
        [
            _estimates(u_statistics(G[idx[:, :, None], idx[:, None, :]]))  # (batch, size, size)
            for idx in subsets.split(per_batch)
        ]
    )  # (draws, 7)
    finite = torch.isfinite(values).all(0) & torch.isfinite(point)
    alpha = 1 - level
    shifts = torch.quantile(
        torch.nan_to_num(values - point),
        torch.tensor([alpha / 2, 1 - alpha / 2], dtype=values.dtype, device=G.device),
        dim=0,
    )
    scale = math.sqrt(size / (n - size))
    return (
        torch.where(finite, point - scale * shifts[1], math.nan),
        torch.where(finite, point - scale * shifts[0], math.nan),
    )


def alignment_intervals(
    G: Tensor,
    dim: int,
    level: float = 0.9,
    method: str = "jackknife",
    *,
    draws: int = 200,
    subsample_size: int | None = None,
    seed: int = 0,
) -> dict[str, tuple[float, float]]:
    """Two-sided ``level`` intervals for every quantity in ``FIELDS``, from the Gram matrix only.

    - ``"jackknife"`` (default; deterministic, O(n²) via ``leave_one_out_u``, n >= 5):
      ``θ̂ ± z_{(1+level)/2} · se_jack``, centred on the point estimate.
    - ``"subsample"``: ``draws`` subsets of ``subsample_size`` (default ``n // 2``) distinct rows,
      basic interval rescaled to n (see ``_subsample``); costs ``draws · O(b²)``.

    Resampling with replacement is not offered: a repeated row turns some ``G_ij`` into
    ``‖q_i‖²`` and biases the U-statistics. An interval is ``(nan, nan)`` when the estimate or any
    replicate value is not finite (a denominator estimate ``<= 0`` somewhere): the data do not
    bound it then.
    ``dim`` is not needed (intervals depend on ``G`` only); it mirrors ``stats_from_gram(G, dim)``.
    Returns ``{name: (lo, hi)}``; ``table_row`` flattens it to ``name_lo``/``name_hi``.
    """
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1); got {level}")
    G = _check_gram(G, min_n=5)
    point = _estimates(u_statistics(G))  # (7,)
    if method == "jackknife":
        lo, hi = _jackknife(G, point, NormalDist().inv_cdf((1 + level) / 2))
    elif method == "subsample":
        n = G.shape[0]
        size = n // 2 if subsample_size is None else subsample_size
        if not 4 <= size < n:
            raise ValueError(f"subsample_size must satisfy 4 <= size < n = {n}; got {size}")
        if draws < 2:
            raise ValueError(f"draws must be >= 2; got {draws}")
        lo, hi = _subsample(G, point, level, draws, size, seed)
    else:
        raise ValueError(f"method must be 'jackknife' or 'subsample'; got {method!r}")
    return {name: (low, high) for name, low, high in zip(FIELDS, lo.tolist(), hi.tolist())}


def _upper_z(level: float) -> float:
    """``z_level``, the one-sided normal quantile (``level`` in (0, 1))."""
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1); got {level}")
    return NormalDist().inv_cdf(level)


def _ratio_bound(mu_sq_hi: float, denominator_lo: float) -> float:
    """``max(‖μ‖²⁺, 0)² / den⁻``: an upper bound of ``‖μ‖⁴/den`` from an upper bound of ``‖μ‖² >= 0`` and a
    lower bound of ``den > 0``; ``+inf`` when ``den⁻ <= 0`` (the data do not bound it), ``nan`` if not finite."""
    if not (math.isfinite(mu_sq_hi) and math.isfinite(denominator_lo)):
        return math.nan
    return max(mu_sq_hi, 0.0) ** 2 / denominator_lo if denominator_lo > 0 else math.inf


def _mu_sq_upper(mu_sq: float, se: float, beta: float) -> float:
    """One-sided ``β`` upper bound of ``‖μ‖²``: ``μ̂² + z·se + (z·se)² / (4·max(μ̂², z·se))``, ``z = z_β``.

    The delta-method bound on the ``‖μ‖`` scale, ``(√μ̂² + z·se/(2√μ̂²))²``, expanded; its last term is
    capped at ``z·se/4`` where ``‖μ‖²`` is not resolved (``μ̂² < z·se``). The plain ``μ̂² + z·se``
    undercovers there: the jackknife se (about ``2√(μ̂ᵀΣμ̂/n)``) is small exactly when ``μ̂`` came out short.
    """
    step = _upper_z(beta) * se
    return mu_sq + step + step**2 / (4 * max(mu_sq, step)) if math.isfinite(step) else math.nan


def upper_bounds(G: Tensor, level: float = UCB_LEVEL) -> dict[str, float]:
    """One-sided ``level`` upper confidence bounds, with jackknife standard errors (``jackknife_se``).

    ``θ⁻_β = θ̂ - z_β·se`` is a one-sided ``β`` lower bound, ``‖μ‖²⁺_β`` the upper bound of ``_mu_sq_upper``;
    ``α = 1 - level``.

    - ``mu_sq_ucb = ‖μ‖²⁺_level``;
    - ``d_2_ucb = max(‖μ‖²⁺, 0)² / (tr Σ²)⁻``, both at ``β = 1 - α/2``;
    - ``d_align_ucb = max(‖μ‖²⁺, 0)² / max((tr Σ²)⁻, (μᵀΣμ)⁻)``, all three at ``β = 1 - α/3``: since
      ``d_align = min(‖μ‖⁴/μᵀΣμ, ‖μ‖⁴/tr Σ²)``.

    Each holds with probability ``>= level`` by the union bound over its parts (Bonferroni). The
    ratios are bounded through ``‖μ‖²`` rather than by the jackknife of the ratio, whose skewed
    sampling distribution makes ``d̂ + z·se`` undercover when the signal is weak. ``+inf`` where the
    denominator's lower bound is ``<= 0``; ``nan`` where a needed ``se`` is (a non-finite leave-one-out
    value). ``d_2_se``, ``d_align_se``: the jackknife se of the estimates themselves (description).
    """
    point = dict(zip(FIELDS, _estimates(u_statistics(_check_gram(G, min_n=5))).tolist()))
    se = dict(zip(FIELDS, jackknife_se(G).tolist()))

    def lower(name: str, beta: float) -> float:
        return point[name] - _upper_z(beta) * se[name]

    def mu_sq_upper(beta: float) -> float:
        return _mu_sq_upper(point["mu_sq"], se["mu_sq"], beta)

    half, third = 1 - (1 - level) / 2, 1 - (1 - level) / 3
    return {
        "mu_sq_se": se["mu_sq"],
        "mu_sq_ucb": mu_sq_upper(level),
        "d_2_se": se["d_2"],
        "d_2_ucb": _ratio_bound(mu_sq_upper(half), lower("tr_sigma_sq", half)),
        "d_align_se": se["d_align"],
        "d_align_ucb": _ratio_bound(mu_sq_upper(third), max(lower("tr_sigma_sq", third), lower("mu_sigma_mu", third))),
    }


def table_row(stats: AlignmentStats, intervals: dict[str, tuple[float, float]]) -> dict[str, float]:
    """One flat row: the fields of ``stats`` plus ``{name}_lo``, ``{name}_hi`` per interval."""
    row = asdict(stats)
    for name, (low, high) in intervals.items():
        row[f"{name}_lo"], row[f"{name}_hi"] = low, high
    return row
