"""Alignment statistics along training (E10): where the mechanism lives.

The mean activation gradient ``μ`` is among the first things an optimizer removes, so a model
measured only at its final checkpoint may show ``d_align`` near 0 at every width. ``trajectory``
measures, at every weight snapshot kept by training (``checkpoints.snapshot_schedule``: 0, 1,
2, 4, … steps) and at the configured points, ``‖μ‖²``, ``d_∥``, ``d_2`` and ``d_align`` with
jackknife intervals on a train and a test pool, in both views, beside the snapshot's mean loss
on each pool, so widths can be compared at equal step and at equal fit.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from tqdm.auto import tqdm

from .. import stats
from ..core.seeding import model_identity
from ..core.tables import columns
from ..data import Prepared
from ..data.store import SPLITS
from ..gradients.batches import mean_loss, to_device
from ..gradients.capture import iter_activation_grads
from ..gradients.norms import recalibrate_batch_norm
from ..gradients.views import VIEWS
from ..models.base import ResidualModel
from ..training.checkpoints import snapshot_paths
from .measure import draw_pools, select_points


def gradient_rows(
    model: ResidualModel,
    x: torch.Tensor,
    y: torch.Tensor,
    points: Sequence[str],
    batch_size: int,
    device: torch.device | str,
) -> dict[tuple[str, str], torch.Tensor]:
    """``{(point, view): Q}``: the per-example activation gradients of the pool (n, D), on ``device`` in the
    precision backward gives them (float32): half the memory of float64 rows; their Gram is accumulated in
    float64 (``stats.cross_gram``)."""
    batches = list(iter_activation_grads(model, x, y, points, batch_size, to_device(device)))
    return {(p, v): torch.cat([b[p][v] for b in batches]) for p in points for v in VIEWS}


def trajectory(
    model: ResidualModel,
    data: Prepared,
    snapshot_dir: str | Path,
    keys: dict[str, Any],
    *,
    points: str | int | Sequence[str],
    pool: int,
    splits: Sequence[str] = SPLITS,
    batch_size: int,
    interval_level: float,
    seed: int,
    device: torch.device | str,
) -> pd.DataFrame:
    """The ``trajectory`` table of ``model``: one row per snapshot × point × split of ``splits`` × view.

    Pools of ``pool`` examples per split are drawn once for the model (``draw_pools``, seeded
    from ``seed`` and the model) and used at every snapshot. A BatchNorm model's running statistics
    are recomputed at every snapshot before it is measured (``norms.recalibrate_batch_norm``), so
    ``train_loss``/``test_loss`` are the eval-mode losses after recalibration.
    """
    snapshots = snapshot_paths(Path(snapshot_dir))
    if not snapshots:
        raise FileNotFoundError(f"no weight snapshots in {snapshot_dir}; set train.snapshots and train again")
    model = model.to(device).eval()
    points = select_points(model, points)
    identity, task = model_identity(keys), model.task(data)
    pools = draw_pools(model, data, {split: pool for split in SPLITS}, seed, identity)
    rows = []
    for step, path in tqdm(snapshots.items(), desc="snapshots"):
        model.load_state_dict(torch.load(path, map_location=device, weights_only=True))
        recalibrate_batch_norm(model, task, identity, device)
        losses = {
            split: mean_loss(model, pools[split].x, pools[split].y, batch_size, to_device(device)) for split in SPLITS
        }
        for split in splits:
            grads = gradient_rows(model, pools[split].x, pools[split].y, points, batch_size, device)
            for (point, view), Q in grads.items():
                G = stats.cross_gram(Q, None, device=Q.device)  # float64 (n, n), float64 column chunks
                estimate = stats.stats_from_gram(G, Q.shape[1])
                bounds = stats.alignment_intervals(G, Q.shape[1], interval_level)
                rows.append(
                    {
                        **keys,
                        "step": step,
                        "train_loss": losses["train"],
                        "test_loss": losses["test"],
                        "point": point,
                        "point_index": model.index(point),
                        "split": split,
                        "view": view,
                        **stats.table_row(estimate, bounds),
                        **stats.upper_bounds(G),  # the table keeps d_2's and d_align's
                    }
                )
    return pd.DataFrame(rows)[columns("trajectory")]
