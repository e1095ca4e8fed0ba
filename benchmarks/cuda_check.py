"""config/paper.yaml at toy size on a CUDA device against the CPU, with throughput (``make gpu-check``).

    PYTHONPATH=src python benchmarks/cuda_check.py              # needs CUDA; under 8 minutes
    PYTHONPATH=src python benchmarks/cuda_check.py --cpu-only   # the CPU half alone, anywhere

1. The fixtures and config of ``scalemech.pipeline.smoke``; every dataset prepared once.
2. Every model of that config trained (or pinned) and measured through the workflow's own jobs
   (``jobs.call``) on the CPU, then trained on CUDA from the same seed: the final train and test
   losses agree within ``LOSS_TOLERANCE`` (CUDA trains under bf16 autocast, the CPU in float32).
3. The CPU-trained weights measured on CUDA: every statistic of the covariance, signal and dalign
   tables agrees with the CPU's within ``STATS_TOLERANCE`` (float32 on both; checkpoints loaded in
   bf16 within ``BF16_STATS_TOLERANCE``).

With --cpu-only, steps 2-3 compare the CPU against the CPU under the bf16 autocast CUDA trains with
(``train.AUTOCAST_DTYPES``), so the comparisons and the loss tolerance are exercised without a GPU.
4. Throughput of ResNet-20 (batch 128) and the 512-wide, 12-layer llama of paper.yaml (windows of
   512, batch 64; torch.compile on CUDA as paper.yaml's train.compile says): images/s and tokens/s
   on CUDA next to the CPU's (a smaller llama batch on the CPU), over the steps after the first few.
5. A CUDA training run killed after a checkpoint resumes to the weights of an uninterrupted one.

Without CUDA (and without --cpu-only) it fails at once with one line saying why.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from scalemech.config import ModelJob, model_jobs, read_yaml, validate_config
from scalemech.core import tables
from scalemech.core.device import cuda_problem
from scalemech.core.layout import Layout
from scalemech.core.recipe import Recipe
from scalemech.core.steps import arguments
from scalemech.data import Prepared, prepare_dataset
from scalemech.pipeline import jobs
from scalemech.pipeline.smoke import paper_smoke, write_fixtures
from scalemech.training.train import AUTOCAST_DTYPES, train

ROOT = Path(__file__).resolve().parents[1]
LOSS_TOLERANCE = {"rtol": 0.05, "atol": 0.05}
STATS_TOLERANCE = {"rtol": 1e-3, "atol": 1e-5}
BF16_STATS_TOLERANCE = {"rtol": 5e-2, "atol": 1e-3}
COMPARED_TABLES = ("covariance", "signal", "dalign")
WARMUP_STEPS = {"cpu": 1, "cuda": 5}  # steps left out of the throughput (compilation, allocator warm-up)
RESNET20 = {"family": "resnet", "depth": 20, "width": 1, "norm": "batch", "placement": "branch"}


@contextmanager
def inside(directory: Path) -> Iterator[None]:
    """Run with ``directory`` as the working directory (a run's layout paths are relative)."""
    previous = Path.cwd()
    directory.mkdir(parents=True, exist_ok=True)
    os.chdir(directory)
    try:
        yield
    finally:
        os.chdir(previous)


def run_job(rule: str, config: dict, job: ModelJob, device: str, **replaced: str) -> None:
    """Run per-model ``rule`` of ``job`` as the workflow would, on ``device`` (named inputs in ``replaced``
    take the place of the layout's)."""
    settings = {**jobs.execution(config, gpus=int(device == "cuda")), "device": device}
    jobs.call(rule, {**arguments(rule, config, job), **replaced}, settings)


@contextmanager
def autocast_on_cpu() -> Iterator[None]:
    """Train on the CPU under the bf16 autocast of CUDA (``train.AUTOCAST_DTYPES``)."""
    AUTOCAST_DTYPES["cpu"] = AUTOCAST_DTYPES["cuda"]
    try:
        yield
    finally:
        del AUTOCAST_DTYPES["cpu"]


def run_toy_models(config: dict, work: Path, run: str, reference: Path) -> None:
    """Prepare the data and run every model of ``config`` under ``work/run`` on ``run``'s device (``cpu``,
    ``cuda``, or ``cpu-bf16``): train or pin it, and measure the weights trained under ``reference``."""
    device = run.removesuffix("-bf16")
    start = time.perf_counter()
    with inside(work / run), autocast_on_cpu() if run == "cpu-bf16" else nullcontext():
        layout = Layout(config["run"])
        for name, settings in config["datasets"].items():
            prepare_dataset(name, settings, layout.data(name), offline=True)
        for job in model_jobs(config):
            run_job("train_model" if job.recipe is not None else "pin_pretrained", config, job, device)
            run_job("measure_model", config, job, device, model=str(reference / layout.model(job.dataset, job.name)))
    print(
        f"{run}: {len(model_jobs(config))} toy models trained or pinned, and measured, "
        f"in {time.perf_counter() - start:.0f} s"
    )


def floats(frame: pd.DataFrame) -> np.ndarray:
    """The float columns of a table but its timings."""
    return frame[
        [c for c in frame.columns if frame[c].dtype.kind == "f" and c not in tables.timing_columns()]
    ].to_numpy()


def worst(reference: np.ndarray, other: np.ndarray, rtol: float, atol: float) -> float:
    """The largest ``|other - reference| / (atol + rtol |reference|)`` (at most 1 passes; NaN on both
    sides counts as equal, on one side as infinitely far)."""
    ratio = np.abs(other - reference) / (atol + rtol * np.abs(reference))
    ratio = np.where(np.isnan(reference) & np.isnan(other), 0.0, np.where(np.isnan(ratio), np.inf, ratio))
    return float(ratio.max(initial=0.0))


def verdict(line: str, ratio: float, tolerance: dict) -> list[str]:
    """Print ``line`` with its worst ratio to ``tolerance``; the line as a failure if above 1."""
    print(f"{'ok  ' if ratio <= 1 else 'FAIL'} {line}: worst {ratio:.2f} of {tolerance}")
    return [line] if ratio > 1 else []


def check_toy_config(work: Path, other: str) -> list[str]:
    """Steps 1-3 of the module docstring, ``other`` (``cuda`` or ``cpu-bf16``) against the CPU; returns
    the failures, one line each."""
    paper = read_yaml(ROOT / "config" / "paper.yaml")
    config = validate_config(paper_smoke(paper, work / "fixtures"))
    write_fixtures(paper, work / "fixtures")
    for run in ("cpu", other):
        run_toy_models(config, work, run, reference=work / "cpu")
    layout, failures = Layout(config["run"]), []
    for job in model_jobs(config):
        if job.recipe is not None:
            metrics = [
                json.loads((work / run / layout.model(job.dataset, job.name, "metrics.json")).read_text())
                for run in ("cpu", other)
            ]
            losses = [np.array([m["train_loss"], m["test_loss"]]) for m in metrics]
            failures += verdict(
                f"{job.key}: train/test loss {other} {losses[1].round(4)}, cpu {losses[0].round(4)}",
                worst(*losses, **LOSS_TOLERANCE),
                LOSS_TOLERANCE,
            )
        tolerance = BF16_STATS_TOLERANCE if job.spec.get("dtype") == "bfloat16" else STATS_TOLERANCE
        for table in COMPARED_TABLES:
            frames = [
                tables.read_table(work / run / layout.per_model(table, job.dataset, job.name), table)
                for run in ("cpu", other)
            ]
            failures += verdict(
                f"{job.key}: {table} on {other} against cpu", worst(*map(floats, frames), **tolerance), tolerance
            )
    return failures


# -- throughput ----------------------------------------------------------------------------------
def images() -> Prepared:
    """Class-dependent 3x32x32 uint8 images (CIFAR's shape)."""
    generator = torch.Generator().manual_seed(0)
    y = torch.randint(0, 10, (6000,), generator=generator)
    x = (torch.rand(6000, 3, 32, 32, generator=generator) * 128 + y[:, None, None, None] * 12).to(torch.uint8)
    manifest = {"stats": {"mean": [0.5] * 3, "std": [0.25] * 3}}
    return Prepared(
        "synthetic",
        "image",
        x[:5000],
        y[:5000],
        x[5000:],
        y[5000:],
        manifest,
        num_classes=10,
        in_channels=3,
        image_size=32,
    )


def text() -> Prepared:
    """Bytes of torch's own sources, repeated: a stream long enough for windows of 512."""
    stream = torch.tensor(list(Path(torch.__file__).read_bytes() * 40), dtype=torch.uint8)
    cut = int(0.9 * len(stream))
    return Prepared("bytes", "text", stream[:cut], None, stream[cut:], None, {}, vocab_size=256)


def per_second(spec: dict, recipe: Recipe, data: Prepared, out: Path, device: str, compile: bool) -> float:
    """Examples per second of ``train`` between the end of step ``WARMUP_STEPS[device]`` and the end of the
    step before the last (whose tick includes the final evaluation), the device synchronized at each."""
    ticks: dict[int, float] = {}

    def tick(step: int) -> None:
        if device == "cuda":
            torch.cuda.synchronize()
        ticks[step] = time.perf_counter()

    train(
        spec,
        recipe,
        data,
        out,
        out / "ckpt",
        seed=0,
        device=device,
        checkpoint_every=10**6,
        compile=compile,
        progress=False,
        on_step=tick,
    )
    first, last = WARMUP_STEPS[device], recipe.steps - 1
    return (last - first) * recipe.batch_size / (ticks[last] - ticks[first])


def throughput(work: Path, devices: tuple[str, ...]) -> None:
    """Step 4 of the module docstring."""
    paper = read_yaml(ROOT / "config" / "paper.yaml")
    grid = paper["grids"]["llama_widths"]
    llama = {
        "family": "llama",
        "depth": grid["depths"][0],
        "width": min(grid["widths"]),
        **grid["model"],
        "vocab_size": 256,
    }
    resnet = {**RESNET20, "in_channels": 3, "num_classes": 10}
    steps, llama_batch = {"cpu": 4, "cuda": 40}, {"cpu": 2, "cuda": grid["recipe"]["batch_size"]}
    figures = {}
    for device in devices:
        compile = paper["train"]["compile"] and device == "cuda"
        total = WARMUP_STEPS[device] + steps[device]
        image_recipe = Recipe(steps=total, batch_size=128, eval_every_epoch=100, eval_examples=128)
        text_recipe = Recipe(
            optimizer="adamw", lr=1e-3, steps=total, batch_size=llama_batch[device], eval_windows=8, eval_batch_size=8
        )
        figures[device] = (
            per_second(resnet, image_recipe, images(), work / f"resnet-{device}", device, compile),
            per_second(llama, text_recipe, text(), work / f"llama-{device}", device, compile) * llama["block_size"],
        )
        how = f"{torch.get_num_threads()} threads" if device == "cpu" else f"{torch.cuda.get_device_name(0)}, bf16"
        print(
            f"{device} ({how}{', compiled' if compile else ''}): "
            f"ResNet-20 {figures[device][0]:.0f} images/s (batch 128), "
            f"llama-d{llama['depth']}-w{llama['width']} {figures[device][1]:.0f} tokens/s "
            f"(batch {llama_batch[device]} x {llama['block_size']})"
        )
    if "cuda" in figures:
        resnet_ratio, llama_ratio = (cuda / cpu for cuda, cpu in zip(figures["cuda"], figures["cpu"]))
        print(f"CUDA / CPU: ResNet-20 {resnet_ratio:.0f}x, llama {llama_ratio:.0f}x")


def check_resume(work: Path) -> list[str]:
    """Step 5 of the module docstring."""
    spec = {**RESNET20, "depth": 14, "width": 2, "in_channels": 3, "num_classes": 10}
    recipe, data = Recipe(steps=40, batch_size=256, lr=0.1, eval_examples=256), images()

    def run(out: Path, **options) -> None:
        train(
            spec, recipe, data, out, out / "ckpt", seed=0, device="cuda", checkpoint_every=10, progress=False, **options
        )

    def crash_at_15(step: int) -> None:
        if step == 15:
            raise KeyboardInterrupt

    run(work / "whole")
    try:
        run(work / "resumed", on_step=crash_at_15)
    except KeyboardInterrupt:
        run(work / "resumed")
    whole, resumed = (torch.load(work / p / "model.pt", weights_only=True)["state_dict"] for p in ("whole", "resumed"))
    diff = max(float((whole[k].float() - resumed[k].float()).abs().max()) for k in whole)
    line = f"resume on CUDA after a kill at step 15: max |weight difference| to the uninterrupted run {diff:.3g}"
    print(f"{'ok  ' if diff == 0 else 'FAIL'} {line}")
    return [] if diff == 0 else [line]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cpu-only", action="store_true", help="run the CPU half only (no CUDA needed)")
    parser.add_argument("--work", type=Path, help="working directory (default: a new temporary one)")
    args = parser.parse_args(argv)
    if not args.cpu_only:
        problem = cuda_problem()
        if problem:
            print(f"cuda_check: {problem}; run it where CUDA works, or pass --cpu-only", file=sys.stderr)
            return 2
        print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
    work = args.work or Path(tempfile.mkdtemp(prefix="cuda_check-"))
    start = time.perf_counter()
    failures = check_toy_config(work / "toy", "cpu-bf16" if args.cpu_only else "cuda")
    throughput(work / "throughput", ("cpu",) if args.cpu_only else ("cpu", "cuda"))
    if not args.cpu_only:
        failures += check_resume(work / "resume")
    print(f"{len(failures)} failure(s) in {time.perf_counter() - start:.0f} s; files under {work}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
