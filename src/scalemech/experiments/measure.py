"""Measurement at insertion points: covariance structure (E2), signal (E3) and d_align (E5).

For a trained model, a train pool and a test pool of examples, ``measure`` captures the
per-example activation gradients ``q`` at the chosen points in one pass per pool
(``scalemech.gradients.capture``), stores them as ``GradientPool`` files for E6/E7, and returns the tidy
tables of ``schemas/tables.schema.yaml``:

- ``covariance`` (Paper D, D1): the off-diagonal share ``‖Σ − diag Σ‖_F² / ‖Σ‖_F²`` of the pooled
  train gradients, from unbiased U-statistics (``stats.offdiag_ratio_unbiased``; 0 in expectation
  for independent coordinates whatever p/n), beside the same statistic under a column-permutation
  null of the same ``n`` and ``p``, the plug-in ratio, and ``low_rank`` where the point's pooled
  gradient is low-rank by construction (``ResidualModel.low_rank``);
- ``covmats``: the pooled correlation matrix in long form, for ``covmat_points`` only;
- ``signal`` (D2): ``‖μ‖²`` (unbiased U-statistic) with its jackknife interval, standard error and
  one-sided 95 % upper bound, ``‖μ‖ = sqrt(max(‖μ‖², 0))`` and the first-order signal
  ``‖∇_θ L(f_new)‖`` at ``θ = 0`` of a zero-initialized inserted block;
- ``dalign`` (Paper W, W1/W5): ``‖μ‖²``, ``μᵀΣμ``, ``tr Σ²``, ``d_∥``, ``d_2``, ``d_align`` with
  jackknife intervals, and the standard errors and one-sided 95 % upper bounds of ``d_2`` and
  ``d_align`` (``stats.upper_bounds``), from Gram matrices only (docs/science.md §4), per split and view.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from torch import Tensor
from tqdm.auto import tqdm

from .. import stats
from ..core.device import memory_for_pools, tf32
from ..core.seeding import derive_seed, model_identity
from ..core.tables import columns
from ..data import Prepared
from ..data.store import SPLITS
from ..gradients.batches import to_device
from ..gradients.capture import capture_pools
from ..gradients.norms import recalibrate_batch_norm
from ..gradients.pools import GradientPool
from ..gradients.views import VIEWS
from ..models.base import ResidualModel
from ..tasks import Examples, draw_examples


def select_points(model: ResidualModel, rule: str | int | Sequence[str]) -> list[str]:
    """Insertion points picked by ``rule``, in model order.

    ``"all"``: every point; an int ``n``: ``n`` points evenly spaced in depth ending at the last,
    indices ``ceil(k·L/n) − 1`` for ``k = 1 … n`` of ``L`` points (all ``L`` when ``n ≥ L``, so one
    config serves shallow and deep models);
    a list of names: those points (``KeyError`` naming an unknown one and the valid names).
    """
    names = model.insertion_points()
    if rule == "all":
        return names
    if isinstance(rule, int) and not isinstance(rule, bool):
        if rule < 1:
            raise ValueError(f"point count {rule} must be at least 1")
        count = min(rule, len(names))
        return [names[math.ceil(k * len(names) / count) - 1] for k in range(1, count + 1)]
    if isinstance(rule, str) or not all(isinstance(name, str) for name in rule):
        raise ValueError(f"point rule {rule!r}; allowed: 'all', a positive int, or a list of point names")
    unknown = [name for name in rule if name not in names]
    if unknown:
        raise KeyError(f"unknown insertion point(s) {unknown}; valid names: {names}")
    return [name for name in names if name in rule]


def draw_pools(
    model: ResidualModel, data: Prepared, sizes: dict[str, int], seed: int, identity: str
) -> dict[str, Examples]:
    """``{split: Examples}`` of ``sizes[split]`` examples for the model ``identity``, in the model's
    own input format (``ResidualModel.task``), drawn with ``derive_seed(seed, identity, "pool",
    split)``: each model gets its own pools, the same in every job that asks."""
    task = model.task(data)
    return {
        split: draw_examples(task, split, n, derive_seed(seed, identity, "pool", split)) for split, n in sizes.items()
    }


def ready_pools(
    model: ResidualModel, data: Prepared, sizes: dict[str, int], seed: int, identity: str, device: torch.device | str
) -> tuple[ResidualModel, dict[str, Examples]]:
    """``model`` on ``device`` in eval mode with its BatchNorm statistics recomputed
    (``norms.recalibrate_batch_norm``), and its pools (``draw_pools``)."""
    model = model.to(device).eval()
    recalibrate_batch_norm(model, model.task(data), identity, device)
    return model, draw_pools(model, data, sizes, seed, identity)


def capture_split(
    model: ResidualModel,
    examples: Examples,
    points: Sequence[str],
    pool_dir: str | Path,
    *,
    identity: str,
    batch_size: int,
    pool_dtype: str,
    views: Sequence[str],
    seed: int,
    device: torch.device | str,
    new_blocks: bool = True,
    checksum: bool = True,
    require_finite: bool = False,
) -> dict[tuple[str, str], GradientPool]:
    """``grads.capture_pools`` of one split's pool, labelled with the model; with ``new_blocks``, the
    new block at each point seeded by ``derive_seed(seed, identity, point, "new_block")``; with
    ``require_finite``, a non-finite loss or gradient is refused at its batch (``check_finite``)."""
    return capture_pools(
        model,
        examples,
        points,
        pool_dir,
        batch_size,
        to_device(device),
        pool_dtype,
        views,
        labels={"model": identity},
        progress=True,
        new_block_seeds=[derive_seed(seed, identity, point, "new_block") for point in points] if new_blocks else None,
        checksum=checksum,
        require_finite=require_finite,
        keep_bytes=memory_for_pools(device),
    )


def _rows(table: str, keys: dict[str, Any], rows: list[dict[str, Any]]) -> pd.DataFrame:
    """A frame of ``rows`` with ``keys`` prepended, in the schema's column order."""
    return pd.DataFrame([{**keys, **row} for row in rows], columns=columns(table))


def _long_form(corr: Tensor, labels: dict[str, Any]) -> pd.DataFrame:
    """The ``covmats`` rows of one correlation matrix (C, C): one row per ``(row, col)``."""
    rows, cols = torch.meshgrid(torch.arange(corr.shape[0]), torch.arange(corr.shape[1]), indexing="ij")
    frame = pd.DataFrame({"row": rows.flatten().numpy(), "col": cols.flatten().numpy(), "corr": corr.flatten().numpy()})
    return frame.assign(**labels)[columns("covmats")]


@tf32(False)  # the statistics cancel large terms: IEEE fp32 on CUDA (make gpu-check's MEAS line)
def measure(
    model: ResidualModel,
    data: Prepared,
    keys: dict[str, Any],
    pool_dir: str | Path,
    *,
    points: str | int | Sequence[str],
    train_pool: int,
    test_pool: int,
    batch_size: int,
    covmat_points: int,
    pool_dtype: str,
    interval_level: float,
    null_draws: int,
    seed: int,
    device: torch.device | str,
    interval: str = "jackknife",
) -> dict[str, pd.DataFrame]:
    """Tables ``covariance``, ``covmats``, ``signal``, ``dalign`` of ``model`` at the points picked by
    ``points`` (``select_points``); the keyword arguments are the config's ``measure`` section.

    Pools of ``train_pool``/``test_pool`` examples come from ``draw_pools(…, seed,
    model_identity(keys))``; their gradients are stored under ``pool_dir`` (``grads.pool_path``)
    in ``pool_dtype``, each with its provenance. ``keys`` holds the model key columns. Intervals:
    ``stats.alignment_intervals`` at ``interval_level``. ``covmat_points`` of the points (evenly
    spaced) get their correlation matrix in ``covmats``. The inserted block behind
    ``block_grad_norm`` and the null permutations are seeded from ``seed``, the model and the point.
    A BatchNorm model's running statistics are recomputed first (``norms.recalibrate_batch_norm``).
    """
    points = select_points(model, points)
    covmat_names = set(select_points(model, min(covmat_points, len(points)))) & set(points) if covmat_points else set()
    identity = model_identity(keys)
    model, pools = ready_pools(model, data, {"train": train_pool, "test": test_pool}, seed, identity, device)
    index = {p: model.index(p) for p in points}
    tables: dict[str, list[dict[str, Any]]] = {name: [] for name in ("covariance", "signal", "dalign")}
    covmats: list[pd.DataFrame] = []
    for split in SPLITS:
        grads = capture_split(
            model,
            pools[split],
            points,
            pool_dir,
            identity=identity,
            batch_size=batch_size,
            pool_dtype=pool_dtype,
            views=VIEWS,
            seed=seed,
            device=device,
        )
        for point in tqdm(points, desc=f"statistics {split}"):
            where = {"point": point, "point_index": index[point]}
            for view in VIEWS:
                pool = grads[point, view]
                G = pool.gram(device=device)
                estimate = stats.stats_from_gram(G, pool.dim)
                bounds = stats.alignment_intervals(G, pool.dim, interval_level, interval)
                upper = stats.upper_bounds(G)
                tables["dalign"].append(
                    {**where, "split": split, "view": view, **stats.table_row(estimate, bounds), **upper}
                )
                if view == "full":
                    tables["signal"].append(
                        {
                            **where,
                            "split": split,
                            "n": pool.n,
                            "mu_sq": estimate.mu_sq,
                            "mu_sq_lo": bounds["mu_sq"][0],
                            "mu_sq_hi": bounds["mu_sq"][1],
                            "mu_sq_se": upper["mu_sq_se"],
                            "mu_sq_ucb": upper["mu_sq_ucb"],
                            "mu_norm": math.sqrt(max(estimate.mu_sq, 0.0)),
                            "block_grad_norm": pool.meta["block_grad_norm"],
                        }
                    )
            if split == "train":
                pooled = grads[point, "pooled"].rows(device=device)  # (n, C)
                null_mean, null_sd = stats.offdiag_null_unbiased(
                    pooled, null_draws, derive_seed(seed, identity, point, "null")
                )
                tables["covariance"].append(
                    {
                        **where,
                        "n": pooled.shape[0],
                        "dim": pooled.shape[1],
                        "offdiag_ratio": stats.offdiag_ratio_unbiased(pooled),
                        "offdiag_ratio_plugin": stats.offdiag_ratio(pooled),
                        "offdiag_ratio_null": null_mean,
                        "offdiag_ratio_null_sd": null_sd,
                        "low_rank": model.low_rank(point),
                    }
                )
                if point in covmat_names:
                    covmats.append(_long_form(stats.correlation(pooled).cpu(), {**keys, **where}))
    frames = {name: _rows(name, keys, rows) for name, rows in tables.items()}
    frames["covmats"] = pd.concat(covmats, ignore_index=True) if covmats else _rows("covmats", keys, [])
    return frames
