"""Empirical misalignment probability of train/test gradient draws (E6, Paper W Theorem 1).

Draw ``M`` rows ``I`` of the train pool and ``K`` rows ``J`` of the test pool (each without
replacement). With the cross-Gram ``C = Q_tr Q_teᵀ``,

    μ_Mᵀ g_K = (1/(M K)) Σ_{i∈I} Σ_{j∈J} C_ij,

so ``C`` is formed once (float64, from the stored ``GradientPool``s) and each draw costs a sum
over a sub-block. ``block_means`` does ``R`` draws for a whole ``(M, K)`` grid at once:

- a draw is a uniformly random *ordered* subset of ``M_max`` rows and one of ``K_max`` columns;
  its first ``M`` rows (``K`` columns) are then a uniform ``M``-subset, so one draw serves every
  grid cell (common random numbers: cells are correlated, each cell's draws are independent);
- ``U = S_I C`` (row sums over the draw's rows, nested prefixes): a sparse 0/1 indicator of each
  draw's rows times ``C``, one cache-sized column slab at a time (long prefixes as one dense
  product), then a gather of the draw's columns and a cumulative sum give every ``(M, K)`` corner.

Cost ``R·M_max·n_te`` additions (rows and columns are swapped when that is cheaper). The
misalignment probability ``P(μ_Mᵀ g_K <= 0)`` gets a Wilson score interval (Wilson 1927) and sits
beside the Cantelli certificates: the two-sample ``B_exact`` from the cross-Gram (train and test
pools may come from different distributions: ``stats.TwoSampleStats``), and the one-sample
``B_exact``, ``B_align`` of the train pool (``stats.certificates``, which assume one common μ).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from statsmodels.stats.proportion import proportion_confint
from torch import Tensor
from tqdm.auto import tqdm

from .. import stats
from ..core.seeding import derive_seed, model_identity
from ..core.tables import columns
from ..data.store import SPLITS
from ..gradients.pools import GradientPool, PoolError, measured_points, pool_path
from ..gradients.views import VIEWS

DRAW_CHUNK = 2048  # draws per chunk (fixed: the random stream, hence the result, does not depend on memory)
SLAB_BYTES = 2**19
"""``block_means`` adds rows of ``C`` column slab by column slab (n × w float64, about this many bytes),
so the slab stays in a core's L2 cache while every draw of the chunk adds its rows of it."""
MAX_SLABS = 64  # wider slabs beyond this count: each slab costs one sparse product call per prefix segment
DENSE_SHARE = 0.25
"""A prefix segment of at least this share of ``C``'s rows is summed as a dense 0/1 indicator matrix times
``C`` (one BLAS product, ``n`` multiply-adds a column); a shorter one as a sparse (CSR) indicator times
``C`` (only its rows added, at about a quarter of BLAS's speed per addition)."""


def wilson_interval(successes: int, trials: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval ``(p̂ + z²/2R ∓ z·sqrt(p̂(1-p̂)/R + z²/4R²)) / (1 + z²/R)``: statsmodels'
    ``proportion_confint(method="wilson")``, its bounds clipped to [0, p̂] and [p̂, 1] (the interval
    holds p̂; at 0 or R successes the computed bound misses 0 or 1 by a rounding error)."""
    if trials < 1 or not 0 <= successes <= trials:
        raise ValueError(f"need 0 <= successes <= trials and trials >= 1; got {successes} of {trials}")
    lo, hi = proportion_confint(successes, trials, alpha=1 - level, method="wilson")
    p = successes / trials
    return min(max(float(lo), 0.0), p), max(min(float(hi), 1.0), p)


def ordered_subsets(draws: int, n: int, size: int, generator: torch.Generator) -> Tensor:
    """``(draws, size)`` indices: each row a uniformly random ordered subset of ``range(n)``.

    A partial Fisher–Yates shuffle of ``range(n)`` per draw, vectorised over draws: step ``i`` swaps
    position ``i`` with a uniform position in ``[i, n)``, so the first ``size`` positions hold a
    uniformly random ordered ``size``-subset and every prefix is a uniform subset. The positions are
    ``i + ⌊u·(n − i)⌋`` for float64 uniforms ``u`` from ``generator`` (each probability within
    ``2⁻⁵³`` of ``1/(n − i)``). Work: ``size`` steps over ``draws``; memory ``4·n·draws`` bytes.
    """
    if not 0 <= size <= n:
        raise ValueError(f"need 0 <= size <= n; got size {size}, n = {n}")
    step = np.arange(size)[:, None]  # (size, 1)
    uniform = torch.rand(size, draws, dtype=torch.float64, generator=generator).numpy()  # (size, draws)
    targets = np.minimum(np.floor(uniform * (n - step)).astype(np.int64) + step, n - 1)  # row i in [i, n)
    targets = targets * draws + np.arange(draws)  # flat indices into perm
    perm = np.repeat(np.arange(n, dtype=np.int32), draws)  # (n, draws) flat: position × draw
    out = np.empty((size, draws), dtype=np.int32)
    for i in range(size):  # numpy: ~10x less overhead per step than torch for these small gathers
        out[i] = perm[targets[i]]
        perm[targets[i]] = perm[i * draws : (i + 1) * draws]  # position i is not read again
    return torch.from_numpy(np.ascontiguousarray(out.T, dtype=np.int64))


def _row_sum_cost(n_sum: int, n_other: int, sizes: Sequence[int]) -> float:
    """Relative cost of ``block_means``'s running sums over ``n_sum`` rows of ``C`` for prefixes ``sizes``."""
    segments = [stop - start for start, stop in zip([0, *sizes[:-1]], sizes)]
    return n_other * sum(min(segment, DENSE_SHARE * n_sum) for segment in segments)


def _sorted_rows(segment: Tensor) -> Tensor:
    """``segment`` (R, s) sorted along each row, int32 (numpy's vectorised sort on CPU)."""
    if segment.device.type == "cpu":
        return torch.from_numpy(np.sort(segment.numpy().astype(np.int32), axis=1))
    return segment.int().sort(1).values


class _Slabs:
    """``C`` (n × m, float64) for ``block_means``'s row sums: column slabs ``(S, n, w)`` (``SLAB_BYTES``,
    at most ``MAX_SLABS``, the last one zero-padded) for the sparse path, ``C`` itself for the dense one."""

    def __init__(self, C: Tensor):
        n, m = C.shape
        width = min(max(8, SLAB_BYTES // (8 * n) // 8 * 8, -(-m // MAX_SLABS)), m)
        count = -(-m // width)
        self.C, self.n, self.m, self.width, self.count = C, n, m, width, count
        self.slabs = F.pad(C, (0, count * width - m)).reshape(n, count, width).transpose(0, 1).contiguous()

    def add_row_sums(self, sums: Tensor, segment: Tensor) -> None:
        """``sums`` (S, R, w) += ``Σ_{i ∈ segment[r]} C[i]`` for every draw ``r``, slab by slab."""
        draws, size = segment.shape
        if size >= DENSE_SHARE * self.n:
            indicator = torch.zeros(draws, self.n, dtype=sums.dtype, device=sums.device).scatter_(1, segment, 1.0)
            full = F.pad(indicator @ self.C, (0, self.count * self.width - self.m))  # (R, S·w)
            sums += full.view(draws, self.count, self.width).transpose(0, 1)
            return
        with warnings.catch_warnings():  # "sparse CSR tensor support is in beta state"
            warnings.simplefilter("ignore", UserWarning)
            indicator = torch.sparse_csr_tensor(  # (R, n): ones at segment[r] in row r
                torch.arange(0, draws * size + 1, size, dtype=torch.int32, device=sums.device),
                _sorted_rows(segment).reshape(-1),
                torch.ones(draws * size, dtype=sums.dtype, device=sums.device),
                (draws, self.n),
            )
        _for_each_slab(self.count, lambda q: sums[q].addmm_(indicator, self.slabs[q]), sums.device)


def _for_each_slab(count: int, work: Callable[[int], object], device: torch.device) -> None:
    """``work(q)`` for ``q`` in ``range(count)``; on CPU split across ``torch.get_num_threads()`` Python threads
    that each run their (BLAS) calls single-threaded: one join per call instead of a parallel region per
    slab, whose barriers cost a scheduler time slice each whenever the cores are shared."""
    threads = min(torch.get_num_threads(), count) if device.type == "cpu" else 1
    if threads <= 1:
        for q in range(count):
            work(q)
        return

    def run(first: int) -> None:
        torch.set_num_threads(1)
        for q in range(first, count, threads):
            work(q)

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(run, range(threads)))
    finally:
        torch.set_num_threads(before)


def _block_means(
    C: _Slabs, rows: Tensor, cols: Tensor, Ms: Sequence[int], Ks: Sequence[int], sums: Tensor | None = None
) -> Tensor:
    """``block_means`` of the slabbed ``C``, summing over its rows first (into ``sums``, zeroed here, if given)."""
    draws = rows.shape[0]
    device, dtype = C.slabs.device, C.slabs.dtype
    out = torch.empty(draws, len(Ms), len(Ks), dtype=dtype, device=device)
    shape = (C.count, draws, C.width)  # 1_Iᵀ C, slab by slab
    sums = sums.zero_() if sums is not None and sums.shape == shape else torch.zeros(shape, dtype=dtype, device=device)
    picked = cols[:, : Ks[-1]]
    at = (
        (picked // C.width) * (draws * C.width)
        + picked % C.width
        + torch.arange(0, draws * C.width, C.width, device=device)[:, None]
    )  # (R, K_max): picked[r, k] in sums
    K_index = torch.as_tensor(Ks, device=device) - 1
    K_sizes = torch.as_tensor(Ks, dtype=dtype, device=device)
    done = 0
    for a, M in enumerate(Ms):
        if M > done:
            C.add_row_sums(sums, rows[:, done:M])
        done = M
        corner_sums = sums.view(-1)[at].cumsum(1)[:, K_index]  # (R, len(Ks))
        out[:, a] = corner_sums / (M * K_sizes)
    return out


def block_means(C: Tensor, rows: Tensor, cols: Tensor, Ms: Sequence[int], Ks: Sequence[int]) -> Tensor:
    """``(R, len(Ms), len(Ks))``: ``mean(C[rows[r, :M]][:, cols[r, :K]])`` for every draw and cell.

    ``rows`` (R, ≥max Ms) and ``cols`` (R, ≥max Ks) index ``C`` (n_tr × n_te); ``Ms``, ``Ks`` ascending.
    The row sums ``1_Iᵀ C`` of all draws (R × n_te) grow segment by segment of the nested prefixes
    as a 0/1 indicator matrix times ``C``: sparse (CSR), column slab by column slab so that each
    slab is read from cache (``SLAB_BYTES``), or dense for a long segment (``DENSE_SHARE``). A
    gather of each draw's columns and a cumulative sum then give every ``(M, K)`` corner. Rows
    and columns are swapped when that is cheaper.
    """
    if _row_sum_cost(*C.shape, Ms) > _row_sum_cost(*reversed(C.shape), Ks):
        return _block_means(_Slabs(C.T), cols, rows, Ks, Ms).transpose(1, 2)
    return _block_means(_Slabs(C), rows, cols, Ms, Ks)


def misalignment_draws(
    C: Tensor, grid: Sequence[tuple[int, int]], draws: int, seed: int
) -> dict[tuple[int, int], Tensor]:
    """``{(M, K): (draws,) values of μ_Mᵀ g_K}`` from the cross-Gram ``C`` (seeded, deterministic).

    Chunks of ``DRAW_CHUNK`` draws, each: ``ordered_subsets`` of the train rows, then of the test
    columns (one generator, in that order), then ``block_means`` (``C`` is cut into slabs once).
    """
    n_train, n_test = C.shape
    bad = [(M, K) for M, K in grid if not (1 <= M <= n_train and 1 <= K <= n_test)]
    if bad:
        raise ValueError(f"(M, K) = {bad} outside the pools: need 1 <= M <= {n_train}, 1 <= K <= {n_test}")
    Ms, Ks = sorted({M for M, _ in grid}), sorted({K for _, K in grid})
    transpose = _row_sum_cost(n_train, n_test, Ms) > _row_sum_cost(n_test, n_train, Ks)
    slabs = _Slabs(C.T if transpose else C)
    sums = torch.empty(slabs.count, min(DRAW_CHUNK, draws), slabs.width, dtype=C.dtype, device=C.device)  # reused
    generator = torch.Generator().manual_seed(seed)
    chunks = []
    for start in range(0, draws, DRAW_CHUNK):
        size = min(DRAW_CHUNK, draws - start)
        rows = ordered_subsets(size, n_train, Ms[-1], generator).to(C.device)
        cols = ordered_subsets(size, n_test, Ks[-1], generator).to(C.device)
        chunks.append(
            _block_means(slabs, cols, rows, Ks, Ms, sums).transpose(1, 2)
            if transpose
            else _block_means(slabs, rows, cols, Ms, Ks, sums)
        )
    values = torch.cat(chunks)  # (draws, len(Ms), len(Ks))
    return {(M, K): values[:, Ms.index(M), Ks.index(K)] for M, K in grid}


def alignment_moments(dalign: pd.DataFrame) -> dict[tuple[str, str, str], stats.AlignmentStats]:
    """``{(point, view, split): AlignmentStats}`` from a model's ``dalign`` rows (the moments
    ``measure`` estimated, so no second Gram pass is needed)."""
    return {
        (row["point"], row["view"], row["split"]): stats.AlignmentStats.from_moments(
            row["n"], row["dim"], row["mu_sq"], row["mu_four"], row["mu_sigma_mu"], row["tr_sigma_sq"]
        )
        for row in dalign.to_dict("records")
    }


def measured_in_both(pool_dir: str | Path, dalign: pd.DataFrame, views: Sequence[str]) -> list[str]:
    """The points whose pools ``pool_dir`` holds, each checked to have its ``dalign`` train rows;
    ``PoolError`` naming the first missing pair (pools left from another ``points`` setting)."""
    points = measured_points(pool_dir)
    rows = set(zip(dalign["point"], dalign["view"], dalign["split"]))
    for point in points:
        for view in views:
            if (point, view, "train") not in rows:
                raise PoolError(
                    f"{pool_path(pool_dir, 'train', point, view)}: a pool of point {point!r} ({view} view) that the "
                    f"dalign table does not list (it has {sorted({p for p, _, _ in rows})}); the pools are stale from "
                    "another measure.points: rerun the measurement (snakemake --forcerun measure_model)"
                )
    return points


def misalignment(
    pool_dir: str | Path,
    keys: dict[str, Any],
    dalign: pd.DataFrame,
    *,
    sizes: Sequence[int],
    draws: int,
    seed: int,
    views: Sequence[str] = VIEWS,
    device: torch.device | str = "cpu",
    level: float = 0.95,
    interval_level: float = 0.9,
) -> pd.DataFrame:
    """The ``misalignment`` table from the pools ``measure`` stored in ``pool_dir`` (its points are
    read from the pools), over the grid of every ``(M, K)`` pair of ``sizes``.

    One row per point × view × ``(M, K)``: ``p_misalign`` over ``draws`` draws with its Wilson
    interval at ``level`` (P refers to draws from this model's own train and test pools), the
    two-sample certificate ``b_exact`` (``stats.two_sample_certificate``: train and test may differ;
    NaN where the estimate of ``E = μ_trᵀμ_te`` is ≤ 0: no certificate) with ``mu_cross``, the
    estimate of ``E``, and the one-sample ``b_exact_common``, ``b_align`` from the moments
    ``measure`` estimated on the train pool (``dalign``, the model's rows of that table).

    The population-level evidence (``P̂`` describes the two fixed pools only), from the two-sample
    jackknife of ``C`` (``stats.TwoSampleBounds``): ``mu_cross_se`` and the two-sided
    ``interval_level`` interval ``mu_cross_lo``/``mu_cross_hi`` of ``E``, and ``b_exact_ucb``, the
    one-sided 95 % upper confidence bound of the two-sample certificate; ``v_mk``, the estimate of
    ``V(M, K) = Var(μ_Mᵀg_K)`` (``stats.two_sample_variance``), so that ``E/√V`` is read with its sign.
    """
    moments = alignment_moments(dalign)
    grid = [(M, K) for M in sizes for K in sizes]
    rows = []
    for point in tqdm(measured_in_both(pool_dir, dalign, views), desc="misalignment"):
        for view in views:
            pools = {split: GradientPool(pool_path(pool_dir, split, point, view)) for split in SPLITS}
            C = pools["train"].gram(pools["test"], device=device)
            values = misalignment_draws(C, grid, draws, derive_seed(seed, model_identity(keys), point, view))
            jackknife = stats.TwoSampleBounds.from_cross(C)
            two_sample = jackknife.stats
            mu_cross_se, mu_cross_lo, mu_cross_hi = jackknife.mu_cross_interval(interval_level)
            for (M, K), value in values.items():
                misaligned = int((value <= 0).sum())
                p_lo, p_hi = wilson_interval(misaligned, draws, level)
                common = stats.certificates(moments[point, view, "train"], M, K)
                rows.append(
                    {
                        **keys,
                        "point": point,
                        "point_index": pools["train"].meta["point_index"],
                        "view": view,
                        "M": M,
                        "K": K,
                        "draws": draws,
                        "p_misalign": misaligned / draws,
                        "p_lo": p_lo,
                        "p_hi": p_hi,
                        "b_exact": stats.two_sample_certificate(two_sample, M, K),
                        "b_exact_ucb": jackknife.certificate_ucb(M, K),
                        "b_exact_common": common.b_exact,
                        "b_align": common.b_align,
                        "mu_cross": two_sample.mu_cross,
                        "mu_cross_se": mu_cross_se,
                        "mu_cross_lo": mu_cross_lo,
                        "mu_cross_hi": mu_cross_hi,
                        "v_mk": stats.two_sample_variance(two_sample, M, K),
                    }
                )
    return pd.DataFrame(rows, columns=columns("misalignment"))
