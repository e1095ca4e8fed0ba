"""Per-example activation gradients at insertion points, from one forward and one backward pass.

For an example ``(x, y)`` and an insertion point with stream ``z = f_bot(x)`` (docs/science.md §1)

    q(x, y) = ∇_z ℓ(f_top(z), y).

In eval mode (norm layers use running statistics) examples do not interact, so row ``b`` of
``∇_Z Σ_b ℓ_b`` for a batched stream ``Z`` is ``q_b``: one forward and one backward per batch
give ``q`` at every requested point at once (docs/science.md §4.3); parameters may be frozen.

Two views of ``q`` per point:

- ``full``:   the stream flattened, ``D = C·H·W`` (CNN) or ``T·d`` (transformer);
- ``pooled``: summed over every axis except batch and the channel axis, which is axis 1 for
  rank >= 4 streams ``(B, C, H, W)`` and the last axis for rank-3 streams ``(B, T, d)``; a rank-2
  stream ``(B, d)`` is its own pooled view. ``pooled`` is the gradient w.r.t. one shift per
  channel broadcast over space/positions (``broadcast_shift``).

``GradientPool`` keeps the rows ``Q`` (n×D) of one split × point × view on disk, so a pass over a
pool never holds all of ``Q`` in memory; its files are checked on every open (``PoolError``).
``block_grad_norms`` is the first-order signal of a zero-initialized inserted block (Paper D's
Condition 1): ``‖∇_θ L(f_new)‖`` at ``θ = 0``.

Modules: ``views``, ``batches``, ``capture``, ``pools``, ``signal`` (the new block's first-order signal)
and ``norms`` (BatchNorm statistics recomputed before a measurement).
"""
