"""The task interface (``Task``), the task of a prepared dataset (``task_for``), and fixed examples
drawn from a task and fetched again (``Examples``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import Tensor

from ..core.recipe import Recipe
from ..data import Prepared
from .images import ImageBatches, ImageTask
from .windows import TextBatches, TextTask

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
    ) -> tuple[ImageBatches | TextBatches, str | None]: ...
    def evaluation_sets(self, recipe: Recipe, seed: int) -> tuple[Pair, Pair, str]: ...
    def eval_every(self, recipe: Recipe, steps_per_epoch: int) -> int: ...


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


def fetch(task: Task, provenance: dict[str, Any]) -> Examples:
    """The examples a ``provenance`` record (``Examples.provenance``) describes."""
    index = torch.tensor(provenance["examples"], dtype=torch.int64)
    return Examples(provenance["split"], *task.examples(provenance["split"], index), index, provenance["seed"])
