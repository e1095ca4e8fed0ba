"""Image classification: ``ImageTask``, crop+flip augmentation as batched tensor operations, and
shuffled epochs on the device (``ImageBatches``)."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from ..core.recipe import Recipe
from ..data import Prepared, normalize_images


class ImageTask:
    """Classification of the uint8 images of ``data``; inputs normalized with its train statistics."""

    block_size = None
    overlaps_per_example = 1  # drawn examples one example can coincide with

    def __init__(self, data: Prepared):
        if data.kind != "image":
            raise ValueError(f"an image model needs image data; {data.name!r} holds {data.kind}")
        self.data = data
        self.device_stats: dict[torch.device, dict[str, Tensor]] = {}  # the train statistics, per device

    def spec_keys(self) -> dict[str, Any]:
        """The input geometry the data give a model: channels, side of the (square) images, classes."""
        return {
            "in_channels": self.data.in_channels,
            "image_size": self.data.image_size,
            "num_classes": self.data.num_classes,
        }

    def draw(self, split: str, n: int, seed: int) -> Tensor:
        """``n`` distinct image indices of ``split`` (``Prepared.draw``)."""
        return self.data.draw(split, n, seed)

    def examples(self, split: str, index: Tensor) -> tuple[Tensor, Tensor]:
        x, y = self.data.take(split, index)
        return self.to_input(x), y

    def overlaps(self, index: Tensor, others: Tensor) -> Tensor:
        return torch.isin(index, others)

    def count(self, split: str) -> int:
        """Distinct examples of ``split``."""
        return len(getattr(self.data, f"{split}_x"))

    def sample(self, split: str, n: int, generator: torch.Generator) -> Tensor:
        """``n`` examples of ``split`` uniformly at random, with replacement (training batches)."""
        return torch.randint(self.count(split), (n,), generator=generator)

    def to_input(self, x: Tensor) -> Tensor:
        """``normalize_images`` with the train statistics held on ``x``'s device (copied there once)."""
        if x.device not in self.device_stats:
            stats = self.data.manifest.get("stats", self.data.manifest)
            self.device_stats[x.device] = {
                key: torch.tensor(stats[key], dtype=torch.float32, device=x.device) for key in ("mean", "std")
            }
        return normalize_images(x, self.device_stats[x.device])

    def batches(
        self, recipe: Recipe, generator: torch.Generator, device: torch.device
    ) -> tuple[ImageBatches, str | None]:
        """Shuffled epochs of the train split on ``device``, augmented as ``wants_augment`` says."""
        train_x = torch.as_tensor(self.data.train_x).to(device)
        augmented = wants_augment(recipe.augment, train_x)
        return ImageBatches(
            train_x, torch.as_tensor(self.data.train_y).to(device), recipe.batch_size, generator, augmented
        ), augmented

    def evaluation_sets(self, recipe: Recipe, seed: int) -> tuple[tuple[Tensor, Tensor], tuple[Tensor, Tensor], str]:
        """The whole test split, and at most ``eval_examples`` train examples for final metrics (raw)."""
        n = min(recipe.eval_examples, len(self.data.train_x))
        test = (torch.as_tensor(self.data.test_x), torch.as_tensor(self.data.test_y))
        return test, self.data.pool("train", n, seed), f"{n} of {len(self.data.train_x)} train examples (seed {seed})"

    def eval_every(self, recipe: Recipe, steps_per_epoch: int) -> int:
        return steps_per_epoch * recipe.eval_every_epoch


# -- batched augmentation ----------------------------------------------------------------------
def crop_flip(x: Tensor, shifts: Tensor, flips: Tensor, pad: int = 4) -> Tensor:
    """Crop ``x`` (B,C,H,W) zero-padded by ``pad`` at offsets ``shifts`` (B,2) ∈ [0, 2·pad], then
    mirror the examples where ``flips`` (B,) is true: ``out_b = flip?(pad(x_b)[:, i:i+H, j:j+W])``.
    Two batched gathers (rows, then mirrored-or-not columns)."""
    B, C, H, W = x.shape
    padded = F.pad(x, (pad, pad, pad, pad))  # (B, C, H+2p, W+2p)
    rows = shifts[:, 0, None] + torch.arange(H, device=x.device)  # (B, H)
    cols = shifts[:, 1, None] + torch.arange(W, device=x.device)  # (B, W)
    cols = torch.where(flips[:, None], cols.flip(1), cols)  # mirrored read order
    picked_rows = padded.gather(2, rows[:, None, :, None].expand(B, C, H, W + 2 * pad))  # (B, C, H, W+2p)
    return picked_rows.gather(3, cols[:, None, None, :].expand(B, C, H, W))  # (B, C, H, W)


def draw_augmentation(n: int, generator: torch.Generator, pad: int, flip: bool) -> tuple[Tensor, Tensor]:
    """``(shifts, flips)`` of ``crop_flip`` for ``n`` images: offsets uniform in [0, 2·pad]² and (with ``flip``)
    flips with probability ½, drawn from ``generator`` (CPU), as torchvision's RandomCrop(padding=pad) +
    RandomHorizontalFlip."""
    shifts = torch.randint(0, 2 * pad + 1, (n, 2), generator=generator)
    flips = torch.rand(n, generator=generator) < 0.5 if flip else torch.zeros(n, dtype=torch.bool)
    return shifts, flips


def shift_pad(height: int) -> int:
    """Padding of the ``shift`` augmentation: ``max(1, H // 14)`` pixels, so a digit moves by up to ±2
    pixels at 28 × 28 and ±1 at 14 × 14 (no flip: a mirrored digit is another symbol)."""
    return max(1, height // 14)


# -- batches ----------------------------------------------------------------------------------
class ImageBatches:
    """Shuffled epochs of an on-device uint8 image split: batch ``k`` of an epoch is
    ``order[k·B:(k+1)·B]`` of a fresh permutation (the last partial batch is dropped), augmented by
    ``crop_flip`` at that batch's draws.

    Each epoch's permutation and every batch's crops and flips are drawn at its start, in the order a
    draw per step would take them (the permutation, then batch 0's shifts and flips, batch 1's, …), and
    copied to the device at once: one host-device transfer an epoch, none in the steps between."""

    def __init__(self, x: Tensor, y: Tensor, batch_size: int, generator: torch.Generator, augmented: str | None):
        self.x, self.y, self.generator, self.augmented = x, y, generator, augmented
        self.batch_size = min(batch_size, len(x))
        self.steps_per_epoch = len(x) // self.batch_size
        self.pad, self.flip = (4, True) if augmented == "crop_flip" else (shift_pad(x.shape[-2]), False)
        self.order: Tensor | None = None  # (N,) on the device
        self.shifts: Tensor | None = None  # (steps_per_epoch, B, 2) on the device, when augmented
        self.flips: Tensor | None = None  # (steps_per_epoch, B)

    def new_epoch(self) -> None:
        order = torch.randperm(len(self.x), generator=self.generator)
        if self.augmented is not None:
            draws = [
                draw_augmentation(self.batch_size, self.generator, self.pad, self.flip)
                for _ in range(self.steps_per_epoch)
            ]
            self.shifts = torch.stack([shifts for shifts, _ in draws]).to(self.x.device)
            self.flips = torch.stack([flips for _, flips in draws]).to(self.x.device)
        self.order = order.to(self.x.device)

    def batch(self, step: int) -> tuple[Tensor, Tensor]:
        k = step % self.steps_per_epoch
        if k == 0 or self.order is None:
            self.new_epoch()
        index = self.order[k * self.batch_size : (k + 1) * self.batch_size]
        x = self.x.index_select(0, index)  # (B, C, H, W) uint8
        if self.augmented is not None:
            x = crop_flip(x, self.shifts[k], self.flips[k], self.pad)
        return x, self.y.index_select(0, index)

    def state_dict(self) -> dict[str, Any]:
        return {name: None if t is None else t.cpu() for name, t in (("order", self.order), ("shifts", self.shifts),
                                                                     ("flips", self.flips))}  # fmt: skip

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.order, self.shifts, self.flips = (
            None if state.get(name) is None else state[name].to(self.x.device) for name in ("order", "shifts", "flips")
        )


def wants_augment(augment: bool | str, train_x: Tensor) -> str | None:
    """The batches' augmentation: ``"crop_flip"`` (pad 4, flips) for ``augment=True``, or for ``"auto"`` when
    the images are 3×32×32 (CIFAR-like); ``"shift"`` (``shift_pad``, no flips) for ``"shift"``; else None."""
    if augment == "auto":
        return "crop_flip" if tuple(train_x.shape[1:]) == (3, 32, 32) else None
    if augment == "shift":
        return "shift"
    return "crop_flip" if augment else None
