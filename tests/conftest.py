"""Shared test settings: one torch thread (tiny models run faster, and results are stable), the
tests that run Snakemake first, and a small trained model with its weight snapshots (E10, E11).

``make test`` runs on every core with pytest-xdist, ``--dist loadfile --no-loadscope-reorder``:
each file on one worker (its module fixtures built once), files handed out in collection order.
The files marked ``workflow`` are the longest, so they are collected first and the suite does
not end waiting on one of them."""

import dataclasses

import pytest
import torch
from test_train import RESNET

from scalemech.core.recipe import Recipe
from scalemech.data import load_prepared, prepare_dataset
from scalemech.models import load_model
from scalemech.training.train import train

torch.set_num_threads(1)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.get_closest_marker("workflow") is None)  # stable: file order kept


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
