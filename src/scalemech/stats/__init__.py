"""Alignment statistics of activation gradients from their Gram matrix.

Defines the estimators of docs/science.md §3-§4 (Paper W, Zhang et al. 2026, "the effective
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
- ``TwoSampleStats`` / ``two_sample_variance`` / ``two_sample_certificate``: Theorem 1 for train
  and test rows from different distributions (docs/science.md §7), unbiased from ``C = Q_tr Q_teᵀ``;
- ``offdiag_ratio`` / ``offdiag_null`` / ``correlation``: the covariance-structure check of
  Paper D (claim D1) on a small pooled view; ``offdiag_energy`` / ``offdiag_ratio_unbiased`` /
  ``offdiag_null_unbiased``: the same with unbiased U-statistics in place of the plug-in ``Σ̂``
  (whose ratio is biased up, about 0.5 for a diagonal population at ``p = n``).

U-statistics: Hoeffding (1948), "A class of statistics with asymptotically normal
distribution". Jackknife: Efron & Stein (1981); subsampling: Politis & Romano (1994).

Degenerate estimates are reported, never clipped: a ratio ``num/den`` is ``num/den`` when the
denominator estimate is positive (so a negative ``‖μ‖⁴`` estimate -- the mean is not detected
above noise -- gives a negative ``d``), ``+inf`` when the denominator estimate is ``<= 0`` and the
numerator is positive (no detectable spread), and ``nan`` when both are ``<= 0``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from statistics import NormalDist

import numpy as np
import torch
from torch import Tensor

FIELDS = ("mu_sq", "mu_four", "mu_sigma_mu", "tr_sigma_sq", "d_par", "d_2", "d_align")
"""Estimated quantities, in the order of the last axis of ``_estimates``."""

Rows = Tensor | np.ndarray | Iterable[Tensor | np.ndarray]


# ----------------------------------------------------------------------------- Gram matrix

_CHUNK_BYTES = 4 * 2**20
"""Float64 bytes of the column chunk buffer(s) of ``cross_gram`` (``a``'s and ``b``'s rows together)."""
_MIN_CHUNK_COLUMNS = 32  # narrower chunks make the rank-c updates slow (BLAS)


def _chunk_columns(rows: int, chunk_size: int) -> int:
    """Columns per ``cross_gram`` chunk: ``chunk_size``, fewer if ``rows`` float64 rows exceed ``_CHUNK_BYTES``."""
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive number of columns; got {chunk_size}")
    return min(chunk_size, max(_MIN_CHUNK_COLUMNS, _CHUNK_BYTES // (8 * max(rows, 1))))


class _ChunkReader:
    """Column chunks ``x[:, start:stop]`` as float64 on ``device``, read into one reused buffer (a numpy or
    memory-mapped ``x`` of any float dtype is converted chunk by chunk, in one read); a float64 tensor
    already on ``device`` is sliced, not copied."""

    def __init__(self, x: Tensor | np.ndarray, columns: int, device: torch.device | str):
        self.x, self.device = x, torch.device(device)
        width = min(columns, x.shape[1])
        self.view_only = isinstance(x, Tensor) and x.dtype == torch.float64 and x.device == self.device
        if isinstance(x, np.ndarray):
            self.host = np.empty((x.shape[0], width), dtype=np.float64)
        self.buffer = (
            None if self.view_only else torch.empty(x.shape[0], width, dtype=torch.float64, device=self.device)
        )

    def __call__(self, start: int, stop: int) -> Tensor:
        if self.view_only:
            return self.x[:, start:stop]
        out = self.buffer[:, : stop - start]
        if isinstance(self.x, np.ndarray):
            host = self.host[:, : stop - start]
            np.copyto(host, self.x[:, start:stop])
            return out.copy_(torch.from_numpy(host)) if self.device.type != "cpu" else torch.from_numpy(host)
        return out.copy_(self.x[:, start:stop])


@torch.no_grad()
def cross_grams(
    a: Tensor | np.ndarray,
    others: Sequence[Tensor | np.ndarray | None],
    chunk_size: int = 8192,
    device: torch.device | str = "cpu",
) -> list[Tensor]:
    """``[a bᵀ for b in others]`` (``b = a`` where None), float64, in one pass over column chunks of
    at most ``chunk_size`` features and at most ``_CHUNK_BYTES`` (4 MiB) of float64 for the rows of
    ``a`` and the ``others`` together: each chunk of each operand is read once (a numpy/memmap slice
    of any float dtype converted there) into one reused float64 buffer per operand on ``device``.
    Peak memory: the products, ``8·n_a·n_b`` each, + those buffers (+ BLAS's own)."""
    distinct = [b for b in others if b is not None]
    columns = _chunk_columns(a.shape[0] + sum(b.shape[0] for b in distinct), chunk_size)
    read_a = _ChunkReader(a, columns, device)
    readers = [read_a if b is None else _ChunkReader(b, columns, device) for b in others]
    products = [
        torch.zeros(a.shape[0], (a if b is None else b).shape[0], dtype=torch.float64, device=device) for b in others
    ]
    for start in range(0, a.shape[1], columns):
        stop = min(start + columns, a.shape[1])
        a_chunk = read_a(start, stop)  # (n_a, c)
        for product, read_b in zip(products, readers):
            product.addmm_(a_chunk, (a_chunk if read_b is read_a else read_b(start, stop)).T)
    return products


def cross_gram(
    a: Tensor | np.ndarray,
    b: Tensor | np.ndarray | None = None,
    chunk_size: int = 8192,
    device: torch.device | str = "cpu",
) -> Tensor:
    """``C = a bᵀ`` (``b = a`` when None), float64, summed over column chunks (``cross_grams``)."""
    return cross_grams(a, [b], chunk_size, device)[0]


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
            raise ValueError(
                f"row block {len(kept)} has D = {block.shape[1]}; earlier blocks have D = {kept[0].shape[1]}"
            )
        if device is None:
            device = block.device if isinstance(block, Tensor) else "cpu"
        kept.append(block)
        pieces.append(
            torch.cat(
                [cross_gram(block, None if earlier is block else earlier, chunk_size, device) for earlier in kept],
                dim=1,
            )
        )
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


# ----------------------------------------------------------------------------- intervals


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


UCB_LEVEL = 0.95
"""One-sided level of the upper confidence bounds (``upper_bounds``, ``TwoSampleBounds``)."""


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


# ----------------------------------------------------------------------------- two-sample certificate

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
