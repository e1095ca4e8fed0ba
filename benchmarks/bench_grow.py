"""``scalemech grow``'s training loop (``training.continued.train_arm``) vs. a plain Hugging Face loop.

Both train the same grown model: a random Llama (``LlamaConfig`` through
``AutoModelForCausalLM.from_config``, seeded) grown by ``models.hf_growth.grow_layers(model, [1])``,
with only the new layer requiring grad (``grow.arms.trainable``, grow's default ``--train new``).
Each run starts from a copy of that same grown state, on token ids from a seeded random ``.npy``
(``data.tokenized.load_token_ids``, ``tasks.tokens.TokenIdTask``), with the same batch size, block
size, peak lr and torch threads:

- grow: ``train_arm`` as ``grow`` calls it: grow's recipe (``GrowSettings.recipe``: AdamW with
  betas (0.9, 0.999), no weight decay, 10 % warmup then cosine, clipping at 1), its
  finite-loss check, ``loss.item()`` and progress bar (on stderr) every step, and its resume
  checkpoints every ``checkpoint_every`` steps (grow's default 50, and always at the last step);
- plain: the loop users write: ``torch.optim.AdamW`` over the parameters requiring grad (the same
  lr, constant: no schedule; betas (0.9, 0.999), weight decay 0), model in train mode, ``loss``,
  ``loss.backward()``, ``clip_grad_norm_(…, 1.0)``, ``optimizer.step()``, ``optimizer.zero_grad()``.

The same work: both draw their batches from ``continued.WindowBatches`` with the same seed, so step
``k`` of either sees the same windows ``(x, y)`` (``y`` is ``x`` shifted by one token), and the plain
loss is ``cross_entropy(model(input_ids=x, use_cache=False).logits.flatten(0, 1), y.flatten())``:
the forward and loss of grow's ``window_loss`` (its ``.float()`` is a no-op on a float32 model;
``use_cache=False`` as grow passes it). The HF form ``model(input_ids=w, labels=w)`` on the window
``w`` of ``block_size + 1`` tokens has the same targets but computes one more position's logits,
so it is not used. The ratio therefore measures what grow's loop adds around the same steps.

Throughput: each loop runs ``--repeats`` times, interleaved (grow, plain, plain, grow, …), each run
``--steps`` steps of which the first ``--warmup`` are not timed; tokens/s are the timed steps'
``batch_size · block_size`` tokens over their seconds, and the median run of each is reported
(goal: grow/plain ≥ 0.95, with the data-parallel engine of ``training.engine`` in the loop). With the
defaults the timed part of a grow run includes one checkpoint
(step 50), as often as in a grow arm of any length (one per 50 steps).

Peak memory: on CUDA, ``torch.cuda.max_memory_allocated`` of each timed run (reset before it); on a
CPU, the peak resident set (``VmHWM``, which includes torch and the imports, about 1 GB) of a fresh
process that builds the model and the data and runs ``--memory-steps`` steps of one loop (grow's
including its checkpoint at the last step), beside a fresh process that only builds them (the
difference is the loop's own); printed against the weights' bytes.

Sizes: ``--preset cpu`` (the default off CUDA; hidden 256, 4 layers, vocabulary 4096, block 128,
batch 8: about a minute and a half on 2 cores) or ``--preset gpu`` (the default on CUDA); any size
option overrides the preset's. ``--readme docs/grow.md`` writes the result, with the machine, the date
and the command, into that file's ``bench-grow`` block (refused before anything runs when the file
has no such block).

    python benchmarks/bench_grow.py                       # GPU sizes on CUDA, CPU sizes otherwise
    python benchmarks/bench_grow.py --device cpu --readme docs/grow.md
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from readme_block import check_block, write_block
from torch import Tensor, nn
from transformers import AutoModelForCausalLM, LlamaConfig, PreTrainedModel

from scalemech.core.device import resolve_device
from scalemech.data.tokenized import load_token_ids
from scalemech.grow import GrowSettings
from scalemech.grow.arms import trainable  # how grow sets requires_grad: the same call, not a copy of it
from scalemech.models.hf_growth import grow_layers
from scalemech.tasks.tokens import TokenIdTask
from scalemech.training import continued

BLOCK = "bench-grow"
AFTER = [1]
"""The new layer goes after layer 1 (``grow_layers(model, AFTER)``)."""
PRESETS = {
    "cpu": dict(hidden=256, layers=4, heads=4, intermediate=688, vocab=4096, block_size=128, batch_size=8),
    "gpu": dict(hidden=1024, layers=8, heads=16, intermediate=2816, vocab=32_000, block_size=512, batch_size=16),
}
SIZE_HELP = {
    "hidden": "hidden size",
    "layers": "decoder layers before growth",
    "heads": "attention heads",
    "intermediate": "MLP width",
    "vocab": "vocabulary size",
    "block_size": "tokens per window",
    "batch_size": "windows per step",
}
TOKENS = 1 << 20
"""Token ids in the random ``.npy`` (int32, 4 MiB)."""
GOAL = 0.95
MB = 1e6
GROW = GrowSettings()
"""grow's defaults: the lr and ``checkpoint_every``."""


def synchronized(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def grown_model(args: argparse.Namespace) -> tuple[PreTrainedModel, list[int]]:
    """The seeded random Llama of ``args``' sizes grown after layer 1 on the CPU, only the new layer
    requiring grad (as ``grow --train new`` leaves it), and the new layers' indices."""
    config = LlamaConfig(
        hidden_size=args.hidden,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        intermediate_size=args.intermediate,
        vocab_size=args.vocab,
        max_position_embeddings=max(2048, args.block_size),
    )
    torch.manual_seed(args.seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    grown, new = grow_layers(model, AFTER)
    return trainable(grown, new, "new"), new


def token_task(ids: Path, args: argparse.Namespace) -> TokenIdTask:
    return TokenIdTask(load_token_ids(ids), args.block_size, args.vocab)


class StampedTask:
    """``task``, noting the clock (after a device sync) when training step ``warmup`` draws its batch:
    where the timed part of ``train_arm`` starts. Everything else is ``task``'s."""

    def __init__(self, task: TokenIdTask, warmup: int, device: torch.device):
        self.task, self.warmup, self.device = task, warmup, device
        self.calls, self.started = 0, None

    def sample(self, split: str, n: int, generator: torch.Generator) -> Tensor:
        if self.calls == self.warmup:
            synchronized(self.device)
            self.started = time.perf_counter()
        self.calls += 1
        return self.task.sample(split, n, generator)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.task, name)


def grow_loop(model: nn.Module, task: TokenIdTask, args: argparse.Namespace, steps: int, directory: Path) -> float:
    """Seconds of steps ``warmup + 1 … steps`` of ``train_arm`` on ``model`` (trained in place) with grow's
    recipe, seed and ``checkpoint_every``; its states go to the fresh ``directory``."""
    device = next(model.parameters()).device
    stamped = StampedTask(task, min(args.warmup, steps - 1), device)
    recipe = GrowSettings(steps=steps, lr=args.lr, batch_size=args.batch_size).recipe(steps)
    identity = {"bench": BLOCK, "directory": str(directory)}
    continued.train_arm("bench", model, stamped, recipe, args.seed, directory, identity, 0, args.checkpoint_every)
    synchronized(device)
    return time.perf_counter() - stamped.started


def plain_loop(model: nn.Module, task: TokenIdTask, args: argparse.Namespace, steps: int) -> float:
    """Seconds of steps ``warmup + 1 … steps`` of the plain loop (module doc) on ``model`` (trained in place)."""
    device = next(model.parameters()).device
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=args.lr, betas=(0.9, 0.999), weight_decay=0.0)
    batches = continued.WindowBatches(task, args.batch_size, args.seed, device)
    model.train()
    start = None
    for step in range(steps):
        if step == min(args.warmup, steps - 1):
            synchronized(device)
            start = time.perf_counter()
        x, y = batches.next()
        logits = model(input_ids=x, use_cache=False).logits
        loss = F.cross_entropy(logits.flatten(0, 1), y.flatten())
        loss.backward()
        nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        optimizer.zero_grad()
    synchronized(device)
    return time.perf_counter() - start


def checkpoint_steps(steps: int, every: int) -> list[int]:
    """The steps after which ``train_arm`` writes a checkpoint."""
    return [done for done in range(1, steps + 1) if done % every == 0 or done == steps]


def peak_rss() -> float:
    """Bytes: this process's peak resident set: ``VmHWM`` on Linux, else ``ru_maxrss`` (bytes on macOS).
    Linux's ``ru_maxrss`` is not used: it keeps, across ``exec``, the RSS of the parent forked from,
    so a child of a parent that has trained would report the parent's peak."""
    status = Path("/proc/self/status")
    if status.exists():
        return float(status.read_text().split("VmHWM:")[1].split()[0]) * 1024
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return float(peak if sys.platform == "darwin" else peak * 1024)


def run_part(args: argparse.Namespace) -> dict[str, float]:
    """A child's measurement (CPU memory): build the model and the data, run ``args.part``'s loop for
    ``memory_steps`` steps (none for ``baseline``), report the peak RSS."""
    model, _ = grown_model(args)
    task = token_task(Path(args.ids), args)
    task.examples("train", task.sample("train", args.batch_size, torch.Generator().manual_seed(args.seed)))
    if args.part == "grow":
        grow_loop(model, task, args, args.memory_steps, Path(args.scratch) / "memory-grow")
    elif args.part == "plain":
        plain_loop(model, task, args, args.memory_steps)
    return {"peak": peak_rss()}


def in_child(args: argparse.Namespace, part: str, ids: Path, scratch: Path) -> dict[str, float]:
    """``part``'s result, run by this script in a fresh process."""
    argv = [sys.executable, __file__, "--part", part, "--ids", str(ids), "--scratch", str(scratch)]
    for name in (*SIZE_HELP, "steps", "warmup", "memory_steps", "checkpoint_every", "lr", "seed", "device"):
        argv += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    done = subprocess.run(argv, check=True, stdout=subprocess.PIPE, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def timed_runs(
    args: argparse.Namespace, master: PreTrainedModel, task: TokenIdTask, device: torch.device, scratch: Path
) -> dict[str, dict[str, list[float]]]:
    """``{loop: {"seconds": [...], "peak": [...]}}`` over ``repeats`` interleaved runs, each on a fresh copy of
    ``master`` (peak: CUDA's ``max_memory_allocated`` of the run, weights included; CPU: none)."""
    runs: dict[str, dict[str, list[float]]] = {loop: {"seconds": [], "peak": []} for loop in ("grow", "plain")}
    for repeat in range(args.repeats):
        for loop in ("grow", "plain") if repeat % 2 == 0 else ("plain", "grow"):
            model = copy.deepcopy(master).to(device)
            if device.type == "cuda":
                synchronized(device)
                torch.cuda.reset_peak_memory_stats(device)
            if loop == "grow":
                seconds = grow_loop(model, task, args, args.steps, scratch / f"grow-{repeat}")
            else:
                seconds = plain_loop(model, task, args, args.steps)
            runs[loop]["seconds"].append(seconds)
            if device.type == "cuda":
                runs[loop]["peak"].append(float(torch.cuda.max_memory_allocated(device)))
            del model
            gc.collect()
            if device.type == "cuda":
                torch.cuda.empty_cache()
    return runs


def report(
    args: argparse.Namespace,
    master: PreTrainedModel,
    new: list[int],
    device: torch.device,
    runs: dict[str, dict[str, list[float]]],
    memory: dict[str, float] | None,
) -> str:
    weights = sum(p.numel() * p.element_size() for p in master.parameters())
    total = sum(p.numel() for p in master.parameters())
    trained = sum(p.numel() for p in master.parameters() if p.requires_grad)
    timed = args.steps - min(args.warmup, args.steps - 1)
    tokens = timed * args.batch_size * args.block_size
    rate = {loop: [tokens / s for s in run["seconds"]] for loop, run in runs.items()}
    median = {loop: statistics.median(values) for loop, values in rate.items()}
    ratio = median["grow"] / median["plain"]
    saved = [s for s in checkpoint_steps(args.steps, args.checkpoint_every) if s > args.steps - timed]
    saves = f"step{'s' if len(saved) > 1 else ''} {', '.join(map(str, saved))}" if saved else "no step"
    layers = ", ".join(map(str, new))
    lines = [
        f"Llama (random) hidden {args.hidden}, {args.layers} + 1 layers (new layer {layers} trained: "
        f"{trained:,} of {total:,} parameters), vocabulary {args.vocab}, block {args.block_size}, "
        f"batch {args.batch_size}, lr {args.lr:g}, {device}, {torch.get_num_threads()} threads:",
        f"  grow's train_arm {median['grow']:,.0f} tokens/s; plain HF loop {median['plain']:,.0f} tokens/s; "
        f"ratio {ratio:.2f} (goal >= {GOAL})",
        f"  median of {args.repeats} interleaved runs each (grow {', '.join(f'{r:,.0f}' for r in rate['grow'])}; "
        f"plain {', '.join(f'{r:,.0f}' for r in rate['plain'])});",
        f"  each run {args.steps} steps, the first {args.steps - timed} untimed; grow's timed steps include its",
        f"  checkpoint at {saves} (every {args.checkpoint_every}), lr schedule, finite check, loss.item(), "
        "progress bar",
    ]
    if memory is not None:
        base = memory["baseline"]
        lines += [
            f"  peak RSS of a fresh process, {args.memory_steps} steps (grow's with its checkpoint): "
            f"grow {memory['grow'] / MB:.0f} MB, plain {memory['plain'] / MB:.0f} MB;",
            f"  model and data only {base / MB:.0f} MB: the loops' own grow +{(memory['grow'] - base) / MB:.0f} MB, "
            f"plain +{(memory['plain'] - base) / MB:.0f} MB",
        ]
    else:
        peak = {loop: max(run["peak"]) for loop, run in runs.items()}
        lines += [
            f"  CUDA max_memory_allocated (weights included): grow {peak['grow'] / MB:.0f} MB, "
            f"plain {peak['plain'] / MB:.0f} MB;",
            f"  beyond the weights: grow +{(peak['grow'] - weights) / MB:.0f} MB, "
            f"plain +{(peak['plain'] - weights) / MB:.0f} MB",
        ]
    lines.append(f"  weights: {weights:,} bytes ({weights / MB:.1f} MB, float32)")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", choices=["auto", *PRESETS], default="auto", help="sizes (auto: gpu on CUDA)")
    for name, text in SIZE_HELP.items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, help=f"{text} (default: the preset's)")
    parser.add_argument("--steps", type=int, default=GROW.checkpoint_every, help="steps per run (default: %(default)s)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed first steps of each run (default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of each loop (default: %(default)s)")
    parser.add_argument("--checkpoint-every", type=int, default=GROW.checkpoint_every, help="grow's (default 50)")
    parser.add_argument("--memory-steps", type=int, default=3, help="steps of each CPU memory process (default 3)")
    parser.add_argument("--lr", type=float, default=GROW.lr, help="peak lr (default: grow's, %(default)s)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--readme", type=Path, help=f"write the result into this file's {BLOCK} block")
    parser.add_argument("--part", choices=["baseline", "grow", "plain"], help=argparse.SUPPRESS)
    parser.add_argument("--ids", help=argparse.SUPPRESS)
    parser.add_argument("--scratch", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.readme:
        try:
            check_block(args.readme, BLOCK)
        except (OSError, ValueError) as error:
            parser.error(f"--readme: {error}")
    for name in ("steps", "repeats", "checkpoint_every", "memory_steps"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if not 0 <= args.warmup < args.steps:
        parser.error(f"--warmup must lie in [0, --steps = {args.steps})")
    device = resolve_device(args.device)
    preset = PRESETS[("gpu" if device.type == "cuda" else "cpu") if args.preset == "auto" else args.preset]
    for name, value in preset.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.part:
        print(json.dumps(run_part(args)))
        return
    args.device = str(device)
    with tempfile.TemporaryDirectory(prefix="bench-grow-") as scratch:
        ids = Path(scratch) / "ids.npy"
        np.save(ids, np.random.default_rng(args.seed).integers(0, args.vocab, TOKENS).astype(np.int32))
        master, new = grown_model(args)
        runs = timed_runs(args, master, token_task(ids, args), device, Path(scratch))
        memory = None
        if device.type != "cuda":
            memory = {part: in_child(args, part, ids, Path(scratch))["peak"] for part in ("baseline", "grow", "plain")}
    result = report(args, master, new, device, runs, memory)
    print(result)
    if args.readme:
        write_block(args.readme, BLOCK, result, device)


if __name__ == "__main__":
    main()
