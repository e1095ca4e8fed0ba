"""Continued training of a pretrained Hugging Face causal LM: one arm of ``scalemech grow``.

An arm trains the parameters of ``model`` that require grad (the new layers only, or every weight)
for ``recipe.steps`` AdamW steps (``train.make_optimizer``: decay on weight matrices only; linear
warmup then cosine, ``train.lr_at``; gradient clipping) on random windows of the task's train
split, drawn by one seeded CPU generator, so every arm with the same seed sees the same batches in
the same order (an arm with more steps sees the same first batches, then more). The model runs in
train mode, as under ``transformers.Trainer``. Resumable: the trainable tensors, the optimizer and
the generator are checkpointed every ``checkpoint_every`` steps (``training.checkpoints``), and a
finished arm is loaded rather than retrained; an arm's directory is locked while it trains or loads
(``checkpoint_lock``), so two ``grow`` runs on one ``--out`` never train one arm together.
Launched on several processes (``torchrun``), an arm trains data-parallel through ``accelerate``
(``training.engine``): each process takes its share of every global batch, and only the main one
holds the lock and writes. With ``shard``, a copy of the model sharded per decoder layer (FSDP2,
``engine.shard_layers``) trains instead of a replica, and its trained tensors are gathered back into
``model`` at the end. Resume states hold full tensors: the trainable ones and the optimizer's state,
gathered from the shards when sharded (``torch.distributed.checkpoint.state_dict``, the optimizer's
state by parameter name, under an identity of their own).
``step_flops`` counts one step's FLOPs (``torch.utils.flop_counter``); ``sequence_losses`` scores
held-out windows one by one.
"""

from __future__ import annotations

import contextlib
import copy
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.flop_counter import FlopCounterMode
from tqdm.auto import tqdm

from ..core.device import placed
from ..core.integrity import IntegrityError, load_torch, read_json
from ..core.recipe import Recipe
from ..tasks import Task
from .checkpoints import (
    COMPLETE,
    checkpoint_lock,
    checkpoint_paths,
    identity_hash,
    mark_complete,
    resume_state,
    save_checkpoint,
)
from .engine import accelerator, check_engine, shard_layers, share
from .train import lr_at, make_optimizer


def window_loss(model: nn.Module, x: Tensor, y: Tensor) -> Tensor:
    """Mean next-token cross-entropy of ``model(input_ids=x)`` against ``y`` (both (B, T)), in float32."""
    logits = model(input_ids=x, use_cache=False).logits
    return F.cross_entropy(logits.flatten(0, 1).float(), y.flatten())


@torch.no_grad()
def sequence_losses(model: nn.Module, x: Tensor, y: Tensor, batch_size: int) -> Tensor:
    """Per-window mean next-token loss (n,) float64 of ``model`` in eval mode on ``(x, y)`` (n, T)."""
    model.eval()
    device = next(model.parameters()).device
    out = []
    for start in range(0, len(x), batch_size):
        xb, yb = x[start : start + batch_size].to(device), y[start : start + batch_size].to(device)
        logits = model(input_ids=xb, use_cache=False).logits.float()
        token = F.cross_entropy(logits.transpose(1, 2), yb, reduction="none")  # (B, T)
        out.append(token.mean(1).double().cpu())
    return torch.cat(out)


class WindowBatches:
    """Training batches of ``batch_size`` train windows at random starts (``Task.sample``), from one
    seeded CPU generator whose state is part of a checkpoint."""

    def __init__(self, task: Task, batch_size: int, seed: int, device: torch.device):
        self.task, self.batch_size, self.device = task, batch_size, device
        self.generator = torch.Generator().manual_seed(seed)

    def next(self) -> tuple[Tensor, Tensor]:
        starts = self.task.sample("train", self.batch_size, self.generator)
        x, y = self.task.examples("train", starts)
        return x.to(self.device), y.to(self.device)


def trainable_state(model: nn.Module) -> dict[str, Tensor]:
    """The parameters that require grad, by name, on the CPU."""
    return {name: p.detach().cpu().clone() for name, p in model.named_parameters() if p.requires_grad}


def copy_into(model: nn.Module, tensors: dict[str, Tensor]) -> None:
    """Copy ``tensors`` (full, by parameter name) into ``model``'s parameters of those names."""
    parameters = dict(model.named_parameters())
    with torch.no_grad():
        for key, value in tensors.items():
            parameters[key].copy_(value)


def _sharded(module: nn.Module) -> bool:
    from torch.distributed.fsdp import FSDPModule

    return isinstance(module, FSDPModule)


def arm_state(trained: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """``trained``'s parameters that require grad as full CPU tensors by name, and the optimizer's state.
    A sharded module's are gathered (``get_model_state_dict``, ``get_optimizer_state_dict`` with full
    state dicts, the optimizer's state by parameter name): a collective, so every process calls it."""
    if not _sharded(trained):
        return {"trainable": trainable_state(trained), "optimizer": optimizer.state_dict()}
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, get_optimizer_state_dict

    names = {name for name, p in trained.named_parameters() if p.requires_grad}
    state = get_model_state_dict(trained, options=_full())
    return {
        "trainable": {name: tensor for name, tensor in state.items() if name in names},
        "optimizer": get_optimizer_state_dict(trained, optimizer, options=_full()),
    }


def load_arm_state(trained: nn.Module, optimizer: torch.optim.Optimizer, state: dict[str, Any]) -> None:
    """``arm_state``'s tensors and optimizer state into ``trained`` (sharded or not) and ``optimizer``."""
    if not _sharded(trained):
        copy_into(trained, state["trainable"])
        optimizer.load_state_dict(state["optimizer"])
        return
    from torch.distributed.checkpoint.state_dict import set_model_state_dict, set_optimizer_state_dict

    set_model_state_dict(trained, state["trainable"], options=_full(strict=False))
    set_optimizer_state_dict(trained, optimizer, state["optimizer"], options=_full())


def _full(strict: bool = True) -> Any:
    """Full (gathered) state dicts on the CPU: every process holds every tensor."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    return StateDictOptions(full_state_dict=True, cpu_offload=True, strict=strict)


def step_flops(model: nn.Module, loss: Callable[[], Tensor]) -> int:
    """FLOPs of one training step, the forward ``loss()`` and its backward, counted by
    ``torch.utils.flop_counter.FlopCounterMode`` (only the gradients that are needed: a frozen
    weight gets none). Each gradient is dropped as soon as it is computed, so counting needs no
    memory for ``model``'s gradients."""
    counter = FlopCounterMode(display=False)
    dropping = [p.register_post_accumulate_grad_hook(_drop_grad) for p in model.parameters() if p.requires_grad]
    try:
        with counter:
            loss().backward()
    finally:
        for hook in dropping:
            hook.remove()
    return int(counter.get_total_flops())


def _drop_grad(parameter: Tensor) -> None:
    parameter.grad = None


@dataclass
class Arm:
    """What one arm did: its steps, the tokens it trained on, its FLOPs (``step_flops × steps``), its
    seed and its training wall time (0 when a finished arm was loaded)."""

    name: str
    steps: int
    tokens: int
    flops: int
    seed: int
    seconds: float
    generator_state: Tensor | None = None  # the batch generator after the last step: where a next stage continues

    def record(self) -> dict[str, Any]:
        return {"steps": self.steps, "tokens": self.tokens, "flops": self.flops, "seed": self.seed}


def _finished(directory: Path, identity: dict[str, Any]) -> dict[str, Any] | None:
    """The final state of the finished arm ``identity`` in ``directory``, or None."""
    try:
        done = read_json(directory / COMPLETE)["identity"] == identity_hash(identity)
        return load_torch(checkpoint_paths(directory)[-1]) if done else None
    except (IntegrityError, KeyError, TypeError, IndexError, FileNotFoundError):
        return None


def train_arm(
    name: str,
    model: nn.Module,
    task: Task,
    recipe: Recipe,
    seed: int,
    directory: Path,
    identity: dict[str, Any],
    flops_per_step: int,
    checkpoint_every: int = 50,
    progress: bool = True,
    generator_state: Tensor | None = None,
    shard: bool = False,
    device: torch.device | None = None,
    recompute: bool = False,
) -> Arm:
    """Train ``model``'s parameters that require grad in place (module doc) and return the ``Arm``.

    The batches come from ``seed``, or continue from ``generator_state`` (a previous stage's
    ``Arm.generator_state``). ``identity`` says what decides the result (a resumed or loaded state
    must match it); states go to ``directory``, locked throughout (``checkpoint_lock``:
    ``CheckpointLockedError`` at once while another trainer holds it). ``ValueError`` when the loss
    stops being finite. On several processes (module doc) each trains on its share of the batch,
    replicated (DDP) or, with ``shard``, sharded per decoder layer (FSDP2); only the main process
    locks and writes ``directory``. The arm trains on ``device`` (default: where ``model`` is), and
    ``model`` returns to where it was: a replica moves there whole while it trains; a sharded copy
    moves there unit by unit, each process holding its shards only. With ``recompute``, each decoder
    layer's activations are recomputed in the backward rather than kept (``transformers``' activation
    checkpointing, non-reentrant; the RNG state replayed): the same steps, less memory."""
    device = device or next(model.parameters()).device
    configured = check_engine(device.type)  # accelerate's FSDP configuration: as shard
    engine = accelerator(device.type)
    main, several = engine.is_main_process, engine.num_processes > 1
    sharded = several and (shard or configured)
    if sharded:  # its states are another layout (gathered, the optimizer's by name): never resumed unsharded
        identity = {**identity, "states": "fsdp2 full state dicts"}
    with contextlib.ExitStack() as held:
        if main:
            held.enter_context(checkpoint_lock(directory))  # before any state is read
        engine.wait_for_everyone()
        block = task.block_size
        arm = Arm(
            name, recipe.steps, recipe.steps * recipe.batch_size * block, recipe.steps * flops_per_step, seed, 0.0
        )
        finished = _finished(directory, identity)
        if finished is not None:
            copy_into(model, finished["trainable"])
            arm.generator_state = finished["generator"]
            return arm
        if not sharded:
            held.enter_context(placed(model, device))
        trained = copy.deepcopy(model) if sharded else model  # FSDP2: a sharded copy
        if recompute:
            trained.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
            if trained is model:
                held.callback(model.activation_checkpointing_disable)  # scored, and written, as it came
        if sharded:
            shard_layers(trained, device)
        optimizer = make_optimizer(trained, recipe)
        forward = trained
        if several and not sharded:  # DDP: a replica in every process
            forward, optimizer = engine.prepare(model, optimizer)
        batches = WindowBatches(task, recipe.batch_size, seed, device)
        if generator_state is not None:
            batches.generator.set_state(generator_state)
        state = resume_state(directory, identity)
        first = 0
        if state is not None:
            load_arm_state(trained, optimizer, state)
            batches.generator.set_state(state["generator"])
            first = state["step"]
        trainable = [p for p in trained.parameters() if p.requires_grad]
        start = time.perf_counter()
        trained.train()
        bar = tqdm(
            range(first, recipe.steps),
            desc=f"grow: {name}",
            initial=first,
            total=recipe.steps,
            disable=not (progress and main),
        )
        for step in bar:
            for group in optimizer.param_groups:
                group["lr"] = lr_at(step, recipe.steps, recipe)
            x, y = share(batches.next(), engine.process_index, engine.num_processes)  # all of it on one process
            loss = window_loss(forward, x, y)
            if not torch.isfinite(loss):
                raise ValueError(f"grow: arm {name!r} reached a non-finite loss at step {step}; lower --lr")
            optimizer.zero_grad(set_to_none=True)
            loss.backward()  # DDP's hooks all-reduce the gradients, FSDP's reduce-scatter them into the shards
            if recipe.grad_clip is not None:
                nn.utils.clip_grad_norm_(trainable, recipe.grad_clip)  # the whole gradient's norm on every process
            optimizer.step()
            bar.set_postfix(loss=f"{loss.item():.4f}")
            done = step + 1
            if done % checkpoint_every == 0 or done == recipe.steps:
                full = arm_state(trained, optimizer)  # every process: a collective when sharded
                if main:
                    save_checkpoint(
                        directory,
                        {"run": identity, "step": done, **full, "generator": batches.generator.get_state()},
                    )
        if trained is not model:  # the sharded copy's trained tensors, gathered, into the plain model
            copy_into(model, arm_state(trained, optimizer)["trainable"])
            del trained, forward
        model.eval()
        if main:
            mark_complete(directory, identity)
        engine.wait_for_everyone()
        if several and not sharded:
            engine.free_memory()  # the prepared DDP wrappers: the next arm's model is another
        arm.seconds, arm.generator_state = time.perf_counter() - start, batches.generator.get_state()
        return arm
