"""Training throughput of ``scalemech.training.train`` against a plain PyTorch loop, in one run.

Both train the same ResNet-20 (k = 1) from the same initial weights with the same SGD
(lr 0.1, momentum 0.9, Nesterov, weight decay 5e-4), batch size 128, number of steps and
torch threads, on CIFAR-shaped 3×32×32 images with random crop (padding 4) + horizontal flip:

- ours:      ``train()``: data on the device as one uint8 tensor, batched crop/flip and
             normalization, channels_last (airbench style);
- reference: ``DataLoader`` over a ``TensorDataset`` with torchvision ``RandomCrop(32, padding=4)``,
             ``RandomHorizontalFlip`` and ``Normalize`` applied per example, NCHW.

Images/s count optimizer steps only (evaluation excluded). The run also times the model step
alone (one batch already on the device, stepped on repeatedly; NCHW and ours' layout) and the
reference's data path alone: the step alone is the most any loop with this model can reach, so
it bounds the ratio whatever the data path does. Data: CIFAR-10 from
``--archive`` (default ``../shared/data/cifar10-jpg.tar.gz``) prepared through the data layer
(a stratified train subset), or random uint8 images of CIFAR shape when it is missing.

    python benchmarks/bench_train.py [--steps 30] [--threads 2] [--device auto]
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset
from torchvision import transforms

from scalemech.core.device import resolve_device
from scalemech.core.recipe import Recipe
from scalemech.data import Prepared, load_prepared, prepare_dataset
from scalemech.models import build_model
from scalemech.models.memory import memory_format_for
from scalemech.training.train import make_optimizer, train

SPEC = {
    "family": "resnet",
    "depth": 20,
    "width": 1,
    "norm": "batch",
    "placement": "branch",
    "in_channels": 3,
    "num_classes": 10,
}
NCHW = torch.contiguous_format
ARCHIVE = Path(__file__).resolve().parents[2] / "shared" / "data" / "cifar10-jpg.tar.gz"


def cifar_like(archive: Path, n_train: int, workdir: Path) -> tuple[Prepared, str]:
    """CIFAR-10 (a stratified ``n_train`` subset) if ``archive`` exists, else random uint8 images."""
    if archive.is_file():
        out = workdir / "cifar10"
        prepare_dataset("cifar10", {"archive": str(archive), "subset": {"train": n_train, "test": 1000}}, out)
        return load_prepared(out), f"CIFAR-10 from {archive} ({n_train} train images)"
    generator = torch.Generator().manual_seed(0)
    x = torch.randint(0, 256, (n_train + 1000, 3, 32, 32), dtype=torch.uint8, generator=generator)
    y = torch.randint(0, 10, (n_train + 1000,), generator=generator)
    stats = {"mean": [0.5] * 3, "std": [0.29] * 3}
    return (
        Prepared(
            "random",
            "image",
            x[:n_train],
            y[:n_train],
            x[n_train:],
            y[n_train:],
            {"stats": stats},
            num_classes=10,
            in_channels=3,
            image_size=32,
        ),
        f"random uint8 images of CIFAR shape ({archive} not found)",
    )


class PerExample(torch.utils.data.Dataset):
    """A ``TensorDataset`` of uint8 images with a torchvision transform applied per example."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor, transform):
        self.items, self.transform = TensorDataset(x, y), transform

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int):
        x, y = self.items[i]
        return self.transform(x), y


def reference_loader(data: Prepared, recipe: Recipe, seed: int) -> DataLoader:
    """The plain loop's batches: per-example torchvision crop, flip and normalization."""
    stats = data.manifest["stats"]
    transform = transforms.Compose(
        [
            transforms.RandomCrop(32, padding=4),
            transforms.RandomHorizontalFlip(),
            transforms.ConvertImageDtype(torch.float32),
            transforms.Normalize(stats["mean"], stats["std"]),
        ]
    )
    return DataLoader(
        PerExample(data.train_x, data.train_y, transform),
        batch_size=recipe.batch_size,
        shuffle=True,
        drop_last=True,
        generator=torch.Generator().manual_seed(seed),
    )


def batches(loader: DataLoader, steps: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """``steps`` batches of ``loader``, cycling through epochs."""
    step = 0
    while True:
        for batch in loader:
            yield batch
            step += 1
            if step == steps:
                return


def reference_data_seconds(data: Prepared, recipe: Recipe, seed: int) -> float:
    """Seconds the plain loop's data path alone takes for ``recipe.steps`` batches."""
    start = time.perf_counter()
    for _ in batches(reference_loader(data, recipe, seed), recipe.steps):
        pass
    return time.perf_counter() - start


def step_loop(
    batch_stream: Iterable[tuple[torch.Tensor, torch.Tensor]],
    recipe: Recipe,
    seed: int,
    device: torch.device,
    memory_format: torch.memory_format,
) -> float:
    """Images/s of plain SGD steps of a freshly seeded ResNet-20 (fp32, ``memory_format``) over ``batch_stream``."""
    torch.manual_seed(seed)
    model = build_model(SPEC).to(device, memory_format=memory_format).train()
    optimizer = make_optimizer(model, recipe)
    start = time.perf_counter()
    for x, y in batch_stream:
        loss = F.cross_entropy(model(x.to(device).contiguous(memory_format=memory_format)), y.to(device))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    loss.item()  # wait for the device
    return recipe.steps * recipe.batch_size / (time.perf_counter() - start)


def reference_loop(data: Prepared, recipe: Recipe, seed: int, device: torch.device) -> float:
    """Images/s of the plain loop: per-example torchvision augmentation, NCHW, fp32."""
    return step_loop(batches(reference_loader(data, recipe, seed), recipe.steps), recipe, seed, device, NCHW)


def model_step_alone(
    data: Prepared, recipe: Recipe, seed: int, device: torch.device, memory_format: torch.memory_format
) -> float:
    """Images/s of the model step with no data path: one batch, made once and already on the device in
    ``memory_format``, stepped on ``recipe.steps`` times. No training loop with this model, optimizer and
    layout can run faster, so ``model_step_alone / reference`` bounds what a loop can gain."""
    x, y = next(batches(reference_loader(data, recipe, seed), 1))
    batch = (x.to(device).contiguous(memory_format=memory_format), y.to(device))
    return step_loop(itertools.repeat(batch, recipe.steps), recipe, seed, device, memory_format)


LOOPS = ("reference", "ours", "step NCHW", "step ours")


def images_per_second(
    loop: str,
    data: Prepared,
    recipe: Recipe,
    seed: int,
    device: torch.device,
    workdir: Path,
    ours_format: torch.memory_format,
) -> float:
    """Images/s of one of ``LOOPS``: the reference loop, ``train()``, or the model step alone in NCHW or
    ``ours_format`` (the layout ``train()`` gives the model)."""
    if loop == "reference":
        return reference_loop(data, recipe, seed, device)
    if loop == "ours":
        metrics = train(
            SPEC, recipe, data, workdir, workdir / "ckpt", seed, device, checkpoint_every=10**9, progress=False
        )
        return metrics["examples_per_second"]
    return model_step_alone(data, recipe, seed, device, NCHW if loop == "step NCHW" else ours_format)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--device", default="auto")
    parser.add_argument("--archive", type=Path, default=ARCHIVE)
    parser.add_argument("--train-images", type=int, default=5000)
    parser.add_argument(
        "--repeats", type=int, default=4, help="run the four loops this often, rotating their order; best of each"
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    recipe = Recipe(steps=args.steps, batch_size=128, lr=0.1, augment=True, eval_examples=1000, eval_batch_size=1000)
    ours_format = memory_format_for(build_model(SPEC), device)
    best: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        data, what = cifar_like(args.archive, args.train_images, Path(tmp))
        print(f"data: {what}\nmodel: ResNet-20 k=1, batch 128, {args.steps} steps, {args.threads} threads, {device}")
        for memory_format in (NCHW, ours_format):  # oneDNN builds its kernels outside every timed loop
            model_step_alone(data, dataclasses.replace(recipe, steps=2), 0, device, memory_format)
        data_s = min(reference_data_seconds(data, recipe, seed=r) for r in range(args.repeats))
        for r in range(args.repeats):
            order = LOOPS[r % len(LOOPS) :] + LOOPS[: r % len(LOOPS)]  # no loop always runs first
            repeat = {
                name: images_per_second(name, data, recipe, r, device, Path(tmp) / f"run{r}", ours_format)
                for name in order
            }
            print(f"repeat {r}: " + ", ".join(f"{k} {v:.0f}" for k, v in repeat.items()) + " images/s")
            best = {k: max(best.get(k, 0.0), v) for k, v in repeat.items()}
    reference, ours, layout = best["reference"], best["ours"], str(ours_format).removeprefix("torch.")
    print("best of the repeats:")
    print(f"reference loop (DataLoader + per-example torchvision, NCHW): {reference:8.0f} images/s")
    print(f"scalemech.training.train (on-device batched augmentation, {layout}): {ours:8.0f} images/s")
    print(f"ratio ours/reference: {ours / reference:.2f}x")
    print(
        f"model step alone (one batch already on the device, no data path): NCHW {best['step NCHW']:.0f}, "
        f"{layout} {best['step ours']:.0f} images/s"
    )
    step_s = args.steps * 128 / reference
    print(
        f"the reference spends {data_s / step_s:.0%} of its time on data ({data_s:.2f} of {step_s:.2f} s); "
        f"with the {layout} model step no loop can beat it by more than {best['step ours'] / reference:.2f}x, "
        f"and ours runs at {ours / best['step ours']:.0%} of that step"
    )


if __name__ == "__main__":
    main()
