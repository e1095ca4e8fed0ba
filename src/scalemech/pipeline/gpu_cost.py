"""GPU-hours of a config, counted from FLOPs (``scalemech gpu-hours``; ``snakemake -n`` prints a config's that asks
for GPUs, ``planned_line``; ``make docs`` writes the paper config's).

A job's seconds on one GPU are its FLOPs at a stated share of the GPU's dense bf16 peak, but never fewer than
its optimizer or evaluation steps times a per-layer launch floor, since small models wait on kernel launches,
not arithmetic:

    seconds = max(F / (UTILIZATION · PEAK_FLOPS), steps · layers · LAUNCH_FLOOR)

``F`` = (3 for a step that trains or captures gradients, 1 for an evaluation) × forward FLOPs per example ×
examples, the forward FLOPs counted by ``torch.utils.flop_counter`` on the model built on the ``meta``
device (no memory, no arithmetic; attention included). The examples of each step:

- train: epochs × train images, or tokens-per-parameter × non-embedding parameters / window (Chinchilla);
- measure: the train and test pools, gradients at every point in one pass each;
- trajectory: both pools of ``trajectory.pool`` at each of ``train.snapshots`` snapshots;
- intervene: the train, test and held-out pools evaluated at every point × view × step fraction;
- growth (E11): at each snapshot (final and signal) the grown arm at every point and the two controls, each
  trained ``steps`` batches at every non-zero learning rate of its grid.

Pretrained Pythia checkpoints are measured only; their forward FLOPs are 2·N per token with N read from the
checkpoint's name (``pythia-2.8b``). The constants come from ``make gpu-check`` on an H200 (docs/gpu/).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from torch.utils.flop_counter import FlopCounterMode

from ..config import ModelJob, model_jobs
from ..gradients.views import VIEWS
from ..models import build_model
from ..training.train import non_embedding_parameters

PEAK_FLOPS = 989e12  # an H200's dense bf16 FLOP/s (NVIDIA's datasheet)
UTILIZATION = 0.40  # of the peak: a tuned transformer's step (make gpu-check measured 29 % at width 512)
LAUNCH_FLOOR = 0.65e-3  # seconds per layer per step: a ResNet-20 step took 13.0 ms alone on an H200
IMAGE_GEOMETRY = {
    "cifar10": (3, 32, 10, 50_000),
    "cifar100": (3, 32, 100, 50_000),
    "imagenet": (3, None, 1000, 1_281_167),
}
"""A data source's channels, image size (None: the config's ``resolution``), classes and train images."""
TEXT_VOCAB = 256  # byte-level text
GPU_STEPS = ("train", "measure", "trajectory", "intervene", "growth")


def forward_flops(spec: dict[str, Any], example: tuple[int, ...], dtype: torch.dtype) -> int:
    """FLOPs of one forward pass of ``build_model(spec)`` on a batch of one ``example`` shape."""
    with torch.device("meta"):
        model = build_model(spec)
        x = torch.zeros((1, *example), dtype=dtype)
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(x)
    return counter.get_total_flops()


def _geometry(job: ModelJob, datasets: dict[str, Any]) -> tuple[dict[str, Any], tuple[int, ...], int | None]:
    """The job's full spec, one example's shape, and its train examples (None for text)."""
    source = datasets[job.dataset].get("source", job.dataset)
    if source in IMAGE_GEOMETRY:
        channels, size, classes, count = IMAGE_GEOMETRY[source]
        size = size or datasets[job.dataset]["resolution"]
        return {**job.spec, "in_channels": channels, "num_classes": classes}, (channels, size, size), count
    return {**job.spec, "vocab_size": TEXT_VOCAB}, (job.spec["block_size"],), None


def pythia_parameters(name: str) -> float:
    """Parameters of a Pythia checkpoint from its name: ``pythia-2.8b`` → 2.8e9, ``pythia-70m`` → 7e7."""
    match = re.search(r"(\d+(?:\.\d+)?)([mb])\b", name.lower())
    if match is None:
        raise ValueError(f"cannot read a parameter count from {name!r}; expected a name like pythia-2.8b")
    return float(match.group(1)) * (1e6 if match.group(2) == "m" else 1e9)


def grown_points(grow: dict[str, Any], points: int) -> int:
    """How many of a model's ``points`` E11 grows at: ``grow.points`` (every one, ``n`` of them, or a list)."""
    chosen = grow.get("points", "all")
    return points if chosen == "all" else min(chosen, points) if isinstance(chosen, int) else len(chosen)


def growth_row(grow: dict[str, Any], job: ModelJob, points: int, per_example: float) -> list[dict[str, Any]]:
    """E11's row of ``job`` (none when its grid is not grown): the grown arm at every chosen point and the two
    controls, each at every non-zero learning rate of the grid, at two snapshots: a forward and a backward of
    twice its FLOPs per example, and one more forward under ``grow.activation_checkpointing``."""
    if grow is None or job.grid not in grow["grids"]:
        return []
    factors = sum(f > 0 for f in grow.get("lr_factors", (0.0, 0.1, 1.0)))
    trained = 2 * (grown_points(grow, points) + 2) * factors * grow["steps"] * grow["batch_size"]
    passes = 4 if grow.get("activation_checkpointing") else 3
    return [{"step": "growth", "flops": passes * per_example * trained, "steps": trained / grow["batch_size"]}]


def model_costs(config: dict[str, Any], job: ModelJob) -> list[dict[str, Any]]:
    """One row per GPU step of ``job``: the step, its FLOPs and its steps (batches)."""
    measure, grow = config["measure"], config.get("grow")
    batch, pools = measure["batch_size"], measure["train_pool"] + measure["test_pool"]
    if job.recipe is None:  # a pretrained checkpoint: measured, and grown where its grid is
        per_example = 2 * pythia_parameters(job.name) * config["pretrained"][job.grid]["block_size"]
        rows = [{"step": "measure", "flops": 3 * per_example * pools, "steps": pools / batch}]
        return [{**row, "layers": job.depth} for row in rows + growth_row(grow, job, job.depth, per_example)]
    spec, example, train_examples = _geometry(job, config["datasets"])
    per_example = forward_flops(spec, example, torch.long if len(example) == 1 else torch.float32)
    with torch.device("meta"):
        model = build_model(spec)
    if train_examples is not None:
        examples = job.recipe["epochs"] * train_examples
    else:
        examples = job.recipe["tokens_per_parameter"] * non_embedding_parameters(model) / spec["block_size"]
    rows = [
        {"step": "train", "flops": 3 * per_example * examples, "steps": examples / job.recipe["batch_size"]},
        {"step": "measure", "flops": 3 * per_example * pools, "steps": pools / batch},
    ]
    points = len(model.insertion_points())
    if config["train"].get("snapshots", 0):
        examples = 2 * config["trajectory"]["pool"] * config["train"]["snapshots"]
        rows.append({"step": "trajectory", "flops": 3 * per_example * examples, "steps": examples / batch})
    evaluated = points * len(VIEWS) * len(config["intervene"]["step_fractions"]) * 3 * measure["test_pool"]
    rows.append({"step": "intervene", "flops": per_example * evaluated, "steps": evaluated / batch})
    return [{**row, "layers": job.depth} for row in rows + growth_row(grow, job, points, per_example)]


def gpu_hours(config: dict[str, Any]) -> pd.DataFrame:
    """Every GPU job of ``config``: grid, model, step, FLOPs, steps, and its H200-hours (module doc)."""
    rows = [
        {"grid": job.grid, "model": job.name, **row}
        for job in model_jobs(config)
        if job.resources.get("gpu", 0)
        for row in model_costs(config, job)
    ]
    frame = pd.DataFrame(rows, columns=["grid", "model", "step", "flops", "steps", "layers"])
    compute = frame["flops"] / (UTILIZATION * PEAK_FLOPS)
    launches = frame["steps"] * frame["layers"] * LAUNCH_FLOOR
    return frame.assign(
        hours=pd.concat([compute, launches], axis=1).max(axis=1) / 3600, launch_bound=launches > compute
    )


def planned_line(config: dict[str, Any], cache: Path) -> str | None:
    """``line`` of a config whose grids ask for GPUs (None for one that asks for none), kept in ``cache`` under
    the config's hash: counting costs seconds of CPU, and every parse of the Snakefile would pay them."""
    if not any(job.resources.get("gpu", 0) for job in model_jobs(config)):
        return None
    digest = hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:16]
    path = cache / f"{digest}.txt"
    if not path.exists():
        cache.mkdir(parents=True, exist_ok=True)
        path.write_text(line(gpu_hours(config), f"{config['run']} on GPUs"))
    return path.read_text()


def summary(frame: pd.DataFrame) -> pd.DataFrame:
    """H200-hours per grid and step, with the total row last."""
    table = frame.pivot_table(index="grid", columns="step", values="hours", aggfunc="sum", fill_value=0.0)
    table = table[[step for step in GPU_STEPS if step in table.columns]]
    table["total"] = table.sum(axis=1)
    table.loc["total"] = table.sum(axis=0)
    return table


def markdown(frame: pd.DataFrame) -> list[str]:
    """``summary`` as a Markdown table of H200-hours."""
    table = summary(frame)
    header = ["grid", *table.columns]
    rows = [[f"**{grid}**" if grid == "total" else grid, *(f"{v:,.1f}" for v in values)]
            for grid, values in zip(table.index, table.to_numpy())]  # fmt: skip
    return ["| " + " | ".join(r) + " |" for r in [header, ["---"] * len(header), *rows]]


def line(frame: pd.DataFrame, label: str = "estimated GPU time") -> str:
    """One line, ``label`` first: the total and each step's H200-hours."""
    per_step = frame.groupby("step")["hours"].sum().sort_values(ascending=False)
    steps = ", ".join(f"{step} {hours:,.0f}" for step, hours in per_step.items())
    return (
        f"{label}: {frame['hours'].sum():,.0f} H200-hours ({steps}), FLOPs at "
        f"{UTILIZATION:.0%} of {PEAK_FLOPS / 1e12:.0f} TFLOP/s or {LAUNCH_FLOOR * 1e3:.2f} ms per layer-step, "
        "whichever is longer (scalemech gpu-hours)"
    )
