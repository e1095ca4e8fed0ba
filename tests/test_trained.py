"""The training criterion (docs/science.md §7.1): the loss windows it reads, a model stopped early fails it, a
loss that rose fails it, a model trained to its budget passes, a model that misses it trains on up to its cap
(and is named if it still fails), and the claims leave a failing model out and say so."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from scalemech.core.recipe import Recipe
from scalemech.data import Prepared
from scalemech.models import load_model
from scalemech.report.trained import (
    EARLY,
    MIN_TOKENS_PER_PARAMETER,
    TRAINED,
    failed,
    judged_metrics,
    trained_only,
    training_check,
)
from scalemech.report.verdicts import claims
from scalemech.training.train import CONTINUE_LR, loss_windows, lr_of, train, window_means

LLAMA = {"family": "llama", "width": 16, "depth": 1, "head_dim": 16, "block_size": 16, "vocab_size": 256}
LLAMA_RECIPE = dict(optimizer="adamw", lr=3e-3, batch_size=16, warmup_fraction=0.05, grad_clip=1.0, eval_windows=32)


@pytest.fixture(scope="module")
def text() -> Prepared:
    """A byte stream of real text: the source of this interpreter's ``dataclasses.py``."""
    stream = torch.frombuffer(bytearray(Path(dataclasses.__file__).read_bytes()), dtype=torch.uint8)
    split = int(0.9 * len(stream))
    return Prepared("bytes", "text", stream[:split].clone(), None, stream[split:].clone(), None, {}, vocab_size=256)


@pytest.mark.parametrize("total", [1, 7, 10, 244, 460])
def test_loss_windows_average_the_steps_they_name(total):
    losses = torch.rand(total, dtype=torch.float64, generator=torch.Generator().manual_seed(total)).tolist()
    windows = loss_windows(total)
    assert windows["end"][1] == total and windows["late"][1] == round(0.8 * total)
    means = window_means(losses, windows)
    for name, (lo, hi) in windows.items():
        brute = [losses[s - 1] for s in range(1, total + 1) if lo < s <= hi]
        assert len(brute) >= 1 and means[name] == pytest.approx(sum(brute) / len(brute))


def row(**values) -> dict:
    keys = {"run": "t", "dataset": "mnist5k", "family": "resnet", "depth": 8, "width": 1.0, "seed": 0}
    model = {"model": "resnet-d8-w1-s0", "steps": 460, "epochs": 20, "train_loss": 0.01, "test_loss": 0.1}
    return {**keys, **model, "tokens_per_parameter": np.nan, "test_acc": 0.975, "loss_first": 2.3, **values}


def test_image_classifiers_need_a_plateau_and_the_accuracy_floor():
    check = training_check(
        pd.DataFrame(
            [
                row(model="converged", loss_late=0.0056, loss_end=0.0049),  # 0.0007 of 2.3 nats: a plateau
                row(model="falling", loss_late=0.50, loss_end=0.30),  # 0.2 of 2 nats: still being trained
                row(model="inaccurate", loss_late=0.10, loss_end=0.099, test_acc=0.96),
                row(model="narrow", width=0.25, loss_late=0.08, loss_end=0.079, test_acc=0.96),  # its own floor
                row(model="elsewhere", dataset="cifar10", loss_late=0.5, loss_end=0.49, test_acc=0.6),  # no floor
                row(model="unrecorded", loss_late=np.nan, loss_end=np.nan),  # a table without the windows
                row(model="rising", loss_late=0.30, loss_end=0.50),  # rose by 0.2 of a 1.8-nat fall: diverging
                row(model="noisy", loss_late=0.0050, loss_end=0.0056),  # rose by 0.0006 of 2.3 nats: flat
            ]
        )
    ).set_index("model")
    assert check["passed"].to_dict() == {
        "converged": True,
        "falling": False,
        "inaccurate": False,
        "narrow": True,
        "elsewhere": True,
        "unrecorded": False,
        "rising": False,
        "noisy": True,
    }
    assert "no plateau: the last 20 % rose by 11.1% of the loss's fall (0.2 of 1.8 nats)" in check.loc["rising", "why"]
    assert "no plateau: the last 20 % brought 10.0% of the loss's fall (0.2 of 2 nats)" in check.loc["falling", "why"]
    assert "test accuracy 0.9600 < 0.97" in check.loc["inaccurate", "why"]
    assert check.loc["elsewhere", "why"] == "plateau (no accuracy floor)"


def test_language_models_need_the_tokens_or_a_plateau():
    lm = dict(family="llama", model="llama", test_acc=0.5, loss_first=5.5)
    check = training_check(
        pd.DataFrame(
            [
                row(**lm, tokens_per_parameter=MIN_TOKENS_PER_PARAMETER, loss_late=2.0, loss_end=1.5),
                row(**lm, tokens_per_parameter=4.0, loss_late=2.0, loss_end=1.99),
                row(**lm, tokens_per_parameter=4.0, loss_late=2.0, loss_end=1.5),
            ]
        )
    )
    assert check["passed"].tolist() == [True, True, False]
    assert check["why"].tolist()[2].startswith("4 tokens per parameter < 20 and no plateau")
    early = training_check(check.assign(tokens_per_parameter=4.0, loss_late=2.0, loss_end=1.5), EARLY)
    assert early["passed"].all() and early["why"].str.startswith("not held (early-training run)").all()


@pytest.mark.timeout(240)
def test_a_model_stopped_early_fails_and_one_trained_to_its_budget_passes(text, tmp_path):
    """Real training: a llama stopped after 60 steps at a nearly constant lr (its schedule has not annealed the
    loss flat) still falls fast, far from 20 tokens per parameter; the same llama at a budget of 20 tokens per
    parameter meets the criterion."""
    runs = {
        "stopped": Recipe(steps=60, min_lr_fraction=0.9, **LLAMA_RECIPE),
        "trained": Recipe(tokens_per_parameter=20, **LLAMA_RECIPE),
    }
    rows = []
    for name, recipe in runs.items():
        labels = {"run": "t", "dataset": "bytes", "family": "llama", "depth": 1, "width": 16, "seed": 0, "model": name}
        out = tmp_path / name
        rows.append(train(LLAMA, recipe, text, out, out / "ck", seed=0, device="cpu", checkpoint_every=10**6,
                          labels=labels, progress=False))  # fmt: skip
    check = training_check(pd.DataFrame(rows), TRAINED).set_index("model")
    assert rows[1]["tokens_per_parameter"] >= MIN_TOKENS_PER_PARAMETER > rows[0]["tokens_per_parameter"]
    assert rows[0]["loss_late"] > rows[0]["loss_end"]  # the loss still fell at the end
    assert check["passed"].to_dict() == {"stopped": False, "trained": True}
    assert rows[1]["train_loss"] < rows[0]["train_loss"]


def test_continued_rounds_restart_the_cosine_at_a_tenth_of_the_lr():
    recipe = Recipe(steps=100, lr=0.2, warmup_fraction=0.1)
    assert lr_of(99, 100, 25, recipe) < 0.001 and lr_of(100, 100, 25, recipe) == pytest.approx(CONTINUE_LR * 0.2)
    assert lr_of(124, 100, 25, recipe) < lr_of(110, 100, 25, recipe) < CONTINUE_LR * 0.2
    assert lr_of(125, 100, 25, recipe) == lr_of(100, 100, 25, recipe)  # each round restarts


@pytest.mark.timeout(240)
def test_a_model_that_misses_the_criterion_trains_on_up_to_its_cap(text, tmp_path):
    """Real training: a criterion met only past 90 steps makes a 60-step llama train on in rounds of 15 steps
    (to 90), and a crash inside a round resumes to the same weights; the real criterion on a llama stopped
    early (60 steps at a nearly constant lr, far from 20 tokens per parameter) leaves it failing after its one
    round: the metrics say so, and the report names it."""
    recipe = Recipe(steps=60, min_lr_fraction=0.9, **LLAMA_RECIPE)
    labels = {"run": "t", "dataset": "bytes", "family": "llama", "depth": 1, "width": 16, "seed": 0}

    def past_90(metrics: dict) -> tuple[bool, str]:
        return metrics["steps"] >= 90, f"{metrics['steps']} steps"

    def run(name: str, criterion, rounds: int, **options) -> dict:
        out = tmp_path / name
        return train(LLAMA, recipe, text, out, out / "ck", seed=0, device="cpu", checkpoint_every=10, progress=False,
                     labels=labels | {"model": name}, criterion=criterion, rounds=rounds, round_fraction=0.25,
                     **options)  # fmt: skip

    capped = run("capped", past_90, rounds=5)
    assert capped["steps"] == 90 and capped["continued_rounds"] == 2 and capped["criterion_why"] == "90 steps"

    def crash_at_83(step: int) -> None:
        if step == 83:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run("resumed", past_90, rounds=5, on_step=crash_at_83)
    resumed = run("resumed", past_90, rounds=5)
    assert resumed["steps"] == 90 and resumed["loss_end"] == capped["loss_end"]
    whole, again = (load_model(tmp_path / name / "model.pt")[0].state_dict() for name in ("capped", "resumed"))
    for name, weight in whole.items():
        torch.testing.assert_close(again[name], weight, msg=name)

    still = run("still", judged_metrics, rounds=1)
    assert still["steps"] == 75 and still["continued_rounds"] == 1
    check = training_check(pd.DataFrame([still]))
    assert failed(check) == ["bytes/still"]
    assert check["why"][0].endswith("after 1 round of continued training") and "no plateau" in check["why"][0]


def test_claims_leave_a_failing_model_out_and_count_the_models_they_rest_on():
    models = [f"resnet-d{d}-w1-s0" for d in (8, 14, 20)]
    keys = [row(model=m, depth=d, loss_late=0.01, loss_end=0.01) for m, d in zip(models, (8, 14, 20))]
    keys[2].update(loss_late=0.5, loss_end=0.3)  # the deepest model stopped early
    training = pd.DataFrame(keys)
    signal = pd.DataFrame([{k: r[k] for k in ("run", "dataset", "family", "depth", "width", "seed", "model")}
                           for r in keys])  # fmt: skip
    check = training_check(training)
    assert failed(check) == ["mnist5k/resnet-d20-w1-s0"]
    kept = trained_only({"training": training, "signal": signal}, check)
    assert kept["signal"]["model"].tolist() == models[:2] and kept["training"]["model"].tolist() == models[:2]
    rows = claims({"training": training}).set_index("claim")
    assert rows.loc["D3", "models"] == "2 of 3 (1 not trained)"
    assert rows.loc["W1", "models"] == ""  # no table it reads
