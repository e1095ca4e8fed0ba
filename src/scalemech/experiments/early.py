"""Early training: E2, E3, E5, E6 and E7 again at an early weight snapshot (the regimes of docs/science.md §6).

The papers reason about trained reference models, and a trained model's mean activation gradient is
small: its statistics can vanish within their noise. Measured at the snapshot training kept at step
``step`` (or the latest one before it; ``checkpoints.snapshot_schedule``: 0, 1, 2, 4, …), the same
measurements, on pools of ``pool`` examples per split, decide each state-dependent claim a second time,
in the early-training regime: ``measure`` (covariance, signal, dalign; its pools in a scratch directory),
``misalignment`` on those pools and ``intervene`` on the same examples and a disjoint held-out pool.
Each table is returned as ``early_<table>`` with the snapshot's ``step``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from ..core.tables import EARLY, early_tables
from ..data import Prepared
from ..models.base import ResidualModel
from ..training.checkpoints import snapshot_paths
from .intervene import intervene as intervention
from .measure import measure as measured
from .misalign import misalignment


def snapshot_at(snapshot_dir: str | Path, step: int) -> tuple[int, Path]:
    """The latest weight snapshot in ``snapshot_dir`` at or before ``step``: its step and path."""
    snapshots = snapshot_paths(Path(snapshot_dir))
    before = [s for s in snapshots if s <= step]
    if not before:
        raise FileNotFoundError(
            f"no weight snapshot at or before step {step} in {snapshot_dir} (steps {sorted(snapshots)}); "
            "set train.snapshots and train again"
        )
    return max(before), snapshots[max(before)]


def early(
    model: ResidualModel,
    data: Prepared,
    snapshot_dir: str | Path,
    keys: dict[str, Any],
    *,
    step: int,
    pool: int,
    measure: dict[str, Any],
    misalign: dict[str, Any],
    intervene: dict[str, Any],
    device: torch.device | str,
) -> dict[str, pd.DataFrame]:
    """``{early_<table>: rows}`` of ``model`` at its snapshot at ``step`` (``snapshot_at``), measured as
    ``measure`` (the config's section, pools of ``pool`` per split, no correlation matrices), ``misalign``
    and ``intervene`` measure a trained model; each row carries the snapshot's ``step``."""
    recorded, path = snapshot_at(snapshot_dir, step)
    model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    settings = measure | {"train_pool": pool, "test_pool": pool, "covmat_points": 0}
    with tempfile.TemporaryDirectory(prefix=".early-pools-") as pools:
        frames = measured(model, data, keys, pools, device=device, **settings)
        level = measure["interval_level"]
        frames["misalignment"] = misalignment(pools, keys, frames["dalign"], interval_level=level, **misalign)
        frames["intervention"] = intervention(model, data, pools, keys, device=device, **intervene)
    return {name: frames[name.removeprefix(EARLY)].assign(step=recorded) for name in early_tables()}
