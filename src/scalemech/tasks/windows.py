"""Examples that are windows of ``block_size + 1`` tokens of one stream per split: what such tasks
share (``WindowTask``), next-byte prediction on a prepared text dataset (``TextTask``) and its
training batches at random starts (``TextBatches``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from ..core.recipe import Recipe
from ..data import Prepared, text_windows
from ..data.prepared import token_starts


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


def windows_overlap(starts: Tensor, others: Tensor, block_size: int) -> Tensor:
    """Whether each window of ``block_size + 1`` tokens at ``starts`` overlaps one at ``others``."""
    return ((starts[:, None] - others[None, :]).abs() <= block_size).any(1)


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

    def batches(self, recipe: Recipe, generator: torch.Generator, device: torch.device) -> tuple[TextBatches, None]:
        """Random windows of the train stream on ``device`` (no augmentation)."""
        if recipe.augment in (True, "shift"):
            raise ValueError(f"recipe augment={recipe.augment} is for images; dataset {self.data.name!r} is text")
        stream = torch.as_tensor(self.data.train_x).to(device)
        return TextBatches(stream, recipe.batch_size, self.block_size, generator), None

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


STEPS_AHEAD = 50  # training steps whose window starts are drawn and copied to the device together


class TextBatches:
    """Windows of ``block_size + 1`` bytes at uniform random starts (nanoGPT's ``get_batch``);
    an "epoch" is ``len(stream) // (B·T)`` steps.

    The starts of ``STEPS_AHEAD`` steps are drawn at once, step after step as a draw per step would take
    them, and copied to the device together: one host-device transfer per ``STEPS_AHEAD`` steps."""

    def __init__(self, stream: Tensor, batch_size: int, block_size: int, generator: torch.Generator):
        if len(stream) <= block_size + 1:
            raise ValueError(f"a text stream of {len(stream)} bytes is too short for block_size {block_size}")
        self.stream, self.batch_size, self.block_size, self.generator = stream, batch_size, block_size, generator
        self.steps_per_epoch = max(1, len(stream) // (batch_size * block_size))
        self.ahead: Tensor | None = None  # (STEPS_AHEAD, B) starts on the device
        self.used = 0  # rows of ``ahead`` already taken

    def batch(self, step: int) -> tuple[Tensor, Tensor]:
        if self.ahead is None or self.used == len(self.ahead):
            high = len(self.stream) - self.block_size
            draws = [torch.randint(0, high, (self.batch_size,), generator=self.generator) for _ in range(STEPS_AHEAD)]
            self.ahead, self.used = torch.stack(draws).to(self.stream.device), 0
        starts, self.used = self.ahead[self.used], self.used + 1
        return text_windows(self.stream, starts, self.block_size)  # (B, T) each

    def state_dict(self) -> dict[str, Any]:
        return {"ahead": None if self.ahead is None else self.ahead.cpu(), "used": self.used}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        ahead = state.get("ahead")
        self.ahead, self.used = (None if ahead is None else ahead.to(self.stream.device)), state.get("used", 0)
