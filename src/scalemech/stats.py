"""Alignment statistics of activation gradients from their Gram matrix.

Defines the estimators of PAPERS.md §3-§4 (Paper W, Zhang et al. 2026, "the effective
alignment dimension"): given ``n`` i.i.d. rows ``q_i`` (per-example activation gradients,
flattened to ``R^D``) with mean ``mu`` and covariance ``Sigma``,

- ``gram``: ``G = Q Qᵀ`` (n×n, float64 accumulation), never a D×D matrix;
- ``u_statistics``: the four U-statistics U1..U4 of ``G`` in O(n²);
- ``stats_from_gram`` / ``alignment_stats``: ``‖μ‖²``, ``‖μ‖⁴``, ``μᵀΣμ``, ``tr Σ²`` and
  ``d_par = ‖μ‖⁴/μᵀΣμ``, ``d_2 = ‖μ‖⁴/tr Σ²``, ``d_align = min(d_par, d_2)``;
- ``alignment_intervals``: delete-one jackknife (default) or subsampling-without-replacement
  intervals, computed from ``G`` alone (a with-replacement bootstrap would pair an example
  with itself and bias the U-statistics);
- ``certificates``: Theorem 1's Cantelli bounds ``B_exact <= B_align`` for ``(M, K)`` draws;
- ``offdiag_ratio`` / ``offdiag_null`` / ``correlation``: the covariance-structure check of
  Paper D (claim D1) on a small pooled view.

U-statistics: Hoeffding (1948), "A class of statistics with asymptotically normal
distribution". Jackknife: Efron & Stein (1981); subsampling: Politis & Romano (1994).

Degenerate estimates are reported, never clipped: a ratio ``num/den`` is ``num/den`` when the
denominator estimate is positive (so a negative ``‖μ‖⁴`` estimate -- the mean is not detected
above noise -- gives a negative ``d``), ``+inf`` when the denominator estimate is ``<= 0`` and the
numerator is positive (no detectable spread), and ``nan`` when both are ``<= 0``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from statistics import NormalDist

import numpy as np
import torch
from torch import Tensor

FIELDS = ("mu_sq", "mu_four", "mu_sigma_mu", "tr_sigma_sq", "d_par", "d_2", "d_align")
"""Estimated quantities, in the order of the last axis of ``_estimates``."""

Rows = Tensor | np.ndarray | Iterable[Tensor | np.ndarray]


# ----------------------------------------------------------------------------- Gram matrix

def _float64(x: Tensor | np.ndarray, device: torch.device | str | None) -> Tensor:
    """``x`` as a float64 tensor on ``device`` (a numpy/memmap slice is read here)."""
    x = torch.from_numpy(np.array(x, dtype=np.float64)) if isinstance(x, np.ndarray) else x  # one read, owned
    return x.to(device=device, dtype=torch.float64)


@torch.no_grad()
def cross_gram(a: Tensor | np.ndarray, b: Tensor | np.ndarray | None = None, chunk_size: int = 8192,
               device: torch.device | str = "cpu") -> Tensor:
    """``C = a bᵀ`` (``b = a`` when None), float64, summed over column chunks of ``chunk_size`` features,
    so only a chunk of each (possibly memory-mapped) operand is on ``device`` at a time."""
    cross = torch.zeros(a.shape[0], (a if b is None else b).shape[0], dtype=torch.float64, device=device)
    for start in range(0, a.shape[1], chunk_size):
        a_chunk = _float64(a[:, start:start + chunk_size], device)  # (n_a, c)
        b_chunk = a_chunk if b is None else _float64(b[:, start:start + chunk_size], device)  # (n_b, c)
        cross.addmm_(a_chunk, b_chunk.T)
    return cross


def _flat(rows: Tensor | np.ndarray) -> Tensor | np.ndarray:
    """``(b, *shape)`` rows as ``(b, D)``."""
    if rows.ndim < 2:
        raise ValueError(f"rows must have shape (n, D) or (n, *shape); got shape {tuple(rows.shape)}")
    return rows.reshape(rows.shape[0], -1)


@torch.no_grad()
def _gram_and_dim(Q: Rows, chunk_size: int, device: torch.device | str | None) -> tuple[Tensor, int]:
    """``(G, D)``; the work of ``gram``."""
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive number of columns; got {chunk_size}")
    if isinstance(Q, (Tensor, np.ndarray)):
        rows = _flat(Q)
        if device is None:
            device = rows.device if isinstance(rows, Tensor) else "cpu"
        return cross_gram(rows, None, chunk_size, device), rows.shape[1]

    kept: list[Tensor | np.ndarray] = []
    pieces: list[Tensor] = []  # pieces[k]: (b_k, b_0 + ... + b_k), block k against blocks 0..k
    for block in Q:
        block = _flat(block)
        if kept and block.shape[1] != kept[0].shape[1]:
            raise ValueError(f"row block {len(kept)} has D = {block.shape[1]}; "
                             f"earlier blocks have D = {kept[0].shape[1]}")
        if device is None:
            device = block.device if isinstance(block, Tensor) else "cpu"
        kept.append(block)
        pieces.append(torch.cat([cross_gram(block, None if earlier is block else earlier, chunk_size, device)
                                 for earlier in kept], dim=1))
    if not kept:
        raise ValueError("Q is an empty iterable of row blocks; need at least 4 rows")
    n = sum(block.shape[0] for block in kept)
    G = torch.zeros(n, n, dtype=torch.float64, device=device)
    end = 0
    for piece in pieces:
        start, end = end, end + piece.shape[0]
        G[start:end, :end] = piece
        G[:end, start:end] = piece.T
    return G, kept[0].shape[1]


def gram(Q: Rows, chunk_size: int = 8192, device: torch.device | str | None = None) -> Tensor:
    """The Gram matrix ``G = Q Qᵀ`` (n×n, float64) of ``n`` rows, built in chunks.

    ``Q`` is either

    - an array: a ``(n, D)`` (or ``(n, *shape)``) Tensor, numpy array or ``np.memmap``. ``G`` is
      summed over column chunks, ``G = Σ_c Q[:, c] Q[:, c]ᵀ``, in one read of ``Q``; only a
      chunk is ever copied to ``device``. Memory: ``8·n²`` + ``8·n·chunk_size`` bytes on
      ``device``. This is the out-of-core path: rows too large for memory go to an ``np.memmap``.
    - an iterable of row blocks ``(b_k, D)`` (e.g. batches from a gradient pass), consumed once.
      Each arriving block is multiplied with itself and with every earlier block, so the blocks
      are kept as given (their dtype and device): memory ``n·D·itemsize`` + ``8·n²`` bytes.

    Neither path forms a D×D matrix. ``device`` defaults to that of the (first) tensor, else CPU.
    """
    return _gram_and_dim(Q, chunk_size, device)[0]


# ----------------------------------------------------------------------------- U-statistics

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


def _offdiag(G: Tensor) -> Tensor:
    """A copy of ``G`` with its diagonal set to zero (leading batch axes allowed)."""
    offdiag = G.clone()
    offdiag.diagonal(dim1=-2, dim2=-1).zero_()
    return offdiag


def u_statistics(G: Tensor) -> Tensor:
    """``(U1, U2, U3, U4)`` of a Gram matrix ``(..., n, n)`` -> ``(..., 4)``, O(n²), n >= 4.

    Averages over distinct indices (unbiased for the moments of ``q``):
    ``U1 = avg_{i≠j} G_ij`` (``E = ‖μ‖²``), ``U2 = avg_{i≠j} G_ij²`` (``E = tr (Σ+μμᵀ)²``),
    ``U3 = avg_{i,j,k distinct} G_ij G_ik`` (``E = μᵀ(Σ+μμᵀ)μ``),
    ``U4 = avg_{i,j,k,l distinct} G_ij G_kl`` (``E = ‖μ‖⁴``).
    """
    G = _check_gram(G)
    offdiag = _offdiag(G)
    row_sums = offdiag.sum(-1)  # (..., n)
    return _u_from_sums(G.shape[-1], row_sums.sum(-1), (row_sums**2).sum(-1), (offdiag**2).sum((-2, -1)))


def leave_one_out_u(G: Tensor) -> Tensor:
    """``(n, 4)``: row ``m`` holds U1..U4 of ``G`` with row and column ``m`` removed, O(n²) total.

    With ``A = G - diag G``, ``r = A 1``, ``s_m = Σ_j A_mj²``, removing ``m`` gives
    ``S_m = S - 2 r_m``, ``Q_m = Q - 2 s_m``, ``R_m = R - r_m² - 2 (A r)_m + s_m``.
    """
    G = _check_gram(G, min_n=5)
    if G.ndim != 2:
        raise ValueError(f"G must be one (n, n) Gram matrix; got shape {tuple(G.shape)}")
    offdiag = _offdiag(G)
    row_sums = offdiag.sum(1)  # (n,)
    row_sq = (offdiag**2).sum(1)  # (n,)
    total, row_sq_sum, offdiag_sq_sum = row_sums.sum(), (row_sums**2).sum(), row_sq.sum()
    return _u_from_sums(
        G.shape[0] - 1,
        total - 2 * row_sums,
        row_sq_sum - row_sums**2 - 2 * (offdiag @ row_sums) + row_sq,
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
    def from_moments(cls, n: int, dim: int, mu_sq: float, mu_four: float, mu_sigma_mu: float,
                     tr_sigma_sq: float) -> AlignmentStats:
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


# ----------------------------------------------------------------------------- intervals

def _jackknife(G: Tensor, point: Tensor, z: float) -> tuple[Tensor, Tensor]:
    """``point ∓ z·se`` with ``se² = (n-1)/n Σ_m (θ_(m) - θ̄)²`` over leave-one-out values."""
    loo = _estimates(leave_one_out_u(G))  # (n, 7)
    n = loo.shape[0]
    se = ((n - 1) / n * ((loo - loo.mean(0)) ** 2).sum(0)).sqrt()
    finite = torch.isfinite(loo).all(0) & torch.isfinite(point)
    return torch.where(finite, point - z * se, math.nan), torch.where(finite, point + z * se, math.nan)


def _subsample(G: Tensor, point: Tensor, level: float, draws: int, size: int, seed: int) -> tuple[Tensor, Tensor]:
    """Basic subsampling interval from ``draws`` subsets of ``size`` rows drawn without replacement.

    With ``Δ = θ_b - θ̂`` and ``c = sqrt(b/(n-b))`` (for a root-n statistic
    ``Var Δ ≈ σ²(1/b - 1/n)``): ``[θ̂ - c·Δ_{1-α/2}, θ̂ - c·Δ_{α/2}]``, ``α = 1 - level``.
    """
    n = G.shape[0]
    generator = torch.Generator().manual_seed(seed)
    subsets = torch.stack([torch.randperm(n, generator=generator)[:size] for _ in range(draws)]).to(G.device)
    per_batch = max(1, 2**22 // size**2)  # ~32 MiB of sub-Grams at a time
    values = torch.cat([_estimates(u_statistics(G[idx[:, :, None], idx[:, None, :]]))  # (batch, size, size)
                        for idx in subsets.split(per_batch)])  # (draws, 7)
    finite = torch.isfinite(values).all(0) & torch.isfinite(point)
    alpha = 1 - level
    shifts = torch.quantile(torch.nan_to_num(values - point), torch.tensor([alpha / 2, 1 - alpha / 2],
                                                                           dtype=values.dtype, device=G.device), dim=0)
    scale = math.sqrt(size / (n - size))
    return (torch.where(finite, point - scale * shifts[1], math.nan),
            torch.where(finite, point - scale * shifts[0], math.nan))


def alignment_intervals(G: Tensor, dim: int, level: float = 0.9, method: str = "jackknife", *,
                        draws: int = 200, subsample_size: int | None = None,
                        seed: int = 0) -> dict[str, tuple[float, float]]:
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


def table_row(stats: AlignmentStats, intervals: dict[str, tuple[float, float]]) -> dict[str, float]:
    """One flat row: the fields of ``stats`` plus ``{name}_lo``, ``{name}_hi`` per interval."""
    row = asdict(stats)
    for name, (low, high) in intervals.items():
        row[f"{name}_lo"], row[f"{name}_hi"] = low, high
    return row


# ----------------------------------------------------------------------------- certificates

@dataclass(frozen=True)
class Certificates:
    """Theorem 1 of Paper W for train/test draws of sizes ``(M, K)`` (floats, or arrays on a grid)."""

    n_eff: float | np.ndarray  # M K / (M + K + 1)
    mean: float | np.ndarray  # E[μ_Mᵀ g_K] = ‖μ‖²
    var: float | np.ndarray  # Var(μ_Mᵀ g_K) = (1/M + 1/K) μᵀΣμ + tr Σ² / (M K)
    b_exact: float | np.ndarray  # 1 / (1 + ‖μ‖⁴ / var)
    b_align: float | np.ndarray  # 1 / (1 + n_eff d_align) >= b_exact


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
    n_eff = M_ * K_ / (M_ + K_ + 1)
    var = (1 / M_ + 1 / K_) * stats.mu_sigma_mu + stats.tr_sigma_sq / (M_ * K_)
    mu_four = torch.full_like(var, stats.mu_four)
    b_exact = _cantelli(_ratio(mu_four, var))
    b_align = _cantelli(n_eff * stats.d_align)
    mean = torch.full_like(var, stats.mu_sq)
    out = [x.numpy() if x.ndim else x.item() for x in (n_eff, mean, var, b_exact, b_align)]
    return Certificates(*out)


# ----------------------------------------------------------------------------- covariance structure (D1)

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
    if draws < 2:
        raise ValueError(f"draws must be >= 2; got {draws}")
    n, p = Q_pooled.shape
    generator = torch.Generator().manual_seed(seed)
    ratios = []
    for _ in range(draws):
        order = torch.rand(n, p, generator=generator).argsort(0).to(Q_pooled.device)  # (n, p)
        ratios.append(offdiag_ratio(Q_pooled.gather(0, order)))
    null = torch.tensor(ratios, dtype=torch.float64)
    return null.mean().item(), null.std().item()


def correlation(Q_pooled: Tensor) -> Tensor:
    """Correlation matrix ``Σ̂_ij / sqrt(Σ̂_ii Σ̂_jj)`` (p×p, float64); nan rows for constant units."""
    cov = _covariance(Q_pooled)
    sd = cov.diagonal().sqrt()
    return cov / (sd[:, None] * sd[None, :])
