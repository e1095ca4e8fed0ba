"""The GPU questions, settled in one command (``make gpu-check``, under 8 minutes on a fresh H200).

    PYTHONPATH=src python benchmarks/cuda_check.py --cifar cifar10-jpg.tar.gz   # needs CUDA
    PYTHONPATH=src python benchmarks/cuda_check.py --cpu-only [--cifar ARCHIVE]  # the CPU's share, anywhere

Each section runs in its own time box (``BOXES``, seconds) and prints one line, ``NAME status what``;
status ``ok`` or ``FAIL`` for a comparison with a stated tolerance, ``info`` for a measurement, ``skip``
(saying why) for a section the device cannot run, ``TIMEOUT`` when its box ran out:

ENV    driver, torch, the device, and the flags training and measurement run under (TF32, cuDNN).
SYNC   host syncs per training step (``torch.cuda.set_sync_debug_mode``), images and text.
CIFAR  ResNet-20 with the paper's recipe on CIFAR-10 read from ``--cifar`` (the official python tarball or an
       image-folder archive), for as many epochs as the box allows: seconds per epoch and test accuracy,
       beside He et al.'s 91.25 % at 160 epochs (a short cosine schedule ends lower).
LLAMA  the paper's llama (12 layers, head 64, windows of 512, batch 64) of width 512, through ``train``
       torch.compile'd: tokens/s, model FLOP utilization, peak memory, the first step's seconds (compiling
       the evaluation and the training graphs); LLAMA3K the same at width 3072.
PACK   ResNet-20 step time of 1 process alone against 4 concurrent ones on one device.
MEAS   the measurement's statistics (covariance, signal, dalign) on CUDA against the CPU, TF32 off and on,
       each float column within ``MEAS_RTOL`` of its largest magnitude; NaN matches NaN, ±inf the same inf.
E11    the growth arm's step time (``experiments.arms.train_params``, in grow's engine) in fp32 against bf16
       autocast (NCHW and channels-last).
DET    the largest weight difference between two identical runs, and between a run and one killed at
       step 15 and resumed: under cuDNN's deterministic algorithms (must be 0) and under training's
       defaults (autotuned cuDNN, for information).

With ``--cpu-only`` every section a CPU can run runs at toy sizes (MEAS: one thread against two; DET on the
CPU), so the comparisons themselves are exercised here (``tests/test_cuda_check.py``). The exit status is
1 when a line says FAIL or TIMEOUT.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from contextlib import contextmanager, nullcontext
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from scalemech.core.device import cuda_problem, numerics, set_training_numerics, tf32
from scalemech.core.recipe import Recipe
from scalemech.core.tables import timing_columns
from scalemech.data import Prepared, prepare_dataset
from scalemech.data.prepared import load_prepared
from scalemech.experiments.arms import ArmConfig, ArmData, train_params
from scalemech.experiments.measure import measure
from scalemech.gradients.batches import to_device
from scalemech.models import build_model, load_model
from scalemech.training.train import SYNC_EVERY, non_embedding_parameters, train

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS (DET)
CPU_BOXES = 3  # a CPU's boxes are this many times longer (toy sizes, and a machine maybe shared)
BOXES = {"ENV": 15, "SYNC": 30, "CIFAR": 75, "LLAMA": 80, "LLAMA3K": 200, "PACK": 45, "MEAS": 25, "E11": 30, "DET": 20}
PAPER_RESNET20 = 91.25  # He et al. 2016, Table 6: ResNet-20 on CIFAR-10, % test accuracy after ~160 epochs
RESNET = {"family": "resnet", "norm": "batch", "placement": "branch", "in_channels": 3, "num_classes": 10}
CIFAR_RECIPE = Recipe(
    optimizer="sgd",
    lr=0.1,
    momentum=0.9,
    nesterov=True,
    weight_decay=5e-4,
    batch_size=128,
    warmup_fraction=0.05,
    augment="auto",
    epochs=1,
)  # config/paper.yaml's CIFAR recipe
LLAMA = {"family": "llama", "depth": 12, "head_dim": 64, "block_size": 512, "vocab_size": 256}  # paper.yaml
LLAMA_WIDTHS = (512, 3072)  # the smallest and largest of paper.yaml's
PEAK_BF16 = {"H200": 989e12, "H100": 989e12, "A100": 312e12, "L40S": 362e12}  # dense bf16 FLOP/s, datasheets
MEAS_RTOL = 1e-3  # |device − cpu| ≤ MEAS_RTOL · max|column| for every float column (fp32 on both)
PACKED = {"cuda": 4, "cpu": 2}  # concurrent processes of PACK
TABLES = ("covariance", "signal", "dalign")


class Timeout(Exception):
    """A section's time box ran out."""


@contextmanager
def time_box(seconds: float):
    """Raise ``Timeout`` inside the block after ``seconds`` of wall time (SIGALRM; the main thread)."""

    def expire(signum, frame):
        raise Timeout

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


# -- data ---------------------------------------------------------------------------------------
def images(n: int = 6000) -> Prepared:
    """Class-dependent 3x32x32 uint8 images (CIFAR's shape), the last sixth the test split."""
    generator = torch.Generator().manual_seed(0)
    y = torch.randint(0, 10, (n,), generator=generator)
    x = (torch.rand(n, 3, 32, 32, generator=generator) * 128 + y[:, None, None, None] * 12).to(torch.uint8)
    cut, manifest = n * 5 // 6, {"stats": {"mean": [0.5] * 3, "std": [0.25] * 3}}
    return Prepared(
        "synthetic", "image", x[:cut], y[:cut], x[cut:], y[cut:], manifest, num_classes=10, in_channels=3, image_size=32
    )


def text() -> Prepared:
    """Bytes of torch's own sources, repeated: a stream long enough for windows of 512."""
    stream = torch.tensor(list(Path(torch.__file__).read_bytes() * 40), dtype=torch.uint8)
    cut = int(0.9 * len(stream))
    return Prepared("bytes", "text", stream[:cut], None, stream[cut:], None, {}, vocab_size=256)


def timed_train(spec: dict, recipe: Recipe, data: Prepared, out: Path, device: str, warmup: int, **options) -> dict:
    """``train`` once, the device synchronized after every step: seconds per step after ``warmup`` steps
    (``step_s``), the first step's seconds from the call (``first_s``: building, compiling), the metrics."""
    ticks: list[float] = []

    def tick(step: int) -> None:
        synchronize(device)
        ticks.append(time.perf_counter())

    start = time.perf_counter()
    metrics = train(
        spec,
        recipe,
        data,
        out,
        out / "ckpt",
        seed=0,
        device=device,
        checkpoint_every=10**6,
        progress=False,
        on_step=tick,
        **options,
    )
    steady = ticks[warmup:-1]  # the last step's tick includes the final evaluation
    step_s = (steady[-1] - steady[0]) / (len(steady) - 1) if len(steady) > 1 else math.nan
    return {"step_s": step_s, "first_s": ticks[0] - start, "metrics": metrics}


# -- sections -----------------------------------------------------------------------------------
def env(device: str, work: Path, args) -> tuple[str, str]:
    set_training_numerics()
    flags = ", ".join(f"{k} {v}" for k, v in numerics().items())
    if device == "cpu":
        return (
            "info",
            f"{platform.processor() or platform.machine()}, torch {torch.__version__}, "
            f"{torch.get_num_threads()} threads; training's CUDA flags: {flags}",
        )
    driver = "unknown"
    if shutil.which("nvidia-smi"):
        query = ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]
        driver = subprocess.run(query, capture_output=True, text=True, timeout=15).stdout.strip() or driver
    props = torch.cuda.get_device_properties(0)
    return "info", (
        f"{props.name} ({props.total_memory / 2**30:.0f} GiB, {props.multi_processor_count} SMs), driver {driver}, "
        f"torch {torch.__version__}, CUDA {torch.version.cuda}; training: {flags}; measurement: TF32 off"
    )


def sync(device: str, work: Path, args) -> tuple[str, str]:
    if device != "cuda":
        return "skip", "host syncs exist only on CUDA"
    counts = {}
    for name, spec, recipe, data in (
        ("images", {**RESNET, "depth": 8, "width": 0.5}, Recipe(steps=60, batch_size=128, eval_examples=256), images()),
        (
            "text",
            {**LLAMA, "depth": 2, "width": 64, "block_size": 64},
            Recipe(optimizer="adamw", lr=1e-3, steps=60, batch_size=8, eval_windows=8, eval_batch_size=8),
            text(),
        ),
    ):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            seen: list[int] = []  # syncs warned about, after each step

            def count(step: int, seen: list[int] = seen, caught: list = caught) -> None:
                seen.append(len(caught))

            torch.cuda.set_sync_debug_mode("warn")
            try:
                train(
                    spec,
                    recipe,
                    data,
                    work / name,
                    work / name / "ckpt",
                    seed=0,
                    device=device,
                    checkpoint_every=10**6,
                    progress=False,
                    on_step=count,
                )
            finally:
                torch.cuda.set_sync_debug_mode(0)
        counts[name] = (seen[-2] - seen[0]) / (len(seen) - 2)  # steps 2 … 59: no evaluation among them
    target = 1 / SYNC_EVERY
    status = "ok" if max(counts.values()) <= target + 1e-9 else "FAIL"
    per_step = ", ".join(f"{name} {count:.2f}" for name, count in counts.items())
    return status, f"host syncs per training step: {per_step} (target ≤ 1/SYNC_EVERY = {target:.2f})"


def cifar(device: str, work: Path, args) -> tuple[str, str]:
    if args.cifar is None:
        return "skip", "no --cifar archive given (the official python tarball or an image-folder archive)"
    start = time.perf_counter()
    prepare_dataset("cifar10", {"archive": str(args.cifar)}, work / "data", offline=True)
    data, prepared_s = load_prepared(work / "data"), time.perf_counter() - start
    if device == "cpu":  # a CPU trains a slice
        data = replace(
            data,
            train_x=data.train_x[:512],
            train_y=data.train_y[:512],
            test_x=data.test_x[:256],
            test_y=data.test_y[:256],
        )
    spec = {**RESNET, "depth": 20, "width": 1}
    probe_steps = 30 if device == "cuda" else 6
    probe = timed_train(spec, replace(CIFAR_RECIPE, epochs=None, steps=probe_steps), data, work / "probe", device, 2)
    steps_per_epoch = probe["metrics"]["steps"] / probe["metrics"]["epochs"]
    left = BOXES["CIFAR"] - (time.perf_counter() - start) - 15  # 15 s for building and the evaluations
    epochs = max(1, int(left / (probe["step_s"] * steps_per_epoch * 1.1)))
    run = timed_train(spec, replace(CIFAR_RECIPE, epochs=epochs), data, work / "run", device, warmup=5)
    metrics = run["metrics"]
    return "info", (
        f"ResNet-20, {len(data.train_x)} train images (prepared in {prepared_s:.0f} s), {epochs} epochs of "
        f"{metrics['train_seconds'] / epochs:.1f} s: test accuracy {100 * metrics['test_acc']:.2f} % "
        f"(He et al.: {PAPER_RESNET20} % at 160 epochs), train loss {metrics['train_loss']:.3f}"
    )


def llama(width: int) -> Callable[[str, Path, argparse.Namespace], tuple[str, str]]:
    """The LLAMA section of the paper's width ``width`` (a 2-layer width-64 stand-in on a CPU)."""

    def section(device: str, work: Path, args) -> tuple[str, str]:
        if device == "cpu" and width != min(LLAMA_WIDTHS):
            return "skip", f"a CPU runs the stand-in once, in w{min(LLAMA_WIDTHS)}'s line"
        if device == "cpu":
            spec, batch, steps, warmup, compile = {**LLAMA, "depth": 2, "width": 64, "block_size": 64}, 2, 8, 2, False
        else:
            spec, batch, steps, warmup, compile = {**LLAMA, "width": width}, 64, 14, 4, True
        recipe = Recipe(
            optimizer="adamw",
            lr=1e-3,
            weight_decay=0.1,
            steps=steps,
            batch_size=batch,
            grad_clip=1.0,
            eval_windows=8,
            eval_batch_size=8,
        )
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        run = timed_train(spec, recipe, text(), work, device, warmup, compile=compile)
        n, depth, block = non_embedding_parameters(build_model(spec)), spec["depth"], spec["block_size"]
        tokens_s = batch * block / run["step_s"]
        flops_per_token = 6 * n + 12 * depth * block * spec["width"]  # weights, and attention's scores (PaLM, App. B)
        name = torch.cuda.get_device_name(0) if device == "cuda" else ""
        peak = next((flops for gpu, flops in PEAK_BF16.items() if gpu in name), None)
        mfu = f", MFU {100 * flops_per_token * tokens_s / peak:.0f} %" if peak else ""
        memory = f", peak {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB" if device == "cuda" else ""
        how = "bf16 autocast, torch.compile" if compile else "fp32, a CPU stand-in"
        return "info", (
            f"llama d{depth} w{spec['width']} ({n / 1e6:.0f} M), batch {batch} x {block} ({how}): {tokens_s:,.0f} "
            f"tokens/s{mfu}{memory}; first step {run['first_s']:.0f} s" + (" (compiling)" if compile else "")
        )

    return section


def pack_worker(device: str, out: str, start, result) -> None:
    """One PACK process: ResNet-20 trained from synthetic images; puts its seconds per step."""
    torch.set_num_threads(1)
    start.wait()
    spec = {**RESNET, "depth": 20, "width": 1 if device == "cuda" else 0.25}
    run = timed_train(
        spec,
        Recipe(steps=40 if device == "cuda" else 6, batch_size=128, eval_examples=128),
        images(),
        Path(out),
        device,
        warmup=5 if device == "cuda" else 1,
    )
    result.put(run["step_s"])


def pack(device: str, work: Path, args) -> tuple[str, str]:
    context = multiprocessing.get_context("spawn")
    step_s = {}
    for processes in (1, PACKED[device]):
        start, result = context.Barrier(processes), context.Queue()
        workers = [
            context.Process(target=pack_worker, args=(device, str(work / f"{processes}-{i}"), start, result))
            for i in range(processes)
        ]
        try:
            for worker in workers:
                worker.start()
            step_s[processes] = [result.get() for _ in workers]
        finally:
            for worker in workers:
                worker.terminate() if worker.is_alive() and processes not in step_s else worker.join()
    count = PACKED[device]
    alone, packed = step_s[1][0], float(np.mean(step_s[count]))
    return "info", (
        f"ResNet-20 batch 128: alone {1000 * alone:.1f} ms/step; {count} at once {1000 * packed:.1f} ms/step each, "
        f"{count * alone / packed:.2f}x one process's throughput"
    )


def measured(device: str, work: Path, threads: int | None = None, tf32_on: bool = False) -> dict[str, pd.DataFrame]:
    """The statistics of a ResNet-8 (width 0.5, 30 steps of training on synthetic images) measured on
    ``device`` with float32 pools; ``tf32_on``: TF32 left on inside ``measure`` (without its own guard)."""
    model_dir = work / "model"
    if not (model_dir / "model.pt").exists():
        train(
            {**RESNET, "depth": 8, "width": 0.5},
            Recipe(steps=30, batch_size=128, eval_examples=256),
            images(),
            model_dir,
            model_dir / "ckpt",
            seed=0,
            device="cpu",
            checkpoint_every=10**6,
            progress=False,
        )
    keys = {"dataset": "synthetic", "model": "resnet-d8-w0.5", "family": "resnet", "depth": 8, "width": 0.5, "seed": 0}
    previous = torch.get_num_threads()
    torch.set_num_threads(threads or previous)
    run = measure.__wrapped__ if tf32_on else measure
    try:
        with tf32(True) if tf32_on else nullcontext():
            return run(
                load_model(model_dir / "model.pt")[0],
                images(),
                keys,
                work / f"pools-{device}-{threads}-{tf32_on}",
                points="all",
                train_pool=128,
                test_pool=128,
                batch_size=64,
                covmat_points=0,
                pool_dtype="float32",
                interval_level=0.95,
                null_draws=10,
                seed=0,
                device=device,
            )
    finally:
        torch.set_num_threads(previous)


def worst(reference: pd.DataFrame, other: pd.DataFrame) -> float:
    """The largest ``|other − reference| / (MEAS_RTOL · max|reference column|)`` over the float columns
    but timings: at most 1 passes. NaN against NaN and an infinity against the same one count 0; any
    other pair with a non-finite side counts inf."""
    columns = [c for c in reference.columns if reference[c].dtype.kind == "f" and c not in timing_columns()]
    a, b = reference[columns].to_numpy(float), other[columns].to_numpy(float)
    finite = np.isfinite(a) & np.isfinite(b)
    same = (np.isnan(a) & np.isnan(b)) | (np.isinf(a) & (a == b))
    scale = MEAS_RTOL * np.nanmax(np.where(np.isfinite(a), np.abs(a), np.nan), axis=0, initial=0.0)
    with np.errstate(invalid="ignore"):  # inf − inf where a side is not finite: replaced below
        difference = np.abs(b - a)
    ratio = np.where(finite, difference / np.maximum(scale, np.finfo(float).tiny), np.where(same, 0.0, np.inf))
    return float(ratio.max(initial=0.0))


def meas(device: str, work: Path, args) -> tuple[str, str]:
    reference = measured("cpu", work, threads=1 if device == "cpu" else None)
    if device == "cpu":
        runs = {"2 threads": lambda: measured("cpu", work, threads=2)}
    else:
        runs = {"CUDA fp32": lambda: measured("cuda", work), "CUDA TF32": lambda: measured("cuda", work, tf32_on=True)}
    parts, failed = [], False
    for name, run in runs.items():
        tables = run()
        ratio = max(worst(reference[t], tables[t]) for t in TABLES)
        failed |= ratio > 1 and name != "CUDA TF32"  # TF32 is informational: measurement runs without it
        parts.append(f"{name} worst {ratio:.3g}")
    against = "1 thread" if device == "cpu" else "the CPU"
    return "FAIL" if failed else "ok", (
        f"{', '.join(TABLES)} against {against}, in units of {MEAS_RTOL:g} x max|column| (≤ 1 passes): "
        + "; ".join(parts)
    )


def e11(device: str, work: Path, args) -> tuple[str, str]:
    spec = {**RESNET, "depth": 56, "width": 2} if device == "cuda" else {**RESNET, "depth": 8, "width": 0.5}
    steps = 30 if device == "cuda" else 3
    data = images()
    per_step = {}
    for precision, layout in (
        ("fp32", torch.contiguous_format),
        ("bf16", torch.contiguous_format),
        ("bf16", torch.channels_last),
    ):
        torch.manual_seed(0)
        model = build_model(spec).to(device, memory_format=layout)
        config = ArmConfig(
            steps=steps,
            train_mode="all",
            optimizer="adam",
            lr=1e-4,
            lr_factors=[1.0],
            momentum=0.9,
            weight_decay=0.0,
            batch_size=128,
            eval_batch_size=256,
            jump_lengths=[1.0],
            seed=0,
            precision=precision,
        )

        def prepare(x: torch.Tensor, y: torch.Tensor, layout: torch.memory_format = layout) -> tuple:
            x, y = to_device(device)(x, y)
            return x.contiguous(memory_format=layout), y

        arm = ArmData(model.task(data), None, None, prepare, order_seed=0)
        warm, ticks = min(5, steps - 1), {}

        def tick(done: int, warm: int = warm, ticks: dict = ticks) -> None:  # after warm-up and at the end
            if done in (warm, steps):
                synchronize(device)  # the device caught up
                ticks[done] = time.perf_counter()

        train_params(model, model.parameters(), arm, config, visit=tick)
        per_step[precision + ("" if layout == torch.contiguous_format else " channels-last")] = (
            ticks[steps] - ticks[warm]
        ) / (steps - warm)
    return "info", (
        f"arm steps of ResNet-{spec['depth']} width {spec['width']} (batch 128, every parameter, Adam): "
        + ", ".join(f"{name} {1000 * s:.1f} ms ({per_step['fp32'] / s:.2f}x)" for name, s in per_step.items())
    )


def det(device: str, work: Path, args) -> tuple[str, str]:
    spec = {**RESNET, "depth": 14, "width": 2} if device == "cuda" else {**RESNET, "depth": 8, "width": 0.25}
    recipe = Recipe(
        steps=40 if device == "cuda" else 20, batch_size=256 if device == "cuda" else 32, lr=0.1, eval_examples=256
    )
    data = images()

    def run(out: Path, deterministic: bool, crash: bool = False) -> dict[str, torch.Tensor]:
        def crash_at_15(step: int) -> None:
            if crash and step == 15:
                raise KeyboardInterrupt

        options = dict(seed=0, device=device, checkpoint_every=10, progress=False, deterministic=deterministic)
        try:
            train(spec, recipe, data, out, out / "ckpt", on_step=crash_at_15, **options)
        except KeyboardInterrupt:
            train(spec, recipe, data, out, out / "ckpt", **options)
        return torch.load(out / "model.pt", weights_only=True)["state_dict"]

    def largest(a: dict, b: dict) -> float:
        return max(float((a[k].double() - b[k].double()).abs().max()) for k in a if a[k].is_floating_point())

    results = {}
    for mode in ("deterministic", "defaults") if device == "cuda" else ("deterministic",):
        deterministic = mode == "deterministic"
        torch.use_deterministic_algorithms(deterministic, warn_only=True)
        try:
            first, second = run(work / mode / "a", deterministic), run(work / mode / "b", deterministic)
            resumed = run(work / mode / "resumed", deterministic, crash=True)
        finally:
            torch.use_deterministic_algorithms(False)
        results[mode] = (largest(first, second), largest(first, resumed))
    status = "ok" if results["deterministic"] == (0.0, 0.0) else "FAIL"
    model = f"{recipe.steps} steps of ResNet-{spec['depth']} width {spec['width']}"
    return status, f"max |weight difference| after {model}: " + "; ".join(
        f"{mode}: two runs {again:.3g}, resumed at 15 {resumed:.3g}" for mode, (again, resumed) in results.items()
    )


SECTIONS: dict[str, Callable[[str, Path, argparse.Namespace], tuple[str, str]]] = {
    "ENV": env,
    "SYNC": sync,
    "CIFAR": cifar,
    "LLAMA": llama(LLAMA_WIDTHS[0]),
    "LLAMA3K": llama(LLAMA_WIDTHS[1]),
    "PACK": pack,
    "MEAS": meas,
    "E11": e11,
    "DET": det,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cpu-only", action="store_true", help="every section a CPU can run, at toy sizes")
    parser.add_argument("--cifar", type=Path, help="a CIFAR-10 archive: the official python tarball or image folders")
    parser.add_argument("--work", type=Path, help="working directory (default: a new temporary one)")
    parser.add_argument("--only", nargs="+", choices=list(SECTIONS), help="run these sections only")
    args = parser.parse_args(argv)
    if args.cifar is not None and not args.cifar.is_file():
        parser.error(f"--cifar {args.cifar}: no such file")
    device = "cpu" if args.cpu_only else "cuda"
    if device == "cuda":
        problem = cuda_problem()
        if problem:
            print(f"cuda_check: {problem}; run it where CUDA works, or pass --cpu-only", file=sys.stderr)
            return 2
    work = args.work or Path(tempfile.mkdtemp(prefix="cuda_check-"))
    failures, start = 0, time.perf_counter()
    for name in args.only or SECTIONS:
        began = time.perf_counter()
        try:
            with time_box(BOXES[name] * (CPU_BOXES if device == "cpu" else 1)):
                status, line = SECTIONS[name](device, work / name, args)
        except Timeout:
            status, line = "TIMEOUT", f"ran past its box ({BOXES[name]} s on CUDA, {CPU_BOXES}x on a CPU)"
        except Exception as error:  # a section's failure is its line; the others still run
            status, line = "FAIL", f"{type(error).__name__}: {' '.join(str(error).split())[:300]}"
        failures += status in ("FAIL", "TIMEOUT")
        print(f"{name:<8}{status:<8}{line} [{time.perf_counter() - began:.0f} s]", flush=True)
    print(f"{failures} section(s) failed, {time.perf_counter() - start:.0f} s in all; files under {work}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
