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
from .engine import PRECISIONS, accelerator, check_engine, shard_layers, share
from .train import SYNC_EVERY, NonFiniteLossError, Stopped, check_finite, lr_at, make_optimizer, sigterm_requested


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


STEPS_AHEAD = 50  # training steps whose examples are drawn, fetched and copied to the device together


class TaskBatches:
    """Training batches of ``batch_size`` examples of ``task``'s train split at random (``Task.sample``),
    drawn by one seeded CPU generator, made ready by ``prepare`` (default: as they come, on ``device``).

    The examples of ``STEPS_AHEAD`` steps are drawn as step-by-step draws would take them, fetched at once
    and copied to the device together (from pinned memory, without blocking, on CUDA): one host-device
    transfer per ``STEPS_AHEAD`` steps, not one per step. ``position()`` is the generator's state after the
    batches handed out, as if drawn one by one (kept as they were drawn): what a checkpoint keeps and a next
    stage continues from."""

    def __init__(
        self,
        task: Task,
        batch_size: int,
        seed: int,
        device: torch.device,
        prepare: Callable[[Tensor, Tensor], tuple[Tensor, Tensor]] | None = None,
    ):
        self.task, self.batch_size, self.device = task, batch_size, device
        self.prepare = prepare or (lambda x, y: (x, y))
        self.generator = torch.Generator().manual_seed(seed)
        self.ahead: list[tuple[Tensor, Tensor]] = []
        self.states = [self.generator.get_state()]  # the generator's before each batch of ``ahead``, then after
        self.used = 0  # batches of ``ahead`` handed out

    def next(self) -> tuple[Tensor, Tensor]:
        if self.used == len(self.ahead):
            index, self.states = [], []
            for _ in range(STEPS_AHEAD):
                self.states.append(self.generator.get_state())
                index.append(self.task.sample("train", self.batch_size, self.generator))
            self.states.append(self.generator.get_state())
            fetched = [self._to_device(t) for t in self.task.examples("train", torch.cat(index))]
            self.ahead, self.used = list(zip(*(t.split(self.batch_size) for t in fetched))), 0
        x, y = self.ahead[self.used]
        self.used += 1
        return self.prepare(x, y)

    def _to_device(self, tensor: Tensor) -> Tensor:
        if self.device.type == "cuda":
            return tensor.pin_memory().to(self.device, non_blocking=True)
        return tensor.to(self.device)

    def position(self) -> Tensor:
        """The generator's state after the batches handed out."""
        return self.states[self.used]

    def set_position(self, state: Tensor) -> None:
        """Continue from the generator ``state`` (a ``position()``): the next batch is drawn there."""
        self.generator.set_state(state)
        self.ahead, self.states, self.used = [], [state], 0


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


class ArmDiverged(ValueError):
    """An arm's training loss stopped being finite (its learning rate is too high)."""


Loss = Callable[[nn.Module, Tensor, Tensor], Tensor]
"""``(model, x, y) -> mean training loss`` of one batch (``window_loss`` for a causal LM)."""


def train_arm(
    name: str,
    model: nn.Module,
    task: Task,
    recipe: Recipe,
    seed: int,
    directory: Path | None,
    identity: dict[str, Any],
    flops_per_step: int = 0,
    checkpoint_every: int = 50,
    progress: bool = True,
    generator_state: Tensor | None = None,
    shard: bool = False,
    device: torch.device | None = None,
    recompute: bool = False,
    *,
    loss: Loss = window_loss,
    prepare: Callable[[Tensor, Tensor], tuple[Tensor, Tensor]] | None = None,
    frozen_norms: bool = False,
    precision: str = "fp32",
    visit: Callable[[int], None] | None = None,
) -> Arm:
    """Train ``model``'s parameters that require grad in place (module doc) and return the ``Arm``.

    Each step minimizes ``loss(model, x, y)`` on a batch of ``TaskBatches(task, ..., prepare)``, at
    ``lr_at(step)`` of ``recipe`` (a ``min_lr_fraction`` of 1: constant), in train mode, or in eval mode
    with ``frozen_norms`` (norm statistics as they are: Paper D's arms); with ``precision`` ``"bf16"`` the
    forward and loss run under bf16 autocast (float32 weights and optimizer state). The host waits for the
    device once per ``SYNC_EVERY`` steps, and at a resume state: there the losses are checked
    (``ArmDiverged`` when one is not finite) and the progress bar moves. ``visit(done)`` is called after
    every step, before that step's resume state is written.

    The batches come from ``seed``, or continue from ``generator_state`` (a previous stage's
    ``Arm.generator_state``). ``identity`` says what decides the result (a resumed or loaded state
    must match it); states go to ``directory`` every ``checkpoint_every`` steps, at the end, and on
    SIGTERM (then ``Stopped``), locked throughout (``checkpoint_lock``: ``CheckpointLockedError`` at once
    while another trainer holds it); ``directory`` None keeps none. On several processes (module doc)
    each trains on its share of the batch, replicated (DDP) or, with ``shard``, sharded per decoder
    layer (FSDP2); only the main process locks and writes ``directory``. The arm trains on ``device``
    (default: where ``model`` is), and ``model`` returns to where it was: a replica moves there whole
    while it trains; a sharded copy moves there unit by unit, each process holding its shards only. With
    ``recompute``, each decoder layer's activations are recomputed in the backward rather than kept
    (``transformers``' activation checkpointing, non-reentrant; the RNG state replayed): the same steps,
    less memory."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision {precision!r}; allowed: {PRECISIONS}")
    device = device or next(model.parameters()).device
    configured = check_engine(device.type)  # accelerate's FSDP configuration: as shard
    engine = accelerator(device.type)
    main, several = engine.is_main_process, engine.num_processes > 1
    sharded = several and (shard or configured)
    if sharded:  # its states are another layout (gathered, the optimizer's by name): never resumed unsharded
        identity = {**identity, "states": "fsdp2 full state dicts"}
    with contextlib.ExitStack() as held:
        if main and directory is not None:
            held.enter_context(checkpoint_lock(directory))  # before any state is read
        engine.wait_for_everyone()
        block = getattr(task, "block_size", None) or 1
        arm = Arm(
            name, recipe.steps, recipe.steps * recipe.batch_size * block, recipe.steps * flops_per_step, seed, 0.0
        )
        finished = None if directory is None else _finished(directory, identity)
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
        batches = TaskBatches(task, recipe.batch_size, seed, device, prepare)
        if generator_state is not None:
            batches.set_position(generator_state)
        state = None if directory is None else resume_state(directory, identity)
        first = 0
        if state is not None:
            load_arm_state(trained, optimizer, state)
            batches.set_position(state["generator"])
            first = state["step"]
        stop = held.enter_context(sigterm_requested()) if not several else [False]  # several: the launcher's
        trainable = [p for p in trained.parameters() if p.requires_grad]
        start = time.perf_counter()
        trained.train(not frozen_norms)
        bar = held.enter_context(tqdm(total=recipe.steps, initial=first, desc=name, disable=not (progress and main)))
        pending: list[Tensor] = []  # step losses not yet checked on the host
        for step in range(first, recipe.steps):
            for group in optimizer.param_groups:
                group["lr"] = lr_at(step, recipe.steps, recipe)
            x, y = share(batches.next(), engine.process_index, engine.num_processes)  # all of it on one process
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bf16"):
                value = loss(forward, x, y)
            optimizer.zero_grad(set_to_none=True)
            value.backward()  # DDP's hooks all-reduce the gradients, FSDP's reduce-scatter them into the shards
            if recipe.grad_clip is not None:
                nn.utils.clip_grad_norm_(trainable, recipe.grad_clip)  # the whole gradient's norm on every process
            optimizer.step()
            pending.append(value.detach())
            done = step + 1
            keep = directory is not None and (done % checkpoint_every == 0 or done == recipe.steps or stop[0])
            if keep or len(pending) >= SYNC_EVERY or done == recipe.steps:
                _check_finite(name, torch.stack(pending).float().cpu(), done, recipe)  # the host waits here
                bar.update(len(pending))
                pending = []
            if visit is not None:
                visit(done)
            if keep:
                full = arm_state(trained, optimizer)  # every process: a collective when sharded
                if main:
                    save_checkpoint(directory, {"run": identity, "step": done, **full, "generator": batches.position()})
            if stop[0]:
                where = f"its state kept in {directory}" if directory is not None else "no state kept"
                raise Stopped(f"arm {name!r} stopped by SIGTERM at step {done} of {recipe.steps}, {where}")
        bar.close()  # before the lines that follow the arm
        if trained is not model:  # the sharded copy's trained tensors, gathered, into the plain model
            copy_into(model, arm_state(trained, optimizer)["trainable"])
            del trained, forward
        model.eval()
        if main and directory is not None:
            mark_complete(directory, identity)
        engine.wait_for_everyone()
        if several and not sharded:
            engine.free_memory()  # the prepared DDP wrappers: the next arm's model is another
        arm.seconds, arm.generator_state = time.perf_counter() - start, batches.position()
        return arm


def _check_finite(name: str, losses: Tensor, done: int, recipe: Recipe) -> None:
    """``train.check_finite`` of the last ``len(losses)`` step losses up to ``done``, as ``ArmDiverged``
    naming the arm."""
    try:
        check_finite(losses, done - len(losses) + 1, recipe.steps, recipe)
    except NonFiniteLossError as error:
        raise ArmDiverged(f"arm {name!r}: {error}") from None
