"""Resumable, fast, deterministic training of one model on one prepared dataset.

Defines ``train`` (one run of a ``Recipe``, ``scalemech.core.recipe``, resumable from
its own checkpoints), ``evaluate`` and the optimizer (``optimizer_for``, ``make_optimizer``); the
batches and their augmentation come from the task (``scalemech.tasks``: ``images.ImageBatches``,
``windows.TextBatches``).

- Data lives on the device as one uint8 tensor; normalization and augmentation (random
  crop with 4-pixel zero padding and horizontal flip, He et al. 2016) are batched tensor
  operations with no per-example Python, as in airbench (Jordan 2024, ``airbench94.py``).
- One seeded CPU ``torch.Generator`` draws every shuffle, crop, flip and text window, so a
  run's batches do not depend on the device; its state is checkpointed.
- Schedule: linear warmup (Goyal et al. 2017) then cosine decay to ``min_lr_fraction·lr``
  (Loshchilov & Hutter 2017). The lr is a pure function of the step, so the step is the
  whole scheduler state.
- Continued training (docs/science.md §7.1): given a ``criterion``, a model that misses it after
  its budget trains on in rounds of ``round_fraction`` of the budget, each a warm restart (a cosine
  from ``CONTINUE_LR``·lr, ``lr_of``), up to ``rounds`` rounds, until it meets it.
- SGD with (Nesterov) momentum or AdamW (Loshchilov & Hutter 2019); weight decay only on
  conv/linear weight matrices, never on norm gains, biases or embeddings (nanoGPT's
  ``configure_optimizers``).
- CUDA: bf16 autocast; image models run channels_last (deterministic on CPU, and faster there
  with oneDNN), except where oneDNN's AVX2 kernel fails (``memory_format_for``). On CPU a run is
  bit-reproducible for a fixed thread count, and a resumed run ends with the same weights as an
  uninterrupted one; checkpoints and run identity are ``scalemech.training.checkpoints``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import platform
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from tqdm import tqdm

from ..core.device import resolve_device, set_training_numerics
from ..core.integrity import atomic_write, write_json
from ..core.recipe import Recipe
from ..core.tables import timing_columns
from ..data import Prepared
from ..models import build_model, save_model
from ..models.memory import memory_format_for
from ..tasks import Task
from ..tasks.images import ImageBatches
from ..tasks.windows import TextBatches
from .checkpoints import (
    checkpoint_lock,
    identity_hash,
    mark_complete,
    resume_state,
    run_identity,
    save_checkpoint,
    save_snapshot,
    snapshot_schedule,
)

SYNC_EVERY = 50  # steps between host syncs (non-finite check, progress bar) in the hot loop
EVAL_SEED = 0  # fixed seed of the evaluation subsets/windows: the same for every run
CURVE_COLUMNS = ["step", "epoch", "lr", "train_loss", "test_loss", "test_acc"]
CONTINUE_LR = 0.1  # a round of continued training restarts its cosine at this share of the recipe's peak lr
Criterion = Callable[[dict[str, Any]], tuple[bool, str]]  # a model's metrics -> (meets it, why)


class NonFiniteLossError(FloatingPointError):
    """The training loss became NaN or infinite."""


class Stopped(SystemExit):
    """Training stopped on SIGTERM (a cluster's time limit or preemption) after checkpointing its step."""


@contextlib.contextmanager
def sigterm_requested() -> Iterator[list[bool]]:
    """A one-element list that turns ``[True]`` when the process receives SIGTERM during the block (the main
    thread's handler; elsewhere nothing is installed and it stays ``[False]``)."""
    requested = [False]
    if threading.current_thread() is not threading.main_thread():
        yield requested
        return

    def request(signum, frame) -> None:
        requested[0] = True

    previous = signal.signal(signal.SIGTERM, request)
    try:
        yield requested
    finally:
        signal.signal(signal.SIGTERM, previous)


# -- schedule and optimizer ------------------------------------------------------------------
def lr_at(step: int, total_steps: int, recipe: Recipe) -> float:
    """lr of step ``s`` (0-based) of ``S``, with ``W = round(warmup_fraction·S)`` warmup steps:

    s < W:  lr·(s+1)/W
    else:   lr·(m + (1−m)·½(1 + cos(π·(s−W)/(S−W))))      m = min_lr_fraction
    """
    warmup = round(recipe.warmup_fraction * total_steps)
    if step < warmup:
        return recipe.lr * (step + 1) / warmup
    progress = (step - warmup) / max(1, total_steps - warmup)
    floor = recipe.min_lr_fraction
    return recipe.lr * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress)))


def lr_of(step: int, total_steps: int, round_steps: int, recipe: Recipe) -> float:
    """lr of step ``s`` of a run whose budget is ``S`` steps, continued in rounds of ``E`` steps:
    ``lr_at(s, S)`` within the budget; after it each round is a warm restart without warmup,
    ``CONTINUE_LR · lr_at((s − S) mod E, E)``."""
    if step < total_steps:
        return lr_at(step, total_steps, recipe)
    restart = dataclasses.replace(recipe, warmup_fraction=0.0)
    return CONTINUE_LR * lr_at((step - total_steps) % round_steps, round_steps, restart)


def optimizer_for(
    groups: list[dict[str, Any]],
    kind: str,
    lr: float,
    momentum: float,
    nesterov: bool = False,
    betas: tuple[float, float] = (0.9, 0.999),
) -> torch.optim.Optimizer:
    """``kind`` ``sgd``: SGD with ``momentum`` (Nesterov if ``nesterov``); any other: AdamW with ``betas``.
    Each of ``groups`` (``{"params", "weight_decay"}``) holds its own weight decay (L2 for SGD, decoupled
    for AdamW). On CUDA the update is torch's fused kernel (one launch for every tensor); elsewhere the
    default loop, so CPU runs keep their numbers."""
    fused = all(p.is_cuda for group in groups for p in group["params"]) or None
    if kind == "sgd":
        return torch.optim.SGD(groups, lr=lr, momentum=momentum, nesterov=nesterov, fused=fused)
    return torch.optim.AdamW(groups, lr=lr, betas=betas, fused=fused)


def make_optimizer(model: nn.Module, recipe: Recipe) -> torch.optim.Optimizer:
    """``optimizer_for`` the recipe with two groups: decayed weight matrices (dim ≥ 2, not embeddings)
    and the rest; AdamW's betas ``(momentum, beta2)``."""
    embeddings = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if p.dim() >= 2 and id(p) not in embeddings]
    no_decay = [p for p in params if p.dim() < 2 or id(p) in embeddings]
    groups = [{"params": decay, "weight_decay": recipe.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    betas = (recipe.momentum, recipe.beta2)
    return optimizer_for(groups, recipe.optimizer, recipe.lr, recipe.momentum, recipe.nesterov, betas)


# -- evaluation -------------------------------------------------------------------------------
AUTOCAST_DTYPES: dict[str, torch.dtype] = {"cuda": torch.bfloat16}
"""Device type -> the dtype training and evaluation autocast to; other devices run in float32 (the
tests add ``"cpu"`` to run the bf16 path on CPUs)."""


def autocast(device: torch.device) -> contextlib.AbstractContextManager:
    """Autocast to ``AUTOCAST_DTYPES[device.type]`` (bf16 on CUDA), a no-op elsewhere."""
    dtype = AUTOCAST_DTYPES.get(device.type)
    return torch.autocast(device.type, dtype=dtype) if dtype is not None else contextlib.nullcontext()


@torch.no_grad()
def evaluate(
    model: nn.Module,
    x: Tensor,
    y: Tensor,
    batch_size: int,
    device: torch.device | str,
    normalize: Callable[[Tensor], Tensor],
) -> tuple[float, float, float]:
    """``(mean per-example loss, accuracy, SE of the mean loss)`` of ``model`` in eval mode over ``(x, y)``.

    ``normalize`` maps a stored batch (on ``device``) to model input. Loss is the family's
    ``per_example_loss`` (LM: mean token cross-entropy of a sequence) averaged over the ``n`` examples;
    its SE is ``sd/√n`` of the per-example losses (the test-set draw only); accuracy is correct
    predictions over ``y.numel()`` (LM: token accuracy).
    """
    device = torch.device(device)
    base = getattr(model, "_orig_mod", model)  # a torch.compile wrapper keeps the model here
    was_training = model.training
    model.eval()
    loss_sum = torch.zeros((), dtype=torch.float64, device=device)
    square_sum = torch.zeros((), dtype=torch.float64, device=device)
    correct = torch.zeros((), dtype=torch.int64, device=device)
    for i in range(0, len(x), batch_size):
        xb, yb = x[i : i + batch_size].to(device), y[i : i + batch_size].to(device)
        with autocast(device):
            output = model(normalize(xb))
        losses = base.per_example_loss(output, yb).double()
        loss_sum += losses.sum()
        square_sum += (losses**2).sum()
        correct += base.correct(output, yb)
    model.train(was_training)
    n = len(x)
    mean = loss_sum.item() / n
    variance = max(square_sum.item() - n * mean**2, 0.0) / (n - 1) if n > 1 else math.nan
    return mean, correct.item() / y.numel(), math.sqrt(variance / n)


# -- training ---------------------------------------------------------------------------------
@dataclass
class TrainingData:
    """What the loop needs from a task: batches, the map to model input, evaluation sets."""

    batches: ImageBatches | TextBatches
    to_input: Callable[[Tensor], Tensor]  # stored batch on the device -> model input
    test: tuple[Tensor, Tensor]  # images: the whole test split; LMs: fixed windows
    train_eval: tuple[Tensor, Tensor]  # a fixed subset of the train split for final metrics
    train_eval_note: str  # what train_eval is, for metrics.json
    eval_every: int  # steps between test evaluations
    block_size: int | None  # tokens per example of a language model; None for images
    memory_format: torch.memory_format  # of the model and its image inputs
    augmented: str | None  # the augmentation of the batches (images.wants_augment), None for none


def training_data(
    task: Task, recipe: Recipe, device: torch.device, generator: torch.Generator, memory_format: torch.memory_format
) -> TrainingData:
    """The task's train batches on ``device`` and its evaluation sets (seed ``EVAL_SEED``)."""
    batches, augmented = task.batches(recipe, generator, device)
    test, train_eval, note = task.evaluation_sets(recipe, EVAL_SEED)

    def to_input(xb: Tensor) -> Tensor:
        return task.to_input(xb).contiguous(memory_format=memory_format)

    return TrainingData(
        batches,
        to_input,
        (test[0].to(device), test[1]),
        train_eval,
        note,
        task.eval_every(recipe, batches.steps_per_epoch),
        task.block_size,
        memory_format,
        augmented,
    )


def check_finite(losses: Tensor, first_step: int, total_steps: int, recipe: Recipe) -> None:
    """Raise ``NonFiniteLossError`` naming the first step (1-based) whose loss in ``losses`` is not finite."""
    finite = torch.isfinite(losses)
    if not finite.all():
        i = int((~finite).nonzero()[0])
        raise NonFiniteLossError(
            f"the training loss became non-finite ({losses[i].item()}) at step {first_step + i} of {total_steps} "
            f"(lr {lr_at(first_step + i - 1, total_steps, recipe):.3g}); lower the recipe lr (now {recipe.lr}) "
            f"or set grad_clip"
        )


def train(
    spec: dict[str, Any],
    recipe: Recipe,
    data: Prepared,
    out_dir: str | Path,
    checkpoint_dir: str | Path,
    seed: int,
    device: str | torch.device,
    checkpoint_every: int,
    compile: bool = False,
    labels: dict[str, Any] | None = None,
    snapshots: int = 0,
    snapshot_dir: str | Path | None = None,
    progress: bool = True,
    on_step: Callable[[int], None] | None = None,
    criterion: Criterion | None = None,
    rounds: int = 0,
    round_fraction: float = 0.25,
    deterministic: bool = False,
) -> dict[str, Any]:
    """Train ``build_model(spec)`` (torch seeded with ``seed``) on ``data`` with ``recipe``; resume
    from ``checkpoint_dir`` if it holds a checkpoint of this run. Writes ``model.pt``,
    ``metrics.json`` (``labels``, e.g. the model's table keys, then the metrics) and ``curve.csv``
    into ``out_dir`` and returns what ``metrics.json`` holds. With ``snapshots`` > 0 the weights
    at the steps of ``snapshot_schedule`` are kept under ``snapshot_dir/<identity hash>/``
    (weights only, apart from the resume checkpoints; ``model.pt`` records the hash).
    ``criterion`` (the metrics → whether the model meets it, and why): a model that misses it after its
    budget of ``S`` steps trains on, up to ``rounds`` rounds of ``⌈round_fraction·S⌉`` steps (``lr_of``),
    until it meets it; ``continued_rounds`` and ``criterion_why`` in the metrics say how it ended.
    ``on_step(step)`` is called after every step (a test hook: raising from it interrupts the
    run like a crash). On SIGTERM (a cluster's time limit, a preemption) the run checkpoints the step it
    is at and raises ``Stopped`` (exit status 1, so the workflow retries the job, which resumes there).
    The run holds ``checkpoint_lock(checkpoint_dir)`` throughout: while another
    trainer holds it, ``CheckpointLockedError`` (an ``OSError``) at once, with nothing read or written.
    On CUDA, ``core.device.set_training_numerics(deterministic)``: TF32 and autotuned cuDNN, or with
    ``deterministic`` cuDNN's deterministic algorithms (a CPU run is reproducible either way).
    """
    out_dir, checkpoint_dir, device = Path(out_dir), Path(checkpoint_dir), resolve_device(device)
    with checkpoint_lock(checkpoint_dir), sigterm_requested() as stop:  # the lock before any checkpoint is read
        wall_start = time.perf_counter()
        if device.type == "cuda":
            set_training_numerics(deterministic)
        generator = torch.Generator().manual_seed(seed)
        torch.manual_seed(seed)
        model = build_model(spec)
        task = training_data(model.task(data), recipe, device, generator, memory_format_for(model, device))
        model = model.to(device, memory_format=task.memory_format)
        step_model = torch.compile(model) if compile else model
        optimizer = make_optimizer(model, recipe)
        batches, spe = task.batches, task.batches.steps_per_epoch
        parameters = non_embedding_parameters(model)
        total_steps = total_steps_of(recipe, spe, task.block_size, parameters)
        round_steps = max(1, math.ceil(round_fraction * total_steps))
        if criterion is None:
            rounds = 0
        continuation = {"rounds": rounds, "round_steps": round_steps, "lr": CONTINUE_LR} if rounds else None
        run = run_identity(spec, asdict(recipe), seed, data.name, data.fingerprint, continuation)
        snapshot_steps = set(snapshot_schedule(total_steps, snapshots))
        snapshot_run = Path(snapshot_dir or out_dir / "snapshots") / identity_hash(run)

        def test_point(step: int, train_loss: float) -> dict[str, float]:
            test = evaluate(step_model, *task.test, recipe.eval_batch_size, device, task.to_input)
            test_loss, test_acc, test_se = test
            return {
                "step": step,
                "epoch": step / spe,
                "lr": lr_of(max(step - 1, 0), total_steps, round_steps, recipe),
                "train_loss": train_loss,
                "test_loss": test_loss,
                "test_acc": test_acc,
                "test_loss_se": test_se,
            }

        state = resume_state(checkpoint_dir, run)
        if state is None:
            step, curve, train_seconds, loss_sum, loss_count = 0, [test_point(0, math.nan)], 0.0, 0.0, 0
            step_losses: list[float] = []
            target = total_steps
            if 0 in snapshot_steps:
                save_snapshot(snapshot_run, 0, model)
        else:
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            generator.set_state(state["generator"])
            torch.set_rng_state(state["torch_rng"])
            if device.type == "cuda":
                torch.cuda.set_rng_state(state["cuda_rng"], device)
            batches.load_state_dict(state["batches"])
            step, curve, train_seconds = state["step"], state["curve"], state["train_seconds"]
            loss_sum, loss_count = state["loss_sum"], state["loss_count"]  # running train loss since the last eval
            step_losses, target = state["step_losses"], state["target"]

        pending: list[Tensor] = []  # step losses not yet checked on the host
        bar = tqdm(
            total=target,
            initial=step,
            file=sys.stderr,
            disable=not progress,
            dynamic_ncols=True,
            desc=f"{spec['family']} {data.name} s{seed}",
        )
        model.train()
        tick, tick_step = time.perf_counter(), step
        while True:
            while step < target:
                lr = lr_of(step, total_steps, round_steps, recipe)
                for group in optimizer.param_groups:
                    group["lr"] = lr
                inputs, targets = batches.batch(step)
                with autocast(device):
                    output = step_model(task.to_input(inputs))
                loss = F.cross_entropy(
                    output.flatten(0, -2).float(), targets.flatten(), label_smoothing=recipe.label_smoothing
                )
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                if recipe.grad_clip is not None:
                    nn.utils.clip_grad_norm_(model.parameters(), recipe.grad_clip)
                optimizer.step()
                pending.append(loss.detach())
                step += 1
                if step in snapshot_steps:
                    save_snapshot(snapshot_run, step, model)

                evaluate_now = step % task.eval_every == 0 or step == target
                checkpoint_now = step % checkpoint_every == 0 or step == target or stop[0]
                if evaluate_now or checkpoint_now or len(pending) >= SYNC_EVERY:
                    losses = torch.stack(pending).double().cpu()  # the host sync of this interval
                    check_finite(losses, step - len(pending) + 1, target, recipe)
                    loss_sum, loss_count = loss_sum + losses.sum().item(), loss_count + len(pending)
                    step_losses += losses.tolist()
                    seconds = time.perf_counter() - tick
                    train_seconds += seconds
                    bar.update(step - tick_step)
                    bar.set_postfix(
                        loss=f"{losses[-1].item():.4f}",
                        lr=f"{lr:.3g}",
                        ex_s=f"{(step - tick_step) * batches.batch_size / max(seconds, 1e-9):.0f}",
                    )
                    pending = []
                    if evaluate_now:
                        curve.append(test_point(step, loss_sum / loss_count))
                        loss_sum, loss_count = 0.0, 0
                    if checkpoint_now:
                        save_checkpoint(
                            checkpoint_dir,
                            {
                                "run": run,
                                "step": step,
                                "target": target,
                                "model": model.state_dict(),
                                "optimizer": optimizer.state_dict(),
                                "generator": generator.get_state(),
                                "torch_rng": torch.get_rng_state(),
                                "cuda_rng": torch.cuda.get_rng_state(device) if device.type == "cuda" else None,
                                "batches": batches.state_dict(),
                                "curve": curve,
                                "loss_sum": loss_sum,
                                "loss_count": loss_count,
                                "step_losses": step_losses,
                                "train_seconds": train_seconds,
                            },
                        )
                    tick, tick_step = time.perf_counter(), step
                    if stop[0]:
                        raise Stopped(
                            f"training stopped by SIGTERM at step {step} of {target}, checkpointed in "
                            f"{checkpoint_dir}; run the same command again to resume there"
                        )
                if on_step is not None:
                    on_step(step)

            train_loss, train_acc, _ = evaluate(
                step_model, *task.train_eval, recipe.eval_batch_size, device, task.to_input
            )
            examples_per_second = step * batches.batch_size / max(train_seconds, 1e-9)
            tokens = step * batches.batch_size * task.block_size if task.block_size else None
            continued = (step - total_steps) // round_steps
            metrics = {
                **(labels or {}),
                "train_loss": train_loss,
                "train_acc": train_acc,
                "test_loss": curve[-1]["test_loss"],
                "test_loss_se": curve[-1].get("test_loss_se", math.nan),
                "test_acc": curve[-1]["test_acc"],
                "steps": step,
                "epochs": step / spe,
                "parameters": parameters,
                "tokens_per_parameter": tokens / parameters if tokens else None,
                **{f"loss_{name}": mean for name, mean in window_means(step_losses, loss_windows(step)).items()},
                "continued_rounds": continued,
                "batch_size": batches.batch_size,
                "examples_per_second": examples_per_second,
                "tokens_per_second": examples_per_second * task.block_size if task.block_size else None,
                "train_seconds": train_seconds,
                "wall_seconds": time.perf_counter() - wall_start,
                "augment": task.augmented or "none",
                "train_eval": task.train_eval_note,
                "device": str(device),
                "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.machine(),
                "torch_version": str(torch.__version__),  # a plain str: model.pt loads with weights_only
                "num_threads": torch.get_num_threads(),
            }
            if criterion is None:
                break
            met, metrics["criterion_why"] = criterion(metrics)
            if met or continued >= rounds:
                break
            target += round_steps
            bar.total = target
        bar.close()

        out_dir.mkdir(parents=True, exist_ok=True)
        save_model(
            out_dir / "model.pt",
            model,
            spec,
            recipe=asdict(recipe),
            seed=seed,
            identity=identity_hash(run),
            metrics={k: v for k, v in metrics.items() if k not in timing_columns()},
        )
        write_json(out_dir / "metrics.json", metrics)
        with atomic_write(out_dir / "curve.csv") as tmp:
            pd.DataFrame(curve, columns=CURVE_COLUMNS).to_csv(tmp, index=False)
        mark_complete(checkpoint_dir, run)
        return metrics


def total_steps_of(recipe: Recipe, steps_per_epoch: int, block_size: int | None, parameters: int = 0) -> int:
    """Optimizer steps of the recipe's budget; ``tokens`` and ``tokens_per_parameter`` need a language model
    (``block_size``), the latter its non-embedding ``parameters``: ``⌈tpp·N / (B·T)⌉``."""
    if recipe.steps is not None:
        return recipe.steps
    if recipe.epochs is not None:
        return recipe.epochs * steps_per_epoch
    if block_size is None:
        budget = "tokens" if recipe.tokens is not None else "tokens_per_parameter"
        raise ValueError(
            f"recipe {budget}={getattr(recipe, budget)} is a budget for language models; use epochs or steps for images"
        )
    if recipe.tokens_per_parameter is not None:
        return max(1, math.ceil(recipe.tokens_per_parameter * parameters / (recipe.batch_size * block_size)))
    return max(1, recipe.tokens // (recipe.batch_size * block_size))


def non_embedding_parameters(model: nn.Module) -> int:
    """Parameters of ``model`` but its input embeddings (``nn.Embedding``; an output head, tied or not,
    counts once): the ``N`` of a tokens-per-parameter budget (Kaplan et al. 2020 leave out the embeddings)."""
    embeddings = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}
    return sum(p.numel() for p in model.parameters() if id(p) not in embeddings)


def loss_windows(total_steps: int) -> dict[str, tuple[int, int]]:
    """The windows of steps (1-based, ``(first, last]``) whose mean training loss the training criterion
    compares (docs/science.md §7.1): ``first``, the first step (the loss at initialization); ``late``, the tenth
    of the steps ending at 80 %; ``end``, the last tenth: ``w = max(1, round(S/10))``, ``late`` =
    ``(round(0.8·S) − w, round(0.8·S)]``, ``end`` = ``(S − w, S]``."""
    w = max(1, round(total_steps / 10))
    at_80 = round(0.8 * total_steps)
    return {"first": (0, 1), "late": (at_80 - w, at_80), "end": (total_steps - w, total_steps)}


def window_means(step_losses: list[float], windows: dict[str, tuple[int, int]]) -> dict[str, float | None]:
    """``{window: mean loss}`` of the steps (1-based; ``step_losses[s − 1]`` is step ``s``'s loss) each window
    of ``loss_windows`` names; None for an empty window."""
    means = {}
    for name, (lo, hi) in windows.items():
        inside = step_losses[lo:hi]
        means[name] = sum(inside) / len(inside) if inside else None
    return means
