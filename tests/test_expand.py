"""Depth expansion: identity at insertion, the jumpboard, the fallback rule, the control and the
evaluation noise of its test losses (paired per-example standard errors)."""

import copy
import dataclasses
import importlib
import math

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from scalemech.config.schema import schema
from scalemech.core.tables import check_columns
from scalemech.experiments.expand import (
    ExpandConfig,
    expand_at,
    expand_points,
    jumpboard,
    paired_se,
    per_example_losses,
)
from scalemech.gradients.batches import mean_loss, to_device
from scalemech.models import build_model

KEYS = {"run": "t", "dataset": "d", "family": "resnet", "depth": 8, "width": 0.25, "seed": 0, "model": "m"}
PREPARE = to_device("cpu")
expand = importlib.import_module("scalemech.experiments.expand")  # the package's ``expand`` is the function
DEFAULTS = {
    key: spec["default"]
    for key, spec in schema()["properties"]["expand"]["properties"].items()
    if key in {f.name for f in dataclasses.fields(ExpandConfig)}
}


def settings(**overrides) -> ExpandConfig:
    """The config's default expansion settings, with SGD at lr 0.01 and ``overrides``."""
    return ExpandConfig(**{**DEFAULTS, "optimizer": "sgd", "lr": 0.01, **overrides})


class TensorTask:
    """The training side of ``tasks.Task`` over in-memory tensors: batches drawn with replacement."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor):
        self.x, self.y, self.drawn = x, y, []

    def count(self, split: str) -> int:
        return len(self.x)

    def sample(self, split: str, n: int, generator: torch.Generator) -> torch.Tensor:
        index = torch.randint(len(self.x), (n,), generator=generator)
        self.drawn.append(index)
        return index

    def examples(self, split: str, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.x[index], self.y[index]


def _setup():
    torch.manual_seed(0)
    model = build_model({"family": "resnet", "depth": 8, "width": 0.25, "in_channels": 1, "num_classes": 3}).eval()
    x = torch.randn(120, 1, 8, 8)
    y = (x[:, 0].mean((1, 2)) * 8).long().clamp(-1, 1) + 1
    return model, (x[:80], y[:80]), (x[80:], y[80:])


def test_expanded_model_equals_old_and_jumpboard_descends():
    model, train, test = _setup()
    point = model.insertion_points()[1]
    expanded, block = model.insert_block(point)
    torch.testing.assert_close(expanded.eval()(test[0]), model(test[0]), rtol=0, atol=1e-6)
    old_loss = mean_loss(model, *train, 40, PREPARE)
    step, jump_loss, interior = jumpboard(expanded, block, train, settings(eval_batch_size=40), PREPARE)
    assert step > 0 and jump_loss < old_loss and interior  # the line search brackets its optimum
    assert mean_loss(expanded, *train, 40, PREPARE) == pytest.approx(jump_loss)  # the block is left at θ_J


def test_broken_new_block_is_refused():
    model, train, test = _setup()
    model.new_block = lambda point: nn.Conv2d(8, 8, 3, padding=1)  # not zero at initialization
    with pytest.raises(RuntimeError, match="changed the model's output"):
        expand_at(model, model.insertion_points()[1], TensorTask(*train), train, test, settings(steps=1), PREPARE, KEYS)


@pytest.mark.parametrize("train_mode", ["block", "all"])
def test_expansion_row(train_mode):
    model, train, test = _setup()
    config = settings(steps=6, train_mode=train_mode, batch_size=16, lr=0.02, eval_batch_size=40)
    row = expand_at(model, model.insertion_points()[0], TensorTask(*train), train, test, config, PREPARE, KEYS).iloc[0]
    check_columns(row.to_frame().T, "expansion")
    assert row.train_loss_old == pytest.approx(mean_loss(model, *train, 40, PREPARE))
    assert row.test_loss_old == pytest.approx(mean_loss(model, *test, 40, PREPARE))
    assert row.train_loss_jump < row.train_loss_old
    assert row.train_loss_selected <= row.train_loss_jump and row.delta_erm >= 0
    chosen = "jump" if row.fallback else "new"
    assert row.train_loss_selected == row[f"train_loss_{chosen}"]
    assert row.delta_r_test == pytest.approx(row.test_loss_old - row.test_loss_jump)
    assert math.isfinite(row.train_loss_control) and row.train_loss_control != row.train_loss_old


def test_sabotaged_training_falls_back_to_jumpboard():
    model, train, test = _setup()
    config = settings(steps=5, train_mode="all", batch_size=16, lr=1e4, momentum=0.0, eval_batch_size=40)
    row = expand_at(model, model.insertion_points()[1], TensorTask(*train), train, test, config, PREPARE, KEYS).iloc[0]
    assert row.fallback
    assert not row.train_loss_new <= row.train_loss_jump  # training diverged (or went nan)
    assert row.train_loss_selected == row.train_loss_jump and row.test_loss_selected == row.test_loss_jump


def test_expansion_ignores_the_global_rng_state():
    """The new block's weights and the batches come from the job's seeds, not from whatever the
    process drew before: two calls after different global draws give the same row."""
    model, train, test = _setup()
    rows = []
    for global_seed in (1, 2):
        torch.manual_seed(global_seed)
        torch.rand(7)
        rows.append(
            expand_at(
                model, model.insertion_points()[1], TensorTask(*train), train, test, settings(steps=2), PREPARE, KEYS
            )
        )
    pd.testing.assert_frame_equal(rows[0], rows[1])
    other_model = expand_at(
        model,
        model.insertion_points()[1],
        TensorTask(*train),
        train,
        test,
        settings(steps=2),
        PREPARE,
        {**KEYS, "model": "m2"},
    )
    assert other_model.jump_step.iloc[0] != rows[0].jump_step.iloc[0]


def test_control_and_expanded_model_see_the_same_batches():
    model, train, test = _setup()
    task = TensorTask(*train)
    expand_at(model, model.insertion_points()[1], task, train, test, settings(steps=3, batch_size=8), PREPARE, KEYS)
    runs = 2 * sum(f > 0 for f in DEFAULTS["lr_factors"])  # f_new, then the control, at each nonzero lr
    assert len(task.drawn) == 3 * runs
    assert all(torch.equal(a, b) for a, b in zip(task.drawn, task.drawn[3:]))  # every run: the same 3 batches


def test_a_damaging_recipe_leaves_the_control_at_f_old():
    """At a step size that wrecks the old block of a trained f_old (SGD at lr 3), the control trained at that lr
    alone ends far above f_old; chosen on the train loss from the grid (0, 0.1, 1)·lr, as f_new's is, it ends
    within noise of f_old on the test examples, and both record the lr they kept."""
    model, train, test = _setup()
    fit = settings(steps=150, batch_size=16, lr=0.02, eval_batch_size=40)
    expand.train_params(model, model.parameters(), TensorTask(*train), fit, PREPARE, order_seed=0)  # a trained f_old
    point = model.insertion_points()[1]

    def row(factors):
        config = settings(steps=5, batch_size=16, lr=3.0, momentum=0.0, eval_batch_size=40, lr_factors=factors)
        return expand_at(model, point, TensorTask(*train), train, test, config, PREPARE, KEYS).iloc[0]

    damaged, chosen = row([1.0]), row([0.0, 0.1, 1.0])
    noise = 2 * chosen.se_test_control_minus_old
    assert damaged.test_loss_control > 10 * damaged.test_loss_old  # the recipe alone wrecks f_old
    assert chosen.test_loss_control - chosen.test_loss_old <= noise
    assert chosen.train_loss_control <= chosen.train_loss_old
    assert {chosen.lr_control, chosen.lr_selected} <= {3.0 * f for f in (0.0, 0.1, 1.0)}


def test_control_at_zero_steps_equals_the_old_model():
    model, train, test = _setup()
    row = expand_at(
        model, model.insertion_points()[1], TensorTask(*train), train, test, settings(steps=0), PREPARE, KEYS
    ).iloc[0]
    assert row.train_loss_control == row.train_loss_old and row.test_loss_control == row.test_loss_old


def _one_at_a_time(model, x, y) -> np.ndarray:
    """Brute force: each example's cross-entropy from its own forward pass."""
    with torch.no_grad():
        return np.array([F.cross_entropy(model(x[i : i + 1]), y[i : i + 1]).item() for i in range(len(x))])


def test_per_example_losses_and_paired_se_match_brute_force():
    model, _, (x, y) = _setup()
    other = copy.deepcopy(model)
    with torch.no_grad():
        other.head[-1].weight.add_(0.1 * torch.randn_like(other.head[-1].weight))
    a, b = (per_example_losses(m, x, y, 7, PREPARE) for m in (model, other))  # 7 does not divide 40
    assert a.dtype == torch.float64 and a.shape == (40,)
    np.testing.assert_allclose(a.numpy(), _one_at_a_time(model, x, y), rtol=1e-5)
    assert a.mean().item() == pytest.approx(mean_loss(model, x, y, 40, PREPARE))
    diff = _one_at_a_time(other, x, y) - _one_at_a_time(model, x, y)
    assert paired_se(b, a) == pytest.approx(np.std(diff, ddof=1) / np.sqrt(len(diff)), rel=1e-4)


def _recording(monkeypatch) -> list:
    """Record (model, losses) of every per-example evaluation while the test runs."""
    seen = []
    original = expand.per_example_losses

    def record(model, *args):
        seen.append((model, original(model, *args)))
        return seen[-1][1]

    monkeypatch.setattr(expand, "per_example_losses", record)
    return seen


def test_expansion_row_records_paired_evaluation_noise(monkeypatch):
    model, train, test = _setup()
    seen = _recording(monkeypatch)
    config = settings(steps=4, batch_size=16, lr=0.05, eval_batch_size=40)
    row = expand_at(model, model.insertion_points()[1], TensorTask(*train), train, test, config, PREPARE, KEYS).iloc[0]
    assert seen[0][0] is model and len(seen) == 4  # old, jumpboard, trained f_new, control: once each
    old, jump, new, control = (losses.numpy() for _, losses in seen)
    np.testing.assert_allclose(old, _one_at_a_time(model, *test), rtol=1e-5)
    selected = jump if row.fallback else new
    for name, losses in dict(old=old, jump=jump, new=new, selected=selected, control=control).items():
        assert row[f"test_loss_{name}"] == pytest.approx(losses.mean())

    def se(a, b):
        return np.std(a - b, ddof=1) / np.sqrt(len(a))

    assert row.se_test_selected_minus_old == pytest.approx(se(selected, old))
    assert row.se_test_control_minus_old == pytest.approx(se(control, old))
    assert row.se_test_selected_minus_control == pytest.approx(se(selected, control))
    assert row.se_test_selected_minus_control > 0


def test_the_old_model_is_evaluated_once_per_model_not_per_point(monkeypatch):
    model, train, test = _setup()
    seen = _recording(monkeypatch)
    train_means = []
    monkeypatch.setattr(expand, "mean_loss", lambda m, *args: (train_means.append(m), mean_loss(m, *args))[1])
    points = model.insertion_points()[:3]
    table = expand_points(model, points, TensorTask(*train), train, test, settings(steps=1), PREPARE, KEYS)
    assert len(table) == 3 and table["test_loss_old"].nunique() == 1
    assert sum(m is model for m, _ in seen) == 1 and sum(m is model for m in train_means) == 1
    assert len(seen) == 1 + 3 * 3  # + jumpboard, f_new and control at each point
    assert table["train_loss_old"].iloc[0] == pytest.approx(mean_loss(model, *train, 40, PREPARE))
