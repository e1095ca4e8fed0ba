"""What differs between image and text tasks, in one place.

A task wraps a prepared dataset and says

- which spec keys the data decide (``spec_keys``: channels and classes, or the vocabulary),
- how fixed examples are drawn (``draw``: one index per example, an image's position in its
  split or a window's start in its stream; seeded, so a pool is ``(split, index)``) and fetched
  as model input (``examples``),
- how a stored batch on the device becomes model input (``to_input``: image normalization with
  the train statistics, or token ids as int64),
- how training batches are drawn (``batches``: shuffled epochs with crop+flip for images,
  random windows for text) and what a training example is worth in tokens.

``task_for(data, block_size)`` is the only place that reads ``data.kind``. Training,
measurement and the model interface (``ResidualModel.task``) use nothing else. The
per-example loss stays with the model (its output decides the reduction).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import torch
import torch.nn.functional as F
from torch import Tensor

from .data import Prepared, normalize_images, text_windows
from .data.prepared import token_starts

if TYPE_CHECKING:
    from .train import Recipe


Pair = tuple[Tensor, Tensor]  # (inputs, targets)


class Task(Protocol):
    data: Prepared
    block_size: int | None  # tokens per example of a language model; None for images
    overlaps_per_example: int  # how many examples of one draw a single example can overlap

    def spec_keys(self) -> dict[str, Any]: ...
    def draw(self, split: str, n: int, seed: int) -> Tensor: ...
    def examples(self, split: str, index: Tensor) -> tuple[Tensor, Tensor]: ...
    def to_input(self, x: Tensor) -> Tensor: ...
    def overlaps(self, index: Tensor, others: Tensor) -> Tensor: ...
    def count(self, split: str) -> int: ...
    def sample(self, split: str, n: int, generator: torch.Generator) -> Tensor: ...
    def batches(
        self, recipe: Recipe, generator: torch.Generator, device: torch.device
    ) -> tuple[ImageBatches | TextBatches, bool]: ...
    def evaluation_sets(self, recipe: Recipe, seed: int) -> tuple[Pair, Pair, str]: ...
    def eval_every(self, recipe: Recipe, steps_per_epoch: int) -> int: ...


class ImageTask:
    """Classification of the uint8 images of ``data``; inputs normalized with its train statistics."""

    block_size = None
    overlaps_per_example = 1  # drawn examples one example can coincide with

    def __init__(self, data: Prepared):
        if data.kind != "image":
            raise ValueError(f"an image model needs image data; {data.name!r} holds {data.kind}")
        self.data = data

    def spec_keys(self) -> dict[str, Any]:
        return {"in_channels": self.data.in_channels, "num_classes": self.data.num_classes}

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
        return normalize_images(x, self.data.manifest)

    def batches(self, recipe: Recipe, generator: torch.Generator, device: torch.device) -> tuple[ImageBatches, bool]:
        """Shuffled epochs of the train split on ``device``, with crop+flip when ``wants_augment``."""
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


class WindowTask:
    """What the tasks whose examples are windows of ``block_size + 1`` tokens of one 1-D stream per
    split have in common: subclasses give ``stream(split)`` and ``examples``; windows are drawn
    without overlap (``token_starts``), counted, sampled for training and kept apart here."""

    overlaps_per_example = 2  # a window overlaps at most two of a draw's non-overlapping windows
    block_size: int

    def stream(self, split: str) -> Sequence[int]:
        raise NotImplementedError

    def spec_keys(self) -> dict[str, Any]:
        return {}

    def draw(self, split: str, n: int, seed: int) -> Tensor:
        """``n`` non-overlapping window starts in ``split``'s stream (``token_starts``)."""
        return token_starts(len(self.stream(split)), n, self.block_size, seed)

    def overlaps(self, index: Tensor, others: Tensor) -> Tensor:
        return windows_overlap(index, others, self.block_size)

    def count(self, split: str) -> int:
        """Non-overlapping windows of ``split``'s stream."""
        return len(self.stream(split)) // (self.block_size + 1)

    def sample(self, split: str, n: int, generator: torch.Generator) -> Tensor:
        """``n`` windows at uniform random starts (nanoGPT's ``get_batch``), for training batches."""
        return torch.randint(len(self.stream(split)) - self.block_size, (n,), generator=generator)

    def to_input(self, x: Tensor) -> Tensor:
        return x.long()


class TextTask(WindowTask):
    """Next-byte prediction on windows of ``block_size`` bytes of ``data``'s streams."""

    def __init__(self, data: Prepared, block_size: int):
        if data.kind != "text":
            raise ValueError(f"a language model needs text data; {data.name!r} holds {data.kind}")
        self.data, self.block_size = data, block_size

    def spec_keys(self) -> dict[str, Any]:
        return {"vocab_size": self.data.vocab_size}

    def stream(self, split: str) -> Tensor:
        return getattr(self.data, f"{split}_x")

    def draw(self, split: str, n: int, seed: int) -> Tensor:
        """``n`` non-overlapping window starts in ``split``'s stream (``Prepared.draw``)."""
        return self.data.draw(split, n, seed, self.block_size)

    def examples(self, split: str, index: Tensor) -> tuple[Tensor, Tensor]:
        return self.data.take(split, index, self.block_size)

    def batches(self, recipe: Recipe, generator: torch.Generator, device: torch.device) -> tuple[TextBatches, bool]:
        """Random windows of the train stream on ``device`` (no augmentation)."""
        if recipe.augment is True:
            raise ValueError(f"recipe augment=true is for images; dataset {self.data.name!r} is text")
        stream = torch.as_tensor(self.data.train_x).to(device)
        return TextBatches(stream, recipe.batch_size, self.block_size, generator), False

    def evaluation_sets(self, recipe: Recipe, seed: int) -> tuple[tuple[Tensor, Tensor], tuple[Tensor, Tensor], str]:
        """``eval_windows`` fixed windows of each split."""
        n = recipe.eval_windows
        return (
            self.data.pool("test", n, seed, self.block_size),
            self.data.pool("train", n, seed, self.block_size),
            f"{n} fixed windows of {self.block_size} tokens per split (seed {seed})",
        )

    def eval_every(self, recipe: Recipe, steps_per_epoch: int) -> int:
        return recipe.eval_every_steps


def task_for(data: Prepared, block_size: int | None = None) -> Task:
    """The task of ``data``: images, or text cut in windows of ``block_size``."""
    if data.kind == "image":
        return ImageTask(data)
    if block_size is None:
        raise ValueError(f"dataset {data.name!r} is text: a model of it needs a block_size")
    return TextTask(data, block_size)


@dataclass
class Examples:
    """Fixed examples of one split as model input, and where they came from: ``index`` (from
    ``Task.draw``) and the ``seed`` that drew it, so they can be fetched again (``fetch``)."""

    split: str
    x: Tensor
    y: Tensor
    index: Tensor
    seed: int

    def provenance(self) -> dict[str, Any]:
        """What a stored gradient pool records of its examples."""
        return {"split": self.split, "seed": self.seed, "examples": self.index.tolist()}

    def __len__(self) -> int:
        return len(self.index)


def draw_examples(task: Task, split: str, n: int, seed: int) -> Examples:
    """``n`` examples of ``split`` drawn with ``seed``."""
    index = task.draw(split, n, seed)
    return Examples(split, *task.examples(split, index), index, seed)


def draw_disjoint(task: Task, split: str, n: int, seed: int, exclude: Tensor) -> Examples:
    """``n`` examples of ``split`` drawn with ``seed``, none of which is (or overlaps, for windows of
    text) an example of ``exclude``: an independent pool beside an existing one."""
    candidates = task.draw(split, n + task.overlaps_per_example * len(exclude), seed)
    index = candidates[~task.overlaps(candidates, exclude)][:n]
    if len(index) < n:
        raise ValueError(f"{split} split too small for {n} examples beside {len(exclude)} others")
    return Examples(split, *task.examples(split, index), index, seed)


def windows_overlap(starts: Tensor, others: Tensor, block_size: int) -> Tensor:
    """Whether each window of ``block_size + 1`` tokens at ``starts`` overlaps one at ``others``."""
    return ((starts[:, None] - others[None, :]).abs() <= block_size).any(1)


def fetch(task: Task, provenance: dict[str, Any]) -> Examples:
    """The examples a ``provenance`` record (``Examples.provenance``) describes."""
    index = torch.tensor(provenance["examples"], dtype=torch.int64)
    return Examples(provenance["split"], *task.examples(provenance["split"], index), index, provenance["seed"])


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


def augment(x: Tensor, generator: torch.Generator, pad: int = 4) -> Tensor:
    """``crop_flip`` with offsets uniform in [0, 2·pad]² and flips with probability ½ drawn from
    ``generator`` (CPU), as torchvision's RandomCrop(padding=pad) + RandomHorizontalFlip."""
    shifts = torch.randint(0, 2 * pad + 1, (len(x), 2), generator=generator)
    flips = torch.rand(len(x), generator=generator) < 0.5
    return crop_flip(x, shifts.to(x.device), flips.to(x.device), pad)


# -- batches ----------------------------------------------------------------------------------
class ImageBatches:
    """Shuffled epochs of an on-device uint8 image split: batch ``k`` of an epoch is
    ``order[k·B:(k+1)·B]`` of a fresh permutation (the last partial batch is dropped)."""

    def __init__(self, x: Tensor, y: Tensor, batch_size: int, generator: torch.Generator, augmented: bool):
        self.x, self.y, self.generator, self.augmented = x, y, generator, augmented
        self.batch_size = min(batch_size, len(x))
        self.steps_per_epoch = len(x) // self.batch_size
        self.order: Tensor | None = None

    def batch(self, step: int) -> tuple[Tensor, Tensor]:
        k = step % self.steps_per_epoch
        if k == 0 or self.order is None:
            self.order = torch.randperm(len(self.x), generator=self.generator)
        index = self.order[k * self.batch_size : (k + 1) * self.batch_size].to(self.x.device)
        x = self.x.index_select(0, index)  # (B, C, H, W) uint8
        return (augment(x, self.generator) if self.augmented else x), self.y.index_select(0, index)

    def state_dict(self) -> dict[str, Any]:
        return {"order": self.order}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.order = state["order"]


class TextBatches:
    """Windows of ``block_size + 1`` bytes at uniform random starts (nanoGPT's ``get_batch``);
    an "epoch" is ``len(stream) // (B·T)`` steps."""

    def __init__(self, stream: Tensor, batch_size: int, block_size: int, generator: torch.Generator):
        if len(stream) <= block_size + 1:
            raise ValueError(f"a text stream of {len(stream)} bytes is too short for block_size {block_size}")
        self.stream, self.batch_size, self.block_size, self.generator = stream, batch_size, block_size, generator
        self.steps_per_epoch = max(1, len(stream) // (batch_size * block_size))

    def batch(self, step: int) -> tuple[Tensor, Tensor]:
        starts = torch.randint(0, len(self.stream) - self.block_size, (self.batch_size,), generator=self.generator)
        return text_windows(self.stream, starts.to(self.stream.device), self.block_size)  # (B, T) each

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass


def wants_augment(augment: bool | str, train_x: Tensor) -> bool:
    """Crop+flip for ``augment=True``, or for ``"auto"`` when the images are 3×32×32 (CIFAR-like)."""
    if augment == "auto":
        return tuple(train_x.shape[1:]) == (3, 32, 32)
    return bool(augment)
