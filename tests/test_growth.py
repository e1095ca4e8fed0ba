"""E11 growth (with E8's arms): identity at insertion, the jumpboard, the fallback rule, the controls
at equal steps and equal FLOPs, the paired held-out gains, and one table per model whose held-out
examples are disjoint from the certificate's pools."""

from __future__ import annotations

import copy
import dataclasses
import importlib
import os
import signal

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from scalemech.certify import Sampling, certify_model, point_ranks
from scalemech.config.schema import schema
from scalemech.core.seeding import derive_seed, model_identity
from scalemech.core.tables import check_columns
from scalemech.experiments import arms
from scalemech.experiments.growth import grow_points, signal_step
from scalemech.gradients.batches import mean_loss, per_example_losses, to_device
from scalemech.models import build_model
from scalemech.training import continued
from scalemech.training.checkpoints import snapshot_paths
from scalemech.training.continued import step_flops
from scalemech.training.train import Stopped

KEYS = {"run": "t", "dataset": "mnist5k", "family": "resnet", "depth": 8, "width": 0.5, "seed": 0, "model": "m"}
PREPARE = to_device("cpu")
growth = importlib.import_module("scalemech.experiments.growth")  # the package's ``growth`` is the function
DEFAULTS = {
    key: spec["default"]
    for key, spec in schema()["properties"]["grow"]["properties"].items()
    if key in {f.name for f in dataclasses.fields(arms.ArmConfig)}
}

SAMPLING = Sampling(pool=64, M=4, K=4, batch_size=32)  # the certificate of the growth tests


def settings(**overrides) -> arms.ArmConfig:
    """The config's default arm settings, with SGD at lr 0.01 and ``overrides``."""
    return arms.ArmConfig(**{**DEFAULTS, "optimizer": "sgd", "lr": 0.01, **overrides})


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


def _rows(model, points, train, test, config, task=None, seed=0) -> pd.DataFrame:
    """``grow_points`` of ``model`` at ``points``: batches from ``train`` (or ``task``), held out ``test``."""
    task = TensorTask(*train) if task is None else task
    old = (
        mean_loss(model, *train, config.eval_batch_size, PREPARE),
        per_example_losses(model, *test, config.eval_batch_size, PREPARE),
    )
    data = arms.ArmData(task, train, test, PREPARE, derive_seed(seed, "order"))
    return pd.DataFrame(grow_points(model, points, data, old, config, seed))


def _row(model, point, train, test, config, seed=0) -> pd.Series:
    """``_rows`` at one point."""
    return _rows(model, [point], train, test, config, seed=seed).iloc[0]


def test_a_killed_growth_resumes_at_the_next_arm_with_the_same_rows(monkeypatch, tmp_path):
    """Each point's grown arm and the controls are kept as they finish; after a kill at the second point a
    rerun grows only the points not kept, and the rows equal an uninterrupted run's."""
    model, train, test = _setup()
    config = settings(steps=3, batch_size=16, lr_factors=[0.0, 1.0])
    points = model.insertion_points()[:3]
    expected = _rows(model, points, train, test, config)
    grown_at, original = [], growth.grow_at

    def kill_at_second(model, point, *args):
        grown_at.append(point)
        if len(grown_at) == 2:
            raise KeyboardInterrupt
        return original(model, point, *args)

    monkeypatch.setattr(growth, "grow_at", kill_at_second)
    old = (mean_loss(model, *train, config.eval_batch_size, PREPARE),
           per_example_losses(model, *test, config.eval_batch_size, PREPARE))  # fmt: skip
    data = arms.ArmData(TensorTask(*train), train, test, PREPARE, derive_seed(0, "order"))
    with pytest.raises(KeyboardInterrupt):
        grow_points(model, points, data, old, config, 0, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["arms", f"{points[0]}.pt"]  # arms: their resume states
    monkeypatch.setattr(
        growth, "grow_at", lambda model, point, *args: grown_at.append(point) or original(model, point, *args)
    )
    rows = pd.DataFrame(grow_points(model, points, data, old, config, 0, tmp_path))
    assert grown_at == [points[0], points[1], points[1], points[2]]  # the first point was read back
    pd.testing.assert_frame_equal(rows, expected)
    again = pd.DataFrame(grow_points(model, points, data, old, config, 0, tmp_path))  # all kept: nothing trains
    assert len(grown_at) == 4 and (tmp_path / "controls.pt").exists()
    pd.testing.assert_frame_equal(again, expected)


def test_an_arm_stopped_by_sigterm_keeps_its_step_and_a_rerun_resumes_there_with_the_same_rows(monkeypatch, tmp_path):
    """SIGTERM (a cluster's time limit) in the middle of the controls' run: the arm writes its state at the
    step it is at and stops (``Stopped``); the rerun trains only the steps after it and ends with the rows
    of an uninterrupted run."""
    model, train, test = _setup()
    config = settings(steps=9, batch_size=8, lr_factors=[0.0, 1.0], train_mode="all")
    points = model.insertion_points()[:1]
    expected = _rows(model, points, train, test, config)
    old = (mean_loss(model, *train, config.eval_batch_size, PREPARE),
           per_example_losses(model, *test, config.eval_batch_size, PREPARE))  # fmt: skip
    data = arms.ArmData(TensorTask(*train), train, test, PREPARE, derive_seed(0, "order"))
    original, steps = continued.TaskBatches.next, []

    def batch_then_sigterm(batches):
        steps.append(len(steps))
        if len(steps) == config.steps + 4:  # the controls' 4th step (the grown arm took the first 9)
            os.kill(os.getpid(), signal.SIGTERM)
        return original(batches)

    monkeypatch.setattr(continued.TaskBatches, "next", batch_then_sigterm)
    with pytest.raises(Stopped, match="stopped by SIGTERM at step 4"):
        grow_points(model, points, data, old, config, 0, tmp_path)
    steps.clear()
    rows = pd.DataFrame(grow_points(model, points, data, old, config, 0, tmp_path))
    assert len(steps) == max(config.steps, *rows.steps_control_flops) - 4  # the controls' steps after the 4th
    pd.testing.assert_frame_equal(rows, expected)


def test_recomputed_activations_give_the_rows_of_kept_ones(monkeypatch):
    """``grow.activation_checkpointing``: every block of every training step is recomputed in the backward
    (``torch.utils.checkpoint``), and the rows equal those of kept activations to float32 rounding."""
    from scalemech.models import base

    model, train, test = _setup()
    config = settings(steps=4, batch_size=8, lr_factors=[1.0], train_mode="all")
    points = model.insertion_points()[:2]
    kept = _rows(model, points, train, test, config)
    calls = []
    monkeypatch.setattr(base, "checkpoint", lambda *a, **k: calls.append(1) or checkpoint(*a, **k))
    recomputed = _rows(model, points, train, test, dataclasses.replace(config, activation_checkpointing=True))
    control_steps, blocks = max(config.steps, *kept.steps_control_flops), len(model.blocks)
    assert len(calls) == len(points) * config.steps * (blocks + 1) + control_steps * blocks  # a grown arm: 1 more
    pd.testing.assert_frame_equal(recomputed, kept, rtol=1e-6, atol=1e-7)
    assert not model.recompute


def test_grown_model_equals_old_and_the_jumpboard_descends():
    model, train, test = _setup()
    expanded, block = model.insert_block(model.insertion_points()[1])
    torch.testing.assert_close(expanded.eval()(test[0]), model(test[0]), rtol=0, atol=1e-6)
    old_loss = mean_loss(model, *train, 40, PREPARE)
    step, jump_loss, interior = arms.jumpboard(expanded, block, train, settings(eval_batch_size=40), PREPARE)
    assert step > 0 and jump_loss < old_loss and interior  # the line search brackets its optimum
    assert mean_loss(expanded, *train, 40, PREPARE) == pytest.approx(jump_loss)  # the block is left at θ_J


def test_a_new_block_that_is_not_the_identity_is_refused():
    model, train, test = _setup()
    model.new_block = lambda point: nn.Conv2d(8, 8, 3, padding=1)  # not zero at initialization
    with pytest.raises(ValueError, match="inserting a block at .* changed the model.s output by"):
        _row(model, model.insertion_points()[1], train, test, settings(steps=1))


@pytest.mark.parametrize("train_mode", ["block", "all"])
def test_one_point_grows_trains_falls_back_and_is_set_against_both_controls(train_mode):
    model, train, test = _setup()
    config = settings(steps=6, train_mode=train_mode, batch_size=16, lr=0.02, eval_batch_size=40)
    row = _row(model, model.insertion_points()[0], train, test, config)
    assert row.train_loss_jump < mean_loss(model, *train, 40, PREPARE)
    assert row.train_loss_grown <= row.train_loss_jump
    assert row.gain_old == pytest.approx(mean_loss(model, *test, 40, PREPARE) - row.test_loss_grown)
    assert row.gain_tokens == pytest.approx(row.test_loss_control_tokens - row.test_loss_grown)
    assert row.gain_flops == pytest.approx(row.test_loss_control_flops - row.test_loss_grown)
    control_step = row.flops_control_tokens / row.steps
    assert abs(row.flops_control_flops - row.flops_grown) <= control_step / 2  # equal FLOPs, to one step
    if train_mode == "block":  # no gradient for the old weights: a grown step costs less than a control step
        assert row.flops_grown < row.flops_control_tokens and row.steps_control_flops < row.steps
    else:  # one more block, every weight trained: a grown step costs more
        assert row.flops_grown > row.flops_control_tokens and row.steps_control_flops >= row.steps


def test_sabotaged_training_falls_back_to_the_jumpboard():
    model, train, test = _setup()
    config = settings(steps=5, train_mode="all", batch_size=16, lr=1e4, momentum=0.0, eval_batch_size=40)
    row = _row(model, model.insertion_points()[1], train, test, config)
    assert row.fallback
    assert row.train_loss_grown == row.train_loss_jump and row.test_loss_grown == row.test_loss_jump


def test_growth_ignores_the_global_rng_state():
    """The new block's weights and the batches come from the job's seeds: two calls after different
    global draws give the same row; another seed another block."""
    model, train, test = _setup()
    rows = []
    for global_seed in (1, 2):
        torch.manual_seed(global_seed)
        torch.rand(7)
        rows.append(_row(model, model.insertion_points()[1], train, test, settings(steps=2)))
    pd.testing.assert_series_equal(rows[0], rows[1])
    other = _row(model, model.insertion_points()[1], train, test, settings(steps=2), seed=1)
    assert other.test_loss_grown != rows[0].test_loss_grown


def test_every_arm_sees_the_same_batches_and_each_control_learning_rate_trains_once(monkeypatch):
    model, train, test = _setup()
    task = TensorTask(*train)
    config = settings(steps=3, batch_size=8, lr_factors=[0.0, 1.0], train_mode="all")
    runs = []
    original = arms.train_params
    monkeypatch.setattr(
        arms, "train_params", lambda *a, **k: runs.append(a[5] if len(a) > 5 else None) or original(*a, **k)
    )
    rows = _rows(model, model.insertion_points()[:3], train, test, config, task=task)
    assert runs[:3] == [None] * 3 and runs[3:] == [max(config.steps, *rows.steps_control_flops)]  # lr factor 0: f_old
    ahead = continued.STEPS_AHEAD  # each arm draws its batches this many steps at a time, in order
    assert len(task.drawn) == 4 * ahead
    first = task.drawn[:3]
    for run in range(1, 4):  # the two other grown arms, then the control: the same first three batches
        assert all(torch.equal(a, b) for a, b in zip(first, task.drawn[ahead * run : ahead * run + 3]))


def test_a_control_of_k_steps_is_the_first_k_steps_of_a_longer_run():
    model, train, test = _setup()
    config = settings(steps=4, batch_size=8, lr_factors=[1.0], lr=0.05)
    task = TensorTask(*train)
    old = mean_loss(model, *train, 40, PREPARE), per_example_losses(model, *test, 40, PREPARE)
    data = arms.ArmData(task, train, test, PREPARE, order_seed=3)
    both = growth.controls(model, data, config, counts=[2, 4], old=old)
    alone = growth.controls(model, data, config, counts=[2], old=old)
    torch.testing.assert_close(both[2][0], alone[2][0], rtol=0, atol=0)
    assert not torch.equal(both[2][0], both[4][0])


def test_a_damaging_recipe_leaves_the_equal_steps_control_at_f_old():
    """At a step size that wrecks a trained f_old (SGD at lr 3), the control trained at that lr alone ends
    far above f_old; chosen on the train loss from the grid (0, 0.1, 1)·lr, it ends within noise of f_old."""
    model, train, test = _setup()
    fit = settings(steps=150, batch_size=16, lr=0.02, eval_batch_size=40)
    fitting = arms.ArmData(TensorTask(*train), train, test, PREPARE, order_seed=0)
    arms.train_params(model, model.parameters(), fitting, fit)  # a trained f_old
    point = model.insertion_points()[1]

    def row(factors):
        config = settings(steps=5, batch_size=16, lr=3.0, momentum=0.0, eval_batch_size=40, lr_factors=factors)
        return _row(model, point, train, test, config)

    damaged, chosen = row([1.0]), row([0.0, 0.1, 1.0])
    assert not damaged.control_change <= 10 * mean_loss(model, *test, 40, PREPARE)  # the recipe wrecks f_old (or nan)
    assert chosen.control_change <= 2 * chosen.control_change_se
    assert chosen.lr_control_tokens in {3.0 * f for f in (0.0, 0.1, 1.0)}


def test_at_zero_steps_the_controls_are_the_old_model():
    model, train, test = _setup()
    row = _row(model, model.insertion_points()[1], train, test, settings(steps=0))
    assert row.control_change == 0 and row.steps_control_flops == 0 and row.flops_grown == 0
    old = per_example_losses(model, *test, DEFAULTS["eval_batch_size"], PREPARE).mean().item()
    assert row.test_loss_control_tokens == row.test_loss_control_flops == old


def _one_at_a_time(model, x, y) -> np.ndarray:
    """Brute force: each example's cross-entropy from its own forward pass."""
    with torch.no_grad():
        return np.array([F.cross_entropy(model(x[i : i + 1]), y[i : i + 1]).item() for i in range(len(x))])


def test_held_out_gains_and_their_standard_errors_match_brute_force(monkeypatch):
    model, train, test = _setup()
    scored = []  # (a copy of the model, its held-out losses) at every held-out evaluation
    original = growth.per_example_losses

    def record(m, *args):
        scored.append((copy.deepcopy(m), original(m, *args)))
        return scored[-1][1]

    monkeypatch.setattr(growth, "per_example_losses", record)
    config = settings(steps=4, batch_size=16, lr=0.05, eval_batch_size=7)  # 7 does not divide 40
    row = _row(model, model.insertion_points()[1], train, test, config)

    def brute(mean: float) -> np.ndarray:
        """Each example's loss by its own forward pass, of the evaluated model whose mean loss is ``mean``."""
        (found,) = [m for m, losses in scored if losses.mean().item() == mean]
        return _one_at_a_time(found, *test)

    old = _one_at_a_time(model, *test)
    np.testing.assert_allclose(per_example_losses(model, *test, 7, PREPARE).numpy(), old, rtol=1e-5)
    grown, tokens = brute(row.test_loss_grown), brute(row.test_loss_control_tokens)
    for gain, a, b in (("gain_old", old, grown), ("gain_tokens", tokens, grown), ("control_change", tokens, old)):
        diff = a - b
        assert row[gain] == pytest.approx(diff.mean(), rel=1e-4, abs=1e-7), gain
        assert row[f"{gain}_se"] == pytest.approx(np.std(diff, ddof=1) / np.sqrt(len(diff)), rel=1e-4), gain
    assert row.gain_old_se > 0 and row.test_loss_jump == pytest.approx(brute(row.test_loss_jump).mean(), rel=1e-5)


class TwoLayers(nn.Module):
    """``x → frozen Linear(i, h) → Linear(h, o)``, scored by cross-entropy: a step's FLOPs by hand."""

    def __init__(self, i: int, h: int, o: int):
        super().__init__()
        self.first, self.second = nn.Linear(i, h, bias=False), nn.Linear(h, o, bias=False)
        self.first.weight.requires_grad_(False)

    def forward(self, x):
        return self.second(self.first(x))

    def per_example_loss(self, logits, y):
        return F.cross_entropy(logits, y, reduction="none")


def test_step_flops_counts_the_forward_and_only_the_gradients_needed():
    b, i, h, o = 5, 7, 11, 3
    model = TwoLayers(i, h, o)
    flops = step_flops(model, lambda: model.per_example_loss(model(torch.randn(b, i)), torch.randint(o, (b,))).mean())
    assert flops == 2 * b * (i * h + h * o) + 2 * b * h * o  # forward, then the second layer's weight gradient
    model.first.weight.requires_grad_(True)
    both = step_flops(model, lambda: model.per_example_loss(model(torch.randn(b, i)), torch.randint(o, (b,))).mean())
    assert both == 2 * b * (i * h + h * o) + 2 * b * h * o + 2 * b * h * o + 2 * b * i * h  # + input grad, first
    assert model.second.weight.grad is None  # cleared afterwards


def test_the_signal_snapshot_is_the_earliest_trained_one_with_a_detected_mean():
    rows = pd.DataFrame(
        {
            "step": [0, 0, 2, 2, 4, 4, 8, 8],
            "split": ["train", "test"] * 4,
            "mu_sq_lo": [0.5, 0.5, -0.1, 0.3, 0.2, -1.0, 0.4, 0.4],
        }
    )
    assert signal_step(rows, final_step=8) == 4  # not 0 (initialization), not 2 (only the test split), not 8
    assert signal_step(rows.assign(mu_sq_lo=-1.0), final_step=8) is None


def test_one_row_per_snapshot_and_point_held_out_beside_the_certificate(trained_with_snapshots, tmp_path):
    model, data, snapshot_dir = trained_with_snapshots
    out = tmp_path
    steps = sorted(snapshot_paths(snapshot_dir))
    trajectory = pd.DataFrame({"step": steps, "split": "train", "mu_sq_lo": [1.0] * len(steps)})
    pools = []

    def certificate(at, points, snapshot):
        where = out / f"pools{len(pools)}"
        frame = certify_model(at, data, model_identity(KEYS), points, where, SAMPLING, device="cpu")
        frame["certify_rank"] = point_ranks(frame)
        pools.append(frame.attrs["pools"])
        return frame

    table = growth.growth(
        model, data, snapshot_dir, trajectory, KEYS, certificate, points=2, snapshots=["final", "signal"], pool=64,
        heldout=200, device="cpu", **{**DEFAULTS, "steps": 2, "batch_size": 16, "lr_factors": [0.0, 1.0]},
    )  # fmt: skip
    check_columns(table, "growth")
    assert list(table.snapshot) == ["final", "final", "signal", "signal"]
    assert list(table.snapshot_step) == [steps[-1]] * 2 + [steps[1]] * 2  # signal: the first after step 0
    assert table.n_heldout.eq(200).all() and sorted(table.certify_rank.iloc[:2]) == [1, 2]
    assert (table.predicted_gain == table.block_grad_norm).all()
    assert table.groupby("snapshot").test_loss_old.nunique().eq(1).all()  # f_old evaluated once per snapshot
    final, signal = table[table.snapshot == "final"], table[table.snapshot == "signal"]
    assert final.test_loss_old.iloc[0] != signal.test_loss_old.iloc[0]  # two different weights
    assert len(pools) == 2 and all(len(p["test"]) == 64 for p in pools)
    unseeded = growth.growth(
        copy.deepcopy(model), data, snapshot_dir, None, KEYS, certificate, points=2, snapshots=["final", "signal"],
        pool=64, heldout=200, device="cpu", **{**DEFAULTS, "steps": 2, "batch_size": 16, "lr_factors": [0.0, 1.0]},
    )  # fmt: skip
    assert list(unseeded.snapshot) == ["final", "final"]  # no trajectory: no signal snapshot
    pd.testing.assert_frame_equal(unseeded, table.iloc[:2])  # and the same rows for the final one


def test_the_held_out_examples_are_disjoint_from_the_certificates_test_pool(
    trained_with_snapshots, monkeypatch, tmp_path
):
    model, data, snapshot_dir = trained_with_snapshots
    out = tmp_path
    drawn = []
    original = growth.draw_disjoint
    monkeypatch.setattr(growth, "draw_disjoint", lambda *a: drawn.append((a, original(*a))) or drawn[-1][1])
    test_pool = []

    def certificate(at, points, snapshot):
        frame = certify_model(at, data, model_identity(KEYS), points, out / "pools-disjoint", SAMPLING, device="cpu")
        frame["certify_rank"] = point_ranks(frame)
        test_pool.extend(frame.attrs["pools"]["test"])
        return frame

    growth.growth(
        model, data, snapshot_dir, None, KEYS, certificate, points=1, snapshots=["final"], pool=64, heldout=300,
        device="cpu", **{**DEFAULTS, "steps": 1, "batch_size": 16, "lr_factors": [0.0]},
    )  # fmt: skip
    (((_, split, n, _, exclude), held),) = drawn
    assert split == "test" and n == 300 and sorted(exclude.tolist()) == sorted(test_pool)
    assert len(held) == 300 and not set(held.index.tolist()) & set(test_pool)


def test_a_hugging_face_model_grows_at_its_weights(tmp_path):
    """A pretrained (``hf``) model: no snapshots, no trajectory, one row per point of its weights, each
    held-out gain paired and finite, and ``insert_block`` the identity there as for the trained families."""
    from playtext import play_text
    from test_hf import save_tiny

    from scalemech.data import Prepared

    checkpoint = save_tiny("llama", tmp_path / "ckpt")
    model = build_model({"family": "hf", "checkpoint": checkpoint, "local_files_only": True, "block_size": 8})
    text = {split: torch.tensor(list(play_text(6000, seed).encode()), dtype=torch.uint8) for split, seed in
            (("train", 0), ("test", 1))}  # fmt: skip
    data = Prepared("play", "text", text["train"], None, text["test"], None, {}, 256)
    keys = {**KEYS, "dataset": "play", "family": "hf", "model": "hf-tiny"}

    def certificate(at, points, snapshot):
        sampling = Sampling(pool=16, M=4, K=4, batch_size=8)
        frame = certify_model(at, data, model_identity(keys), points, tmp_path / "pools", sampling, device="cpu")
        frame["certify_rank"] = point_ranks(frame)
        return frame

    table = growth.growth(
        model, data, None, None, keys, certificate, points="all", snapshots=["final", "signal"], pool=16,
        heldout=24, device="cpu", **{**DEFAULTS, "steps": 2, "batch_size": 4, "lr_factors": [0.0, 1.0]},
    )  # fmt: skip
    check_columns(table, "growth")
    assert list(table.point) == model.insertion_points() and (table.snapshot == "final").all()
    assert table.snapshot_step.isna().all() and table.n_heldout.eq(24).all()
    gains = table[["gain_old", "gain_old_se", "gain_tokens", "gain_flops"]]
    assert np.isfinite(gains.to_numpy(float)).all() and (table.gain_old_se > 0).all()


def test_an_arm_under_bf16_autocast_ends_within_its_tolerance_of_float32():
    """grow.precision bf16 (E11's arms): the same steps from the same start end at a held-out loss within
    BF16_TOLERANCE (relative) of float32's, and the weights stay float32."""
    bf16_tolerance = 0.02
    model, train, test = _setup()
    losses = {}
    for precision in ("fp32", "bf16"):
        config = settings(steps=10, batch_size=16, precision=precision)
        trained = copy.deepcopy(model)
        arms.train_params(trained, trained.parameters(), arms.ArmData(TensorTask(*train), train, test, PREPARE, 0),
                          config, lr=0.05)  # fmt: skip
        assert all(p.dtype == torch.float32 for p in trained.parameters())
        losses[precision] = float(per_example_losses(trained, *test, 64, PREPARE).mean())
    start = float(per_example_losses(model, *test, 64, PREPARE).mean())
    assert losses["fp32"] != start  # the arms trained
    assert losses["bf16"] == pytest.approx(losses["fp32"], rel=bf16_tolerance)
    assert losses["bf16"] != losses["fp32"]  # and bf16 is a different computation
