"""E10: alignment statistics at every weight snapshot of a training run."""

from __future__ import annotations

import dataclasses

import pytest
from test_train import RESNET

from scalemech.checkpoints import snapshot_schedule
from scalemech.data import load_prepared, prepare_dataset
from scalemech.experiments import trajectory
from scalemech.models import load_model
from scalemech.tables import check_columns
from scalemech.train import Recipe, train

KEYS = {"run": "t", "dataset": "mnist5k", "family": "resnet", "depth": 8, "width": 0.5, "seed": 0, "model": "m"}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("trajectory")
    prepare_dataset("mnist5k", {}, out / "data")
    data = load_prepared(out / "data")
    data = dataclasses.replace(data, train_x=data.train_x[:1024], train_y=data.train_y[:1024])
    recipe = Recipe(steps=40, batch_size=64, lr=0.1, eval_examples=128, eval_batch_size=256)
    train(
        RESNET,
        recipe,
        data,
        out,
        out / "ckpt",
        seed=0,
        device="cpu",
        checkpoint_every=40,
        progress=False,
        snapshots=6,
        snapshot_dir=out / "snapshots",
    )
    model, payload = load_model(out / "model.pt")
    return model, data, out / "snapshots" / payload["identity"]


def test_one_row_per_snapshot_point_split_view_and_the_signal_collapses(trained):
    model, data, snapshot_dir = trained
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


def test_missing_snapshots_are_refused(trained, tmp_path):
    model, data, _ = trained
    with pytest.raises(FileNotFoundError, match="train.snapshots"):
        trajectory(
            model, data, tmp_path, KEYS, points=1, pool=16, batch_size=16, interval_level=0.9, seed=0, device="cpu"
        )
