"""Empirical misalignment probability of train/test gradient draws (E6, Paper W Theorem 1).

Draw ``M`` rows ``I`` of the train pool and ``K`` rows ``J`` of the test pool (each without
replacement). With the cross-Gram ``C = Q_tr Q_teᵀ``,

    μ_Mᵀ g_K = (1/(M K)) Σ_{i∈I} Σ_{j∈J} C_ij,

so ``C`` is formed once (float64, from the stored ``GradientPool``s) and each draw costs a sum
over a sub-block. ``block_means`` does ``R`` draws for a whole ``(M, K)`` grid at once:

- a draw is a uniformly random *ordered* subset of ``M_max`` rows and one of ``K_max`` columns;
  its first ``M`` rows (``K`` columns) are then a uniform ``M``-subset, so one draw serves every
  grid cell (common random numbers: cells are correlated, each cell's draws are independent);
- ``U = S_I C`` (row sums over the draw's rows, nested prefixes via ``embedding_bag``),
  then a gather of the draw's columns and a cumulative sum give every ``(M, K)`` corner.

Cost ``R·M_max·n_te`` additions (rows and columns are swapped when that is cheaper). The
misalignment probability ``P(μ_Mᵀ g_K <= 0)`` gets a Wilson score interval (Wilson 1927) and sits
beside the Cantelli certificates ``B_exact``, ``B_align`` (``stats.certificates``) estimated on the
train pool and, as a second row, on the test pool.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from statistics import NormalDist
from typing import Any

import pandas as pd
import torch
import torch.nn.functional as F
from torch import Tensor
from tqdm.auto import tqdm

from .. import stats
from ..grads import VIEWS, GradientPool, pool_path
from ..seeding import derive_seed, model_identity
from ..tables import columns

DRAW_CHUNK = 2048  # draws per chunk (fixed: the random stream, hence the result, does not depend on memory)


def wilson_interval(successes: int, trials: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval ``(p̂ + z²/2R ∓ z·sqrt(p̂(1-p̂)/R + z²/4R²)) / (1 + z²/R)``."""
    if trials < 1 or not 0 <= successes <= trials:
        raise ValueError(f"need 0 <= successes <= trials and trials >= 1; got {successes} of {trials}")
    z = NormalDist().inv_cdf((1 + level) / 2)
    p = successes / trials
    centre = p + z * z / (2 * trials)
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials))
    return (centre - half) / (1 + z * z / trials), (centre + half) / (1 + z * z / trials)


def ordered_subsets(draws: int, n: int, size: int, generator: torch.Generator) -> Tensor:
    """``(draws, size)`` indices: each row a uniformly random ordered subset of ``range(n)``.

    The ``size`` largest of ``n`` i.i.d. uniform keys, sorted: every prefix is a uniform subset.
    """
    return torch.rand(draws, n, generator=generator).topk(size, dim=1).indices


def block_means(C: Tensor, rows: Tensor, cols: Tensor, Ms: Sequence[int], Ks: Sequence[int]) -> Tensor:
    """``(R, len(Ms), len(Ks))``: ``mean(C[rows[r, :M]][:, cols[r, :K]])`` for every draw and cell.

    ``rows`` (R, ≥max Ms) and ``cols`` (R, ≥max Ks) index ``C`` (n_tr × n_te); ``Ms``, ``Ks`` ascending.
    """
    if rows.shape[1] * C.shape[1] > cols.shape[1] * C.shape[0]:  # sum over the cheaper side first
        return block_means(C.T.contiguous(), cols, rows, Ks, Ms).transpose(1, 2)
    out = torch.empty(rows.shape[0], len(Ms), len(Ks), dtype=C.dtype, device=C.device)
    row_sums = torch.zeros(rows.shape[0], C.shape[1], dtype=C.dtype, device=C.device)  # (R, n_te): 1_Iᵀ C
    K_index = torch.as_tensor(Ks, device=C.device) - 1
    done = 0
    for a, M in enumerate(Ms):
        row_sums += F.embedding_bag(rows[:, done:M], C, mode="sum")
        done = M
        corner_sums = row_sums.gather(1, cols[:, :Ks[-1]]).cumsum(1)[:, K_index]  # (R, len(Ks))
        out[:, a] = corner_sums / (M * torch.as_tensor(Ks, dtype=C.dtype, device=C.device))
    return out


def misalignment_draws(C: Tensor, grid: Sequence[tuple[int, int]], draws: int,
                       seed: int) -> dict[tuple[int, int], Tensor]:
    """``{(M, K): (draws,) values of μ_Mᵀ g_K}`` from the cross-Gram ``C`` (seeded, deterministic)."""
    n_train, n_test = C.shape
    bad = [(M, K) for M, K in grid if not (1 <= M <= n_train and 1 <= K <= n_test)]
    if bad:
        raise ValueError(f"(M, K) = {bad} outside the pools: need 1 <= M <= {n_train}, 1 <= K <= {n_test}")
    Ms, Ks = sorted({M for M, _ in grid}), sorted({K for _, K in grid})
    generator = torch.Generator().manual_seed(seed)
    chunks = []
    for start in range(0, draws, DRAW_CHUNK):
        size = min(DRAW_CHUNK, draws - start)
        rows = ordered_subsets(size, n_train, Ms[-1], generator).to(C.device)
        cols = ordered_subsets(size, n_test, Ks[-1], generator).to(C.device)
        chunks.append(block_means(C, rows, cols, Ms, Ks))
    values = torch.cat(chunks)  # (draws, len(Ms), len(Ks))
    return {(M, K): values[:, Ms.index(M), Ks.index(K)] for M, K in grid}


def misalignment(pool_dir: str | Path, points: Sequence[str], grid: Sequence[tuple[int, int]], keys: dict[str, Any],
                 moments: Mapping[tuple[str, str, str], stats.AlignmentStats], draws: int = 10_000, seed: int = 0,
                 views: Sequence[str] = VIEWS, device: torch.device | str = "cpu", level: float = 0.95
                 ) -> pd.DataFrame:
    """The ``misalignment`` table from the pools ``measure`` stored in ``pool_dir``.

    One row per point × view × ``(M, K)`` × stats_split: ``p_misalign`` over ``draws`` draws with its
    Wilson interval at ``level``, and ``B_exact``, ``B_align`` from ``moments[point, view, split]``,
    the statistics ``measure`` already estimated on that split's pool (no second Gram pass).
    """
    rows = []
    for point in tqdm(points, desc="misalignment"):
        for view in views:
            pools = {split: GradientPool(pool_path(pool_dir, split, point, view)) for split in ("train", "test")}
            C = pools["train"].gram(pools["test"], device=device)
            values = misalignment_draws(C, grid, draws, derive_seed(seed, model_identity(keys), point, view))
            for (M, K), value in values.items():
                misaligned = int((value <= 0).sum())
                p_lo, p_hi = wilson_interval(misaligned, draws, level)
                for split in pools:
                    bound = stats.certificates(moments[point, view, split], M, K)
                    rows.append({**keys, "point": point, "point_index": pools["train"].meta["point_index"],
                                 "view": view, "M": M, "K": K, "draws": draws, "p_misalign": misaligned / draws,
                                 "p_lo": p_lo, "p_hi": p_hi, "stats_split": split,
                                 "b_exact": bound.b_exact, "b_align": bound.b_align})
    return pd.DataFrame(rows, columns=columns("misalignment"))
