"""One forward and one backward per batch give ``q`` at every requested point (``one_pass``), stored as
gradient pools (``capture_pools``, with the pool's mean loss from the same passes) or reduced to the
first-order signal of new blocks (``block_grad_norms``)."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn
from tqdm.auto import tqdm

from ..models.base import ResidualModel
from ..tasks import Examples
from .batches import PrepareBatch, iter_batches
from .pools import GradientPool, PoolWriter, pool_path
from .signal import BlockGradSums, new_blocks
from .views import VIEWS, view_of


class FirstOrder(nn.Module):
    """A new block ``b_θ`` with ``b_0(z) = z``, measured at ``θ = 0`` without changing the model:
    ``z ↦ z + (b(z̄) − z̄)``, ``z̄ = z`` detached.

    Its value is ``b(z)``, the gradient reaching ``z`` through it is the one at its output (the old
    model's ``q``: nothing is backpropagated through ``b``'s input), and ``∇_θ`` of the loss is
    ``J_θ b(z)ᵀ q``. Extra arguments (a decoder layer's mask, positions …) go to ``b``.
    """

    def __init__(self, block: nn.Module):
        super().__init__()
        self.block = block

    def forward(self, z: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        detached = z.detach()
        return z + (self.block(detached, *args, **kwargs) - detached)


def one_pass(
    model: ResidualModel,
    x: Tensor,
    y: Tensor,
    points: Sequence[str],
    views: Sequence[str] = VIEWS,
    blocks: dict[str, nn.Module] | None = None,
) -> tuple[dict[str, dict[str, Tensor]], list[list[Tensor]], Tensor]:
    """``({point: {view: q}}, [∇_θ Σ_b ℓ_b of each new block], Σ_b ℓ_b)`` of one prepared batch, one
    forward and one backward: ``q`` float32 (B, D) or (B, C), ``q_b = ∂(Σ_b' ℓ_b')/∂z_b``; each of
    ``blocks`` (new blocks) runs after its point as ``FirstOrder`` (the model is unchanged), its gradient
    taken over ``model.first_order_parameters(block)`` (the others' is 0 at ``θ = 0``); the batch's
    summed per-example loss is a detached scalar (the model's own: ``b_0(z) = z``).

    The model must be in eval mode (``iter_activation_grads`` sets it).
    """
    blocks = blocks or {}
    params = [model.first_order_parameters(block) for block in blocks.values()]
    with torch.enable_grad():
        output, streams = model.forward_streams(x, points, {p: FirstOrder(b) for p, b in blocks.items()})
        loss = model.per_example_loss(output, y).sum()
        wrt = [streams[p] for p in points] + [param for block in params for param in block]
        grads = iter(torch.autograd.grad(loss, wrt, allow_unused=True))
    views_of = {p: {v: view_of(g.float(), v) for v in views} for p, g in zip(points, grads)}
    block_grads = [[torch.zeros_like(q) if (g := next(grads)) is None else g for q in block] for block in params]
    return views_of, block_grads, loss.detach()


def activation_grads(
    model: ResidualModel, x: Tensor, y: Tensor, points: Sequence[str], views: Sequence[str] = VIEWS
) -> dict[str, dict[str, Tensor]]:
    """``{point: {view: q}}`` for one prepared batch (``one_pass`` without new blocks)."""
    return one_pass(model, x, y, points, views)[0]


def iter_activation_grads(
    model: ResidualModel,
    x: Tensor,
    y: Tensor,
    points: Sequence[str],
    batch_size: int,
    prepare_batch: PrepareBatch,
    views: Sequence[str] = VIEWS,
) -> Iterator[dict[str, dict[str, Tensor]]]:
    """``activation_grads`` of each consecutive batch of the pool ``(x, y)``; puts ``model`` in eval mode."""
    model.eval()
    for xb, yb in iter_batches(x, y, batch_size, prepare_batch):
        yield activation_grads(model, xb, yb, points, views)


def check_finite(
    loss: Tensor, grads: dict[str, dict[str, Tensor]], block_grads: list[list[Tensor]], where: str
) -> None:
    """Refuse, in one ``ValueError`` starting with ``where`` (the model and the batch), a batch whose
    summed loss, or any of whose gradients (``q`` at a point, a new block's ``∇_θ``), is not finite: a
    model with NaN or infinite weights, or inputs it overflows on, gives no statistics. One device
    sync per batch."""
    tensors = [q for views in grads.values() for q in views.values()] + [g for block in block_grads for g in block]
    finite = torch.isfinite(loss).all()
    for tensor in tensors:
        finite = finite & torch.isfinite(tensor).all()
    if bool(finite):
        return
    if not torch.isfinite(loss).all():
        raise ValueError(f"{where}: the model's loss on these data is {float(loss)}: its weights or inputs are broken")
    points = [p for p, views in grads.items() if not all(torch.isfinite(q).all() for q in views.values())]
    at = f"at {', '.join(points)}" if points else "of a new block's weights"
    raise ValueError(
        f"{where}: the model's loss on these data is finite ({float(loss):.4g}) but its gradient {at} is not "
        "(nan or inf): its weights or inputs are broken"
    )


def capture_pools(
    model: ResidualModel,
    examples: Examples,
    points: Sequence[str],
    pool_dir: str | Path,
    batch_size: int,
    prepare_batch: PrepareBatch,
    dtype: str,
    views: Sequence[str] = VIEWS,
    labels: dict[str, Any] | None = None,
    progress: bool = False,
    new_block_seeds: Sequence[int] | None = None,
    checksum: bool = True,
    require_finite: bool = False,
    keep_bytes: int = 0,
) -> dict[tuple[str, str], GradientPool]:
    """Capture ``q`` of ``examples`` at ``points`` and store one ``GradientPool`` per point × view.

    One forward and one backward per batch (``one_pass``); returns ``{(point, view): pool}``. Each
    pool records its provenance (``examples.provenance()``: split, seed, example index) and
    ``labels`` (the model). With ``new_block_seeds`` (one per point), the same passes give the
    first-order signal of a new block at each point, recorded as each pool's ``block_grad_norm``
    (``block_grad_norms``). Each pool's ``mean_loss`` is the mean per-example loss of ``examples``
    (``model.per_example_loss``: a language model's mean next-token loss in nats) from the same
    passes. Without ``checksum`` the pools are scratch (``GradientPool.create``). With
    ``require_finite`` (certify), each batch's loss and gradients are checked as they are computed
    (``check_finite``): a non-finite one is refused at once, naming the batch, before any pool is kept.
    When every pool's stored rows together take at most ``keep_bytes``, they also stay on the device they
    were computed on (``PoolWriter(keep=True)``): no copy to the host per batch, and the pools' Grams are
    built there (``GradientPool.grams``), not read back from the files.
    """
    x, y, split = examples.x, examples.y, examples.split
    provenance = {**examples.provenance(), **(labels or {})}
    blocks = new_blocks(model, points, new_block_seeds) if new_block_seeds is not None else {}
    sums = BlockGradSums(model, blocks)
    writers: dict[tuple[str, str], PoolWriter] = {}
    loss_sum: Tensor | float = 0.0  # Σ_i ℓ_i, float64 on the model's device
    model.eval()
    batches = iter_batches(x, y, batch_size, prepare_batch)
    total = math.ceil(len(x) / batch_size)
    for batch, (xb, yb) in enumerate(tqdm(batches, total=total, desc=f"capture {split}", disable=not progress)):
        grads, block_grads, loss = one_pass(model, xb, yb, points, views, blocks)
        if require_finite:
            where = f"{provenance.get('model', 'the model')} ({split} pool, batch {batch + 1} of {total})"
            check_finite(loss, grads, block_grads, where)
        sums.add(block_grads)
        loss_sum = loss_sum + loss.double()
        if not writers:
            with torch.no_grad():
                _, streams = model.forward_streams(xb[:1], points)
            stored = len(x) * sum(grads[p][v].shape[1] for p in points for v in views) * np.dtype(dtype).itemsize
            writers = {
                (p, v): GradientPool.create(
                    pool_path(pool_dir, split, p, v),
                    len(x),
                    grads[p][v].shape[1],
                    dtype,
                    checksum,
                    keep=stored <= keep_bytes,
                    point=p,
                    point_index=model.index(p),
                    view=v,
                    stream_shape=list(streams[p].shape[1:]),
                    **provenance,
                )
                for p in points
                for v in views
            }
        for (p, v), writer in writers.items():
            writer.write(grads[p][v])
    norms = dict(zip(blocks, sums.norms(len(x))))
    mean_loss = float(loss_sum) / len(x)
    for (p, _), writer in writers.items():
        writer.meta["mean_loss"] = mean_loss
        if p in norms:
            writer.meta["block_grad_norm"] = norms[p]
    return {key: writer.finish() for key, writer in writers.items()}


def block_grad_norms(
    model: ResidualModel,
    points: Sequence[str],
    x: Tensor,
    y: Tensor,
    batch_size: int,
    prepare_batch: PrepareBatch,
    seeds: Sequence[int],
) -> list[float]:
    """``‖∇_θ L(f_new)‖`` at ``θ = 0`` for the block ``model.insert_block(point)`` inserts at each of
    ``points`` (Condition 1), with one forward and backward of ``model`` per batch.

    With ``f_new = f_top ∘ b_θ ∘ f_bot`` and ``b_0(z) = z``, the stream and its gradient at the
    point are those of ``model``: ``∇_θ L = (1/n) Σ_i J_θ b(z_i)ᵀ q_i`` with ``z_i`` the stream and
    ``q_i = ∂ℓ_i/∂z_i``; every block runs beside the model as ``FirstOrder`` in the same pass.
    Block ``k``'s random weights come from ``seeds[k]`` (``new_blocks``).
    """
    model.eval()
    blocks = new_blocks(model, points, seeds)
    sums = BlockGradSums(model, blocks)
    for xb, yb in iter_batches(x, y, batch_size, prepare_batch):
        sums.add(one_pass(model, xb, yb, [], (), blocks)[1])
    return sums.norms(len(x))
