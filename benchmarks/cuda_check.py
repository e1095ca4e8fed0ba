"""The CUDA path end to end on synthetic data, with timings: run it on a GPU machine.

    PYTHONPATH=src python benchmarks/cuda_check.py

Trains a small ResNet (bf16 autocast, channels_last) and a byte-level llama on CUDA, interrupts
one run and resumes it (CUDA RNG state in the checkpoint: the resumed weights must equal an
uninterrupted run's), then measures gradient pools and the E10 trajectory on CUDA. Prints one
line per check and the examples/s of CUDA against the CPU in the same run.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import torch

from scalemech.data import Prepared
from scalemech.experiments import measure, trajectory
from scalemech.models import load_model
from scalemech.train import Recipe, train

RESNET = {
    "family": "resnet",
    "depth": 14,
    "width": 2,
    "norm": "batch",
    "placement": "branch",
    "in_channels": 3,
    "num_classes": 10,
}
LLAMA = {"family": "llama", "depth": 2, "width": 256, "head_dim": 64, "block_size": 128, "vocab_size": 256}
KEYS = {"run": "cuda", "dataset": "synthetic", "family": "resnet", "depth": 14, "width": 2, "seed": 0, "model": "m"}
SETTINGS = {
    "points": 3,
    "train_pool": 128,
    "test_pool": 128,
    "batch_size": 64,
    "covmat_points": 1,
    "pool_dtype": "float16",
    "interval_level": 0.9,
    "null_draws": 4,
    "seed": 0,
}


def images() -> Prepared:
    """Class-dependent 3×32×32 uint8 images: learnable, so the loss must fall."""
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
    stream = torch.tensor(list(Path(torch.__file__).read_bytes() * 40), dtype=torch.uint8)
    cut = int(0.9 * len(stream))
    return Prepared("bytes", "text", stream[:cut], None, stream[cut:], None, {}, vocab_size=256)


def timed_train(spec: dict, recipe: Recipe, data: Prepared, out: Path, device: str, **options) -> tuple[dict, float]:
    start = time.perf_counter()
    metrics = train(
        spec, recipe, data, out, out / "ckpt", seed=0, device=device, checkpoint_every=10, progress=False, **options
    )
    return metrics, time.perf_counter() - start


def main() -> None:
    assert torch.cuda.is_available(), "no CUDA device"
    print("device:", torch.cuda.get_device_name(0), "torch", torch.__version__)
    work = Path(tempfile.mkdtemp())
    data, recipe = images(), Recipe(steps=40, batch_size=256, lr=0.1, eval_examples=1000, eval_batch_size=1000)
    cuda, cuda_s = timed_train(
        RESNET, recipe, data, work / "cuda", "cuda", snapshots=6, snapshot_dir=work / "snapshots"
    )
    cpu, cpu_s = timed_train(
        RESNET, Recipe(steps=8, batch_size=256, lr=0.1, eval_examples=256), data, work / "cpu", "cpu"
    )
    print(
        f"resnet-d14-w2 bf16 on CUDA: test loss {cuda['test_loss']:.3f} (chance {torch.log(torch.tensor(10.0)):.3f}),"
        f" {cuda['examples_per_second']:.0f} examples/s; CPU {cpu['examples_per_second']:.0f} examples/s "
        f"(ratio {cuda['examples_per_second'] / cpu['examples_per_second']:.0f}x; wall {cuda_s:.1f} s, {cpu_s:.1f} s)"
    )
    assert cuda["test_loss"] < 2.0, "the ResNet did not learn on CUDA"

    def crash_at_15(step: int) -> None:
        if step == 15:
            raise KeyboardInterrupt

    resumed = work / "resumed"
    try:
        timed_train(RESNET, recipe, data, resumed, "cuda", on_step=crash_at_15)
    except KeyboardInterrupt:
        pass
    timed_train(RESNET, recipe, data, resumed, "cuda")
    whole, again = (torch.load(p / "model.pt", weights_only=False)["state_dict"] for p in (work / "cuda", resumed))
    diff = max(float((whole[k].float() - again[k].float()).abs().max()) for k in whole)
    print(f"resume on CUDA after a kill at step 15: max |weight difference| to the uninterrupted run = {diff:.3g}")

    llama, llama_s = timed_train(
        LLAMA,
        Recipe(optimizer="adamw", lr=3e-3, steps=60, batch_size=64, eval_windows=64, eval_every_steps=30),
        text(),
        work / "llama",
        "cuda",
    )
    print(
        f"llama-d2-w256 on CUDA: test loss {llama['test_loss']:.3f}, {llama['tokens_per_second']:.0f} tokens/s "
        f"(wall {llama_s:.1f} s)"
    )

    model, payload = load_model(work / "cuda" / "model.pt", map_location="cuda")
    start = time.perf_counter()
    frames = measure(model, data, KEYS, work / "pools", device="cuda", **SETTINGS)
    rows = trajectory(
        model,
        data,
        work / "snapshots" / payload["identity"],
        KEYS,
        points=2,
        pool=128,
        batch_size=64,
        interval_level=0.9,
        seed=0,
        device="cuda",
    )
    print(
        f"measure + trajectory on CUDA: {len(frames['dalign'])} dalign rows, {len(rows)} trajectory rows "
        f"({time.perf_counter() - start:.1f} s); d_align at step 0 / last (median): "
        f"{rows[rows.step == 0].d_align.median():.3g} / {rows[rows.step == rows.step.max()].d_align.median():.3g}"
    )


if __name__ == "__main__":
    main()
