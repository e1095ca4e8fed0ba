"""Shared test settings: one torch thread (tiny models run faster, and results are stable), the
tests that run Snakemake first, and a small trained model with its weight snapshots (E10, E11).

``make test`` runs on every core with pytest-xdist, ``--dist loadfile --no-loadscope-reorder``:
each file on one worker (its module fixtures built once), files handed out in collection order.
The files marked ``workflow`` are the longest, so they are collected first, then the other long
files (``LONG``, longest first): the suite does not end with one worker busy on a long file while
the other idles. ``LONG`` comes from ``make test``'s durations (seconds per file, Intel Xeon, AVX2
caps); a stale order costs balance, never a result."""

import dataclasses

import pytest
import torch
from test_train import RESNET

from scalemech.core.recipe import Recipe
from scalemech.data import load_prepared, prepare_dataset
from scalemech.models import load_model
from scalemech.training.train import train

torch.set_num_threads(1)


LONG = (
    "test_rules_power.py",
    "test_plots.py",
    "test_grow.py",
    "test_train.py",
    "test_certify.py",
    "test_hostile_checkpoints.py",
    "test_growth.py",
)  # 52, 24, 19, 12, 9, 9 and 7 s of the suite's 276 (2026-12-02)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def order(item: pytest.Item) -> tuple[bool, int]:
        name = item.path.name
        return item.get_closest_marker("workflow") is None, LONG.index(name) if name in LONG else len(LONG)

    items.sort(key=order)  # stable: the order within a file is kept


@pytest.fixture(scope="module")
def trained_with_snapshots(tmp_path_factory):
    """``(model, data, snapshot_dir)``: a depth-8 ResNet trained 40 steps on 1 024 mnist5k digits,
    keeping 6 weight snapshots."""
    out = tmp_path_factory.mktemp("trained")
    prepare_dataset("mnist5k", {}, out / "data")
    data = load_prepared(out / "data")
    data = dataclasses.replace(data, train_x=data.train_x[:1024], train_y=data.train_y[:1024])
    recipe = Recipe(steps=40, batch_size=64, lr=0.1, eval_examples=128, eval_batch_size=256)
    train(RESNET, recipe, data, out, out / "ckpt", seed=0, device="cpu", checkpoint_every=40, progress=False,
          snapshots=6, snapshot_dir=out / "snapshots")  # fmt: skip
    model, payload = load_model(out / "model.pt")
    return model, data, out / "snapshots" / payload["identity"]
