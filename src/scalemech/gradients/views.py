"""The two views of a per-example gradient at a point: ``full``, the stream flattened (``D = C·H·W`` or
``T·d``), and ``pooled``, summed over every axis but batch and channel; a shift given in a view as a
tensor of the stream's shape (``broadcast_shift``)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

VIEWS = ("full", "pooled")


def channel_dim(stream: Tensor) -> int:
    """The channel/feature axis of a batched stream: 1 for rank >= 4 ``(B, C, ...)``, else -1."""
    if stream.dim() < 2:
        raise ValueError(f"a stream has a batch axis and at least one more; got shape {tuple(stream.shape)}")
    return 1 if stream.dim() >= 4 else stream.dim() - 1


def pool_stream(stream: Tensor) -> Tensor:
    """Sum over all axes but batch and channel: ``(B, C, H, W) -> (B, C)``, ``(B, T, d) -> (B, d)``."""
    keep = channel_dim(stream)
    summed = [a for a in range(1, stream.dim()) if a != keep]
    return stream.sum(dim=summed) if summed else stream


def view_of(grad: Tensor, view: str) -> Tensor:
    """``grad`` (B, *stream) in ``view``: ``full`` (B, D) or ``pooled`` (B, C)."""
    if view == "full":
        return grad.reshape(grad.shape[0], -1)
    if view == "pooled":
        return pool_stream(grad)
    raise ValueError(f"unknown view {view!r}; allowed: {VIEWS}")


def broadcast_shift(delta: Tensor, view: str, stream_shape: Sequence[int]) -> Tensor:
    """A shift ``δ`` given in ``view`` as a tensor of shape ``(1, *stream_shape)`` to add to ``z``.

    ``full``: ``δ`` has ``prod(stream_shape)`` entries. ``pooled``: one entry per channel, repeated
    over space/positions, so ``∂L/∂δ`` is the pooled view of ``q``.
    """
    shape = (1, *stream_shape)
    if view == "full":
        return delta.reshape(shape)
    if view == "pooled":
        keep = channel_dim(torch.empty(shape, device="meta"))
        per_channel = [1] * len(shape)
        per_channel[keep] = shape[keep]
        return delta.reshape(per_channel).expand(shape)
    raise ValueError(f"unknown view {view!r}; allowed: {VIEWS}")
