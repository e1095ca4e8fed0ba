"""The first-order signal of a new zero-initialized block: its weights drawn per point (``new_blocks``),
its gradient summed over batches (``BlockGradSums``), and ``∇_θ L`` of a block inside a model
(``block_grad``)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from ..core.seeding import seeded
from ..models.base import ResidualModel
from .batches import PrepareBatch, iter_batches


def block_grad(
    model: ResidualModel, block: nn.Module, x: Tensor, y: Tensor, batch_size: int, prepare_batch: PrepareBatch
) -> list[Tensor]:
    """``∇_θ L`` for the parameters ``θ`` of ``block`` (a part of ``model``), ``L`` the mean pool loss.

    Float64 accumulation over batches; the model is put in eval mode; nothing is written to ``.grad``.
    """
    model.eval()
    params = list(block.parameters())
    for p in params:
        p.requires_grad_(True)
    total = [torch.zeros_like(p, dtype=torch.float64) for p in params]
    with torch.enable_grad():
        for xb, yb in iter_batches(x, y, batch_size, prepare_batch):
            loss = model.per_example_loss(model(xb), yb).sum()
            for acc, g in zip(total, torch.autograd.grad(loss, params, allow_unused=True)):
                if g is not None:
                    acc += g
    return [g / len(x) for g in total]


def new_blocks(model: ResidualModel, points: Sequence[str], seeds: Sequence[int]) -> dict[str, nn.Module]:
    """``{point: model.new_block(point)}`` in eval mode, block ``k``'s random weights from ``seeds[k]``
    (the global RNG state is left as it was), as ``insert_block`` draws them. Only the
    ``first_order_parameters`` require grad, so autograd keeps no activations for the others."""
    blocks = {}
    for point, seed in zip(points, seeds, strict=True):
        with seeded(seed):
            block = model.new_block(point).eval().requires_grad_(False)
        for param in model.first_order_parameters(block):
            param.requires_grad_(True)
        blocks[point] = block
    return blocks


class BlockGradSums:
    """``Σ_batches ∇_θ Σ_b ℓ_b`` of each new block (``one_pass``'s second output), in float64."""

    def __init__(self, model: ResidualModel, blocks: dict[str, nn.Module]):
        self.totals = [
            [torch.zeros_like(p, dtype=torch.float64) for p in model.first_order_parameters(block)]
            for block in blocks.values()
        ]

    def add(self, block_grads: list[list[Tensor]]) -> None:
        for total, grads in zip(self.totals, block_grads):
            for acc, g in zip(total, grads):
                acc += g

    def norms(self, n: int) -> list[float]:
        """``‖(1/n) Σ_i ∇_θ ℓ_i‖`` of each block."""
        return [math.sqrt(sum(float((g**2).sum()) for g in total)) / n for total in self.totals]
