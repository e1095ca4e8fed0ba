"""A pool's batches prepared for the device, and its per-example and mean losses (float64)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import torch
from torch import Tensor

from ..models.base import ResidualModel

PrepareBatch = Callable[[Tensor, Tensor], tuple[Tensor, Tensor]]
"""``(x, y)`` of the CPU pool -> model-ready ``(x, y)`` on the device (e.g. image normalization)."""


def to_device(device: torch.device | str) -> PrepareBatch:
    """The default ``prepare_batch``: move ``x`` and ``y`` to ``device`` unchanged."""
    return lambda x, y: (x.to(device), y.to(device))


def iter_batches(x: Tensor, y: Tensor, batch_size: int, prepare_batch: PrepareBatch) -> Iterator[tuple[Tensor, Tensor]]:
    """Consecutive prepared batches of a pool ``(x, y)``, in order."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1; got {batch_size}")
    for start in range(0, len(x), batch_size):
        yield prepare_batch(x[start : start + batch_size], y[start : start + batch_size])


def batch_losses(
    model: ResidualModel, forward: Callable[[Tensor], Tensor], batches: Iterable[tuple[Tensor, Tensor]]
) -> Iterator[Tensor]:
    """``(ℓ(forward(x_i), y_i))_i`` of each batch ``(x, y)`` in turn, float64, with ``model``'s loss ℓ."""
    for xb, yb in batches:
        yield model.per_example_loss(forward(xb), yb).double()


@torch.no_grad()
def per_example_losses(
    model: ResidualModel, x: Tensor, y: Tensor, batch_size: int, prepare_batch: PrepareBatch
) -> Tensor:
    """``(ℓ(f(x_i), y_i))_i`` over the pool, float64 on the CPU, model in eval mode."""
    model.eval()
    batches = iter_batches(x, y, batch_size, prepare_batch)
    return torch.cat([losses.cpu() for losses in batch_losses(model, model, batches)])


def mean_loss(model: ResidualModel, x: Tensor, y: Tensor, batch_size: int, prepare_batch: PrepareBatch) -> float:
    """``L = (1/n) Σ_i ℓ(f(x_i), y_i)`` over the pool (``per_example_losses``, float64)."""
    return float(per_example_losses(model, x, y, batch_size, prepare_batch).sum()) / len(x)
