"""E10: alignment statistics at every weight snapshot of a training run."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from test_train import RESNET

from scalemech.core.recipe import Recipe
from scalemech.core.seeding import model_identity
from scalemech.core.tables import check_columns
from scalemech.data import load_prepared, prepare_dataset
from scalemech.experiments import trajectory
from scalemech.experiments.measure import draw_pools
from scalemech.models import load_model
from scalemech.training.checkpoints import snapshot_paths, snapshot_schedule
from scalemech.training.train import train

KEYS = {"run": "t", "dataset": "mnist5k", "family": "resnet", "depth": 8, "width": 0.5, "seed": 0, "model": "m"}


def test_one_row_per_snapshot_point_split_view_and_the_signal_collapses(trained_with_snapshots):
    model, data, snapshot_dir = trained_with_snapshots
    table = trajectory(
        model, data, snapshot_dir, KEYS, points=2, pool=48, batch_size=48, interval_level=0.9, seed=0, device="cpu"
    )
    check_columns(table, "trajectory")
    steps = snapshot_schedule(40, 6)
    assert sorted(set(table.step)) == steps
    assert len(table) == len(steps) * 2 * 2 * 2  # snapshots × points × splits × views
    first, last = (table[(table.step == s) & (table.split == "train") & (table.view == "full")] for s in (0, 40))
    assert first.train_loss.iloc[0] > last.train_loss.iloc[0]  # the model learned
    assert first.d_align.median() > last.d_align.median()  # the mean gradient is optimized away
    assert ((table.mu_sq_lo <= table.mu_sq) & (table.mu_sq <= table.mu_sq_hi)).all()


def test_only_the_splits_asked_for_are_measured_with_both_losses(trained_with_snapshots):
    model, data, snapshot_dir = trained_with_snapshots
    both = dict(points=1, pool=16, batch_size=16, interval_level=0.9, seed=0, device="cpu")
    train_only = trajectory(model, data, snapshot_dir, KEYS, splits=["train"], **both)
    full = trajectory(model, data, snapshot_dir, KEYS, **both)
    assert set(train_only.split) == {"train"} and set(full.split) == {"train", "test"}
    columns = ["step", "view", "train_loss", "test_loss", "d_align"]
    expected = full[full.split == "train"][columns].reset_index(drop=True)
    assert train_only[columns].reset_index(drop=True).equals(expected)


def test_missing_snapshots_are_refused(trained_with_snapshots, tmp_path):
    model, data, _ = trained_with_snapshots
    with pytest.raises(FileNotFoundError, match="train.snapshots"):
        trajectory(
            model, data, tmp_path, KEYS, points=1, pool=16, batch_size=16, interval_level=0.9, seed=0, device="cpu"
        )


@pytest.fixture(scope="module")
def warmup_snapshot(tmp_path_factory):
    """A tiny ResNet trained 40 steps at a high peak lr (0.5, warmup over 20 steps): its BatchNorm running
    statistics lag the weights, so the snapshot at step 16 (mid-warmup) is broken in eval mode as saved."""
    out = tmp_path_factory.mktemp("warmup")
    prepare_dataset("mnist5k", {}, out / "data")
    data = load_prepared(out / "data")
    data = dataclasses.replace(data, train_x=data.train_x[:1024], train_y=data.train_y[:1024])
    recipe = Recipe(steps=40, batch_size=64, lr=0.5, warmup_fraction=0.5, eval_examples=128, eval_batch_size=256)
    snapshots = out / "snapshots"
    train(RESNET, recipe, data, out, out / "ckpt", seed=0, device="cpu", checkpoint_every=40, progress=False,
          snapshots=6, snapshot_dir=snapshots)  # fmt: skip
    model, payload = load_model(out / "model.pt")
    return model, data, snapshots / payload["identity"]


def pool_losses(model, x, y, train_mode: bool) -> torch.Tensor:
    """Per-example losses of the pool in batches of 64, with batch statistics (train mode) or running ones."""
    model.train(train_mode)
    with torch.no_grad():
        return torch.cat([model.per_example_loss(model(xb), yb) for xb, yb in zip(x.split(64), y.split(64))])


def test_mid_warmup_snapshot_is_measured_as_trained(warmup_snapshot):
    """The trajectory table's eval-mode loss of a mid-warmup snapshot (BatchNorm recalibrated) lies within 2 se
    of the snapshot's train-mode loss on the same pool; measured with the running statistics it was saved with,
    the same snapshot is far off (so this test fails without the recalibration)."""
    model, data, snapshot_dir = warmup_snapshot
    table = trajectory(
        model, data, snapshot_dir, KEYS, points=1, pool=128, batch_size=64, interval_level=0.9, seed=0, device="cpu"
    )
    pool = draw_pools(model, data, {"train": 128}, 0, model_identity(KEYS))["train"]
    model.load_state_dict(torch.load(snapshot_paths(snapshot_dir)[16], weights_only=True))
    train_mode = pool_losses(model, pool.x, pool.y, train_mode=True)
    stale = pool_losses(model, pool.x, pool.y, train_mode=False).mean().item()
    noise = 2 * train_mode.std().item() / math.sqrt(len(train_mode))
    measured = table[table.step == 16].train_loss.iloc[0]
    assert stale - train_mode.mean().item() > 10 * noise  # the saved running statistics are broken
    assert abs(measured - train_mode.mean().item()) < noise
