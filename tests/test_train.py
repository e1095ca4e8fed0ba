"""Tests of scalemech.training.train: learning, resumption, determinism, divergence, augmentation."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from scalemech.core.recipe import Recipe
from scalemech.core.tables import timing_columns
from scalemech.data import Prepared, load_prepared, normalize_images, prepare_dataset
from scalemech.models import build_model, load_model
from scalemech.models.memory import memory_format_for
from scalemech.tasks.images import crop_flip, draw_augmentation
from scalemech.training import train as train_module
from scalemech.training.checkpoints import snapshot_paths, snapshot_schedule
from scalemech.training.train import NonFiniteLossError, Stopped, evaluate, lr_at, total_steps_of, train

RESNET = {
    "family": "resnet",
    "depth": 8,
    "width": 0.5,
    "norm": "batch",
    "placement": "branch",
    "in_channels": 1,
    "num_classes": 10,
}
TINY_RESNET = {**RESNET, "width": 0.25}
LLAMA = {"family": "llama", "width": 64, "depth": 2, "head_dim": 32, "block_size": 32, "vocab_size": 256}


@pytest.fixture(scope="module")
def mnist(tmp_path_factory) -> Prepared:
    """The real mnist5k digits (4 000 train, 1 000 test), prepared by the data layer."""
    out = tmp_path_factory.mktemp("data") / "mnist5k"
    prepare_dataset("mnist5k", {}, out)
    return load_prepared(out)


@pytest.fixture(scope="module")
def small_mnist(mnist) -> Prepared:
    """512 train / 256 test digits: enough for determinism checks, a few seconds per run."""
    return dataclasses.replace(
        mnist,
        train_x=mnist.train_x[:512],
        train_y=mnist.train_y[:512],
        test_x=mnist.test_x[:256],
        test_y=mnist.test_y[:256],
    )


@pytest.fixture(scope="module")
def text() -> Prepared:
    """A byte stream of real text: the source of this interpreter's ``dataclasses.py``."""
    stream = torch.frombuffer(bytearray(Path(dataclasses.__file__).read_bytes()), dtype=torch.uint8)
    split = int(0.9 * len(stream))
    return Prepared("bytes", "text", stream[:split].clone(), None, stream[split:].clone(), None, {}, vocab_size=256)


# a recipe of a few dozen steps over small_mnist: 8 steps per epoch, augmentation on
RESUME_RECIPE = Recipe(
    steps=20,
    batch_size=64,
    lr=0.05,
    augment=True,
    eval_batch_size=256,
    eval_examples=256,
    warmup_fraction=0.1,
    grad_clip=5.0,
)


def train_tiny(
    data: Prepared, out: Path, recipe: Recipe = RESUME_RECIPE, *, seed: int = 3, checkpoint_every: int = 6, **options
) -> dict:
    """``train`` TINY_RESNET on ``data`` into ``out`` (checkpoints in ``out/ckpt``), on the CPU, quietly."""
    return train(
        TINY_RESNET,
        recipe,
        data,
        out,
        out / "ckpt",
        seed=seed,
        device="cpu",
        checkpoint_every=checkpoint_every,
        progress=False,
        **options,
    )


@pytest.fixture(scope="module")
def uninterrupted(small_mnist, tmp_path_factory) -> tuple[dict, Path]:
    out = tmp_path_factory.mktemp("uninterrupted")
    metrics = train_tiny(small_mnist, out)
    return metrics, out


def untimed(metrics: dict) -> dict:
    return {k: v for k, v in metrics.items() if k not in timing_columns()}


def test_training_lowers_mnist_test_loss(mnist, tmp_path):
    recipe = Recipe(steps=30, batch_size=32, lr=0.2, eval_batch_size=500, eval_examples=500)
    metrics = train(
        RESNET, recipe, mnist, tmp_path, tmp_path / "ckpt", seed=0, device="cpu", checkpoint_every=200, progress=False
    )
    curve = pd.read_csv(tmp_path / "curve.csv")
    assert list(curve.columns) == ["step", "epoch", "lr", "train_loss", "test_loss", "test_acc"]
    assert curve["step"].iloc[0] == 0 and curve["step"].iloc[-1] == 30
    assert curve["test_loss"].iloc[-1] < curve["test_loss"].iloc[0] - 0.2
    assert metrics["test_acc"] > 0.2 and metrics["steps"] == 30  # chance: 0.1
    assert json.loads((tmp_path / "metrics.json").read_text()) == metrics
    model, payload = load_model(tmp_path / "model.pt")
    assert payload["spec"] == RESNET and payload["seed"] == 0 and payload["recipe"]["steps"] == 30
    assert not any(p.isnan().any() for p in model.parameters())


def test_language_model_loss_drops(text, tmp_path):
    recipe = Recipe(
        optimizer="adamw",
        lr=3e-3,
        weight_decay=0.1,
        steps=40,
        batch_size=16,
        warmup_fraction=0.1,
        eval_every_steps=20,
        eval_windows=32,
        eval_batch_size=32,
    )
    metrics = train(
        LLAMA, recipe, text, tmp_path, tmp_path / "ckpt", seed=0, device="cpu", checkpoint_every=200, progress=False
    )
    curve = pd.read_csv(tmp_path / "curve.csv")
    assert list(curve["step"]) == [0, 20, 40]
    assert curve["test_loss"].iloc[0] > math.log(256) - 0.5  # starts near uniform over bytes
    assert curve["test_loss"].iloc[-1] < curve["test_loss"].iloc[0] - 1.0
    assert metrics["tokens_per_second"] == pytest.approx(metrics["examples_per_second"] * LLAMA["block_size"])


def test_resume_after_crash_matches_uninterrupted_run(uninterrupted, small_mnist, tmp_path):
    expected, expected_dir = uninterrupted

    def crash_after_13(step: int) -> None:
        if step == 13:
            raise KeyboardInterrupt("simulated crash")

    with pytest.raises(KeyboardInterrupt):
        train_tiny(small_mnist, tmp_path, on_step=crash_after_13)
    kept = ["step-000000006.pt", "step-000000012.pt"]
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == sorted(kept + [f"{k}.sha256" for k in kept])
    resumed_steps = []
    metrics = train_tiny(small_mnist, tmp_path, on_step=resumed_steps.append)
    assert resumed_steps[0] == 13  # resumed from step 12, not from 0
    assert list(pd.read_csv(expected_dir / "curve.csv")["step"]) == [0, 8, 16, 20]  # 8 steps per epoch
    assert untimed(metrics) == untimed(expected)
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "curve.csv"), pd.read_csv(expected_dir / "curve.csv"))
    weights = torch.load(tmp_path / "model.pt", weights_only=False)["state_dict"]
    expected_weights = torch.load(expected_dir / "model.pt", weights_only=False)["state_dict"]
    assert weights.keys() == expected_weights.keys()
    assert all(torch.equal(weights[k], expected_weights[k]) for k in weights)


def test_sigterm_checkpoints_the_step_and_resumes_to_the_same_weights(uninterrupted, small_mnist, tmp_path):
    """A cluster's time limit (SIGTERM) between checkpoints: the run saves the step it is at, exits with status
    1 naming it, and the rerun resumes there to the uninterrupted run's weights."""
    expected, expected_dir = uninterrupted

    def terminate_at_9(step: int) -> None:
        if step == 9:
            os.kill(os.getpid(), signal.SIGTERM)

    with pytest.raises(Stopped, match="SIGTERM at step 10 of 20") as stopped:
        train_tiny(small_mnist, tmp_path, on_step=terminate_at_9)
    assert stopped.value.code != 0
    assert "step-000000010.pt" in {p.name for p in (tmp_path / "ckpt").iterdir()}  # not a multiple of 6
    resumed_steps = []
    metrics = train_tiny(small_mnist, tmp_path, on_step=resumed_steps.append)
    assert resumed_steps[0] == 11 and untimed(metrics) == untimed(expected)
    weights = torch.load(tmp_path / "model.pt", weights_only=False)["state_dict"]
    expected_weights = torch.load(expected_dir / "model.pt", weights_only=False)["state_dict"]
    assert all(torch.equal(weights[k], expected_weights[k]) for k in weights)
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the handler is the run's alone


def test_same_seed_same_metrics_other_seed_differs(uninterrupted, small_mnist, tmp_path):
    expected, _ = uninterrupted
    again = train_tiny(small_mnist, tmp_path / "a", checkpoint_every=200)
    assert untimed(again) == untimed(expected)
    other = train_tiny(
        small_mnist, tmp_path / "b", dataclasses.replace(RESUME_RECIPE, steps=4), seed=4, checkpoint_every=200
    )
    assert other["train_loss"] != expected["train_loss"]


def steps_run(recipe: Recipe, data: Prepared, out: Path, crash_at: int | None = None, **options) -> list[int]:
    """Train TINY_RESNET (seed 3, ``options`` to ``train``) into ``out``; return the optimizer steps
    this call ran. With ``crash_at``, the run is interrupted (like a kill) right after that step."""
    steps: list[int] = []

    def on_step(step: int) -> None:
        steps.append(step)
        if step == crash_at:
            raise KeyboardInterrupt("simulated crash")

    try:
        train_tiny(data, out, recipe, on_step=on_step, **options)
    except KeyboardInterrupt:
        assert crash_at is not None
    return steps


def test_finished_run_trains_afresh_when_run_again(small_mnist, tmp_path):
    """A forced (or repeated) job retrains from step 0; the finished run's checkpoints are kept aside."""
    assert steps_run(RESUME_RECIPE, small_mnist, tmp_path) == list(range(1, 21))
    first = torch.load(tmp_path / "model.pt", weights_only=False)
    assert steps_run(RESUME_RECIPE, small_mnist, tmp_path) == list(range(1, 21))
    aside = [p for p in tmp_path.iterdir() if p.name.startswith("ckpt.")]
    assert len(aside) == 1 and (aside[0] / "complete.json").exists()
    again = torch.load(tmp_path / "model.pt", weights_only=False)
    assert all(torch.equal(first["state_dict"][k], again["state_dict"][k]) for k in first["state_dict"])


def test_model_file_is_free_of_timings(uninterrupted):
    metrics, out = uninterrupted
    stored = torch.load(out / "model.pt", weights_only=False)["metrics"]
    assert set(timing_columns()).isdisjoint(stored) and set(metrics) - set(stored) <= set(timing_columns())


def test_checkpoint_of_another_run_is_set_aside_not_reused(small_mnist, tmp_path):
    steps_run(RESUME_RECIPE, small_mnist, tmp_path, crash_at=8)
    edited = dataclasses.replace(RESUME_RECIPE, lr=0.04)  # a training key: another run
    assert steps_run(edited, small_mnist, tmp_path)[0] == 1
    assert any(p.name.startswith("ckpt.") for p in tmp_path.iterdir())


def test_evaluation_keys_are_not_part_of_the_identity(small_mnist, tmp_path):
    steps_run(RESUME_RECIPE, small_mnist, tmp_path, crash_at=8)
    eval_only = dataclasses.replace(RESUME_RECIPE, eval_batch_size=100)
    assert steps_run(eval_only, small_mnist, tmp_path)[0] == 7  # resumed from the step-6 checkpoint


def test_new_split_of_the_data_is_a_new_run(small_mnist, tmp_path):
    steps_run(RESUME_RECIPE, small_mnist, tmp_path, crash_at=19)
    files = small_mnist.manifest["files"]
    other_split = dataclasses.replace(
        small_mnist,
        manifest={
            **small_mnist.manifest,
            "files": {**files, "train_x.npy": {**files["train_x.npy"], "sha256": "0" * 64}},
        },
    )
    assert other_split.fingerprint != small_mnist.fingerprint
    assert steps_run(RESUME_RECIPE, other_split, tmp_path)[0] == 1  # not resumed at step 19


def test_truncated_newest_checkpoint_falls_back_to_the_previous(small_mnist, tmp_path, caplog):
    steps_run(RESUME_RECIPE, small_mnist, tmp_path, crash_at=13)
    newest = tmp_path / "ckpt" / "step-000000012.pt"
    newest.write_bytes(newest.read_bytes()[:1000])
    assert steps_run(RESUME_RECIPE, small_mnist, tmp_path)[0] == 7
    assert "step-000000012.pt" in caplog.text


def test_huge_lr_raises_non_finite_loss(small_mnist, tmp_path):
    recipe = Recipe(steps=6, batch_size=64, lr=1e6, eval_examples=64, eval_batch_size=256)
    with pytest.raises(NonFiniteLossError, match=r"non-finite .* at step \d+ of 6.*lower the recipe lr"):
        train_tiny(small_mnist, tmp_path, recipe, seed=0, checkpoint_every=200)
    assert not (tmp_path / "model.pt").exists()


def brute_force_crop_flip(x: torch.Tensor, shifts: torch.Tensor, flips: torch.Tensor, pad: int) -> torch.Tensor:
    """One example at a time: zero-pad, slice, mirror."""
    H, W = x.shape[-2:]
    out = []
    for xb, (i, j), flip in zip(x, shifts.tolist(), flips.tolist()):
        crop = F.pad(xb, (pad, pad, pad, pad))[:, i : i + H, j : j + W]
        out.append(crop.flip(-1) if flip else crop)
    return torch.stack(out)


@pytest.mark.parametrize("pad", [1, 4])
def test_crop_flip_equals_per_example_reference(pad):
    generator = torch.Generator().manual_seed(0)
    x = torch.randint(0, 256, (16, 3, 8, 10), dtype=torch.uint8, generator=generator)
    shifts = torch.randint(0, 2 * pad + 1, (16, 2), generator=generator)
    flips = torch.rand(16, generator=generator) < 0.5
    out = crop_flip(x, shifts, flips, pad)
    assert out.shape == x.shape and out.dtype == x.dtype
    assert torch.equal(out, brute_force_crop_flip(x, shifts, flips, pad))


def test_augment_is_seeded_and_covers_all_offsets():
    x = torch.arange(4 * 4, dtype=torch.uint8).view(1, 1, 4, 4).expand(2000, 1, 4, 4)

    def augment(seed: int) -> torch.Tensor:
        return crop_flip(x, *draw_augmentation(len(x), torch.Generator().manual_seed(seed), pad=1, flip=True), pad=1)

    a = augment(1)
    assert torch.equal(a, augment(1))
    assert a.shape == x.shape
    # each augmented image equals the reference for one of the 3·3·2 (shift, flip) choices
    choices = [
        brute_force_crop_flip(x[:1], torch.tensor([[i, j]]), torch.tensor([f]), 1)[0]
        for i in range(3)
        for j in range(3)
        for f in (False, True)
    ]
    hits = torch.stack([(a == c).flatten(1).all(1) for c in choices])  # (18, 2000)
    assert (hits.sum(0) >= 1).all()
    assert (hits.sum(1) > 0).all()  # every choice occurs


def test_evaluate_matches_one_big_batch(small_mnist):
    torch.manual_seed(0)
    model = build_model(TINY_RESNET).eval()
    x, y = small_mnist.test_x[:50], small_mnist.test_y[:50]
    normalize = lambda b: normalize_images(b, small_mnist.manifest)  # noqa: E731
    loss, acc, se = evaluate(model, x, y, batch_size=7, device="cpu", normalize=normalize)
    with torch.no_grad():
        logits = model(normalize(x))
    losses = F.cross_entropy(logits, y, reduction="none").double()
    assert loss == pytest.approx(losses.mean().item(), rel=1e-5)
    assert se == pytest.approx((losses.std() / len(y) ** 0.5).item(), rel=1e-4)  # sd/√n over the test examples
    assert acc == (logits.argmax(1) == y).sum().item() / len(y)


def test_budgets_in_steps():
    assert total_steps_of(Recipe(epochs=3), steps_per_epoch=7, block_size=None) == 21
    assert total_steps_of(Recipe(steps=5), steps_per_epoch=7, block_size=None) == 5
    assert total_steps_of(Recipe(tokens=10_000, batch_size=4), steps_per_epoch=7, block_size=25) == 100
    # 20 tokens per parameter of 1 001 parameters: 20 020 tokens, 200.2 steps of 4 × 25, rounded up
    assert total_steps_of(Recipe(tokens_per_parameter=20, batch_size=4), 7, block_size=25, parameters=1001) == 201
    with pytest.raises(ValueError, match="tokens=10000 is a budget for language models"):
        total_steps_of(Recipe(tokens=10_000), steps_per_epoch=7, block_size=None)


def test_lr_schedule_warmup_then_cosine_to_floor():
    recipe = Recipe(steps=100, lr=0.2, warmup_fraction=0.1, min_lr_fraction=0.05)
    lrs = [lr_at(s, 100, recipe) for s in range(100)]
    assert lrs[:10] == pytest.approx([0.2 * (s + 1) / 10 for s in range(10)])
    assert all(a >= b for a, b in zip(lrs[10:], lrs[11:]))
    assert lrs[55] == pytest.approx(0.2 * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * 45 / 90))))
    assert min(lrs) > 0.2 * 0.05


def test_recipe_validation():
    assert Recipe.from_dict({"epochs": 3, "lr": 0.05}).epochs == 3
    with pytest.raises(ValueError, match="unknown recipe key.*'learning_rate'.*allowed"):
        Recipe.from_dict({"epochs": 3, "learning_rate": 0.1})
    with pytest.raises(ValueError, match="exactly one budget"):
        Recipe(epochs=1, steps=10)
    with pytest.raises(ValueError, match="exactly one budget"):
        Recipe()
    with pytest.raises(ValueError, match="optimizer 'adam'"):
        Recipe(steps=1, optimizer="adam")


@pytest.mark.slow
def test_compiled_run_matches_eager(small_mnist, tmp_path):
    recipe = dataclasses.replace(RESUME_RECIPE, steps=4)
    eager = train_tiny(small_mnist, tmp_path / "eager", recipe, checkpoint_every=200)
    compiled = train_tiny(small_mnist, tmp_path / "compiled", recipe, checkpoint_every=200, compile=True)
    assert compiled["test_loss"] == pytest.approx(eager["test_loss"], rel=1e-3)
    assert compiled["train_loss"] == pytest.approx(eager["train_loss"], rel=1e-3)


LM_RECIPE = Recipe(optimizer="adamw", lr=3e-3, steps=6, batch_size=8, eval_every_steps=3, eval_windows=16)


def train_lm(data: Prepared, out: Path, **options) -> dict:
    """``train`` LLAMA on ``data`` with ``LM_RECIPE`` into ``out``, on the CPU, quietly."""
    return train(
        LLAMA, LM_RECIPE, data, out, out / "ckpt", seed=0, device="cpu", checkpoint_every=4, progress=False, **options
    )


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_compiled_language_model_matches_eager_and_resumes(text, tmp_path):
    """A compiled llama (a train/eval switch and a checkpoint mid-run) ends where the eager one does, and a
    compiled run killed after its checkpoint resumes to the same weights as the uninterrupted compiled run."""
    eager = train_lm(text, tmp_path / "eager")
    compiled = train_lm(text, tmp_path / "compiled", compile=True)
    assert compiled["test_loss"] == pytest.approx(eager["test_loss"], rel=1e-3)
    assert compiled["train_loss"] == pytest.approx(eager["train_loss"], rel=1e-3)

    def crash_at_5(step: int) -> None:
        if step == 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train_lm(text, tmp_path / "resumed", compile=True, on_step=crash_at_5)
    train_lm(text, tmp_path / "resumed", compile=True)
    whole, resumed = (load_model(tmp_path / run / "model.pt")[0].state_dict() for run in ("compiled", "resumed"))
    for name, weight in whole.items():
        torch.testing.assert_close(resumed[name], weight, rtol=1e-5, atol=1e-6, msg=name)


@pytest.fixture
def cpu_bf16(monkeypatch):
    """Training and evaluation autocast to bf16 on the CPU, as they do on CUDA (``train.AUTOCAST_DTYPES``)."""
    monkeypatch.setitem(train_module.AUTOCAST_DTYPES, "cpu", torch.bfloat16)


def test_bf16_autocast_trains_within_tolerance_of_float32(small_mnist, text, tmp_path, monkeypatch):
    """The CUDA path's bf16 autocast, run on the CPU: the ResNet (channels_last, batch norm) and the llama
    train, their losses stay float and within bf16's reach of the float32 run, and the weights stay float32."""
    recipe = dataclasses.replace(RESUME_RECIPE, steps=6)
    float32 = train_tiny(small_mnist, tmp_path / "f32", recipe, checkpoint_every=200), train_lm(text, tmp_path / "lm32")
    monkeypatch.setitem(train_module.AUTOCAST_DTYPES, "cpu", torch.bfloat16)
    bf16 = train_tiny(small_mnist, tmp_path / "bf16", recipe, checkpoint_every=200), train_lm(text, tmp_path / "lm16")
    for low, high in zip(bf16, float32):
        assert isinstance(low["test_loss"], float) and math.isfinite(low["train_loss"])
        assert low["test_loss"] == pytest.approx(high["test_loss"], rel=0.05)
        assert low["test_loss"] != high["test_loss"]  # the bf16 path ran
    for out in ("bf16", "lm16"):
        model, _ = load_model(tmp_path / out / "model.pt")
        assert {p.dtype for p in model.parameters()} == {torch.float32}


def test_bf16_evaluation_reports_float_losses(small_mnist, cpu_bf16):
    """``evaluate`` under bf16 autocast sums float losses: bf16 logits are cast before the cross-entropy."""
    torch.manual_seed(0)
    model = build_model(TINY_RESNET)

    def normalize(b: torch.Tensor) -> torch.Tensor:
        return normalize_images(b, small_mnist.manifest)

    x, y = small_mnist.test_x[:128], small_mnist.test_y[:128]
    low = evaluate(model, x, y, 64, "cpu", normalize)
    train_module.AUTOCAST_DTYPES.pop("cpu")
    high = evaluate(model, x, y, 64, "cpu", normalize)
    assert low[0] == pytest.approx(high[0], rel=0.02) and low[0] != high[0]


def test_memory_format_avoids_the_fragile_avx2_kernel():
    narrow, wide = build_model(TINY_RESNET), build_model({**TINY_RESNET, "width": 1})
    assert memory_format_for(narrow, torch.device("cpu")) == torch.contiguous_format  # 4 -> 8 strided 1x1
    assert memory_format_for(wide, torch.device("cpu")) == torch.channels_last  # 16 -> 32
    assert memory_format_for(narrow, torch.device("cuda")) == torch.channels_last


AVX2_TRAINING = """
import dataclasses, sys, tempfile
import torch
from scalemech.data import load_prepared, prepare_dataset
from scalemech.core.recipe import Recipe
from scalemech.training.train import train
torch.set_num_threads(1)
out = tempfile.mkdtemp()
prepare_dataset("mnist5k", {}, out + "/data")
data = load_prepared(out + "/data")
data = dataclasses.replace(data, train_x=data.train_x[:128], train_y=data.train_y[:128],
                           test_x=data.test_x[:64], test_y=data.test_y[:64])
spec = dict(family="resnet", depth=8, width=0.25, norm="batch", placement="branch", in_channels=1, num_classes=10)
train(spec, Recipe(steps=3, batch_size=32, eval_examples=64), data, out, out + "/ckpt", seed=0, device="cpu",
      checkpoint_every=200, progress=False)
print("trained")
"""


def test_width_quarter_resnet_trains_on_avx2_kernels():
    """Regression: the strided 1×1 shortcut conv in channels_last hangs/aborts in oneDNN's AVX2
    backward kernel. oneDNN is capped at AVX2 here, so the test bites on AVX-512 machines too."""
    env = {**os.environ, "ONEDNN_MAX_CPU_ISA": "AVX2"}
    result = subprocess.run([sys.executable, "-c", AVX2_TRAINING], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and "trained" in result.stdout, result.stderr[-2000:]


def test_snapshots_of_a_resumed_run_equal_an_uninterrupted_one(small_mnist, tmp_path):
    recipe = dataclasses.replace(RESUME_RECIPE, steps=12)
    runs = {}
    for name, crash_at in (("whole", None), ("resumed", 7)):
        out = tmp_path / name
        if crash_at:
            steps_run(recipe, small_mnist, out, crash_at, snapshots=6, snapshot_dir=out / "snapshots")
        steps_run(recipe, small_mnist, out, None, snapshots=6, snapshot_dir=out / "snapshots")
        identity = torch.load(out / "model.pt", weights_only=False)["identity"]
        runs[name] = snapshot_paths(out / "snapshots" / identity)
    assert sorted(runs["whole"]) == snapshot_schedule(12, 6) == sorted(runs["resumed"])
    for step, path in runs["whole"].items():
        whole, resumed = (torch.load(p, weights_only=True) for p in (path, runs["resumed"][step]))
        assert all(torch.equal(whole[k], resumed[k]) for k in whole), step
