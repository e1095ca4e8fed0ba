"""Zero-initialized residual parameter intervention (E7, Paper W claim W4).

At an insertion point add a parameter ``δ`` to the stream, zero at start:

    f_δ(x) = f_top(f_bot(x) + δ),

``δ`` of the stream's shape (``full`` view) or one value per channel / hidden unit broadcast over
space / positions (``pooled`` view, ``grads.broadcast_shift``). The gradient of the mean loss
w.r.t. ``δ`` at 0 is the mean activation gradient in that view, so a step ``δ = −η μ_M`` along the
mean train-pool gradient changes the test loss to first order by

    predicted = −η μ_Mᵀ g_K     (g_K: mean test-pool gradient, same view),

which is compared with the observed ``L_test(−η μ_M) − L_test(0)`` on the test pool.

Step size: ``η`` is set per step fraction ``φ`` so the broadcast shift has norm ``φ`` times a typical
stream norm: ``‖broadcast(η μ_M)‖ = φ · RMS(z) · sqrt(P)``, with ``P`` the elements of one
example's stream and ``RMS(z)`` the root mean square of ``z`` over the train pool and all elements;
in the pooled view ``‖broadcast(v)‖ = ‖v‖ · sqrt(P / C)``.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from torch import Tensor

from ..data import Prepared
from ..grads import GradientPool, PrepareBatch, broadcast_shift, iter_batches, measured_points, pool_path, to_device
from ..models.base import ResidualModel
from ..seeding import derive_seed
from ..tables import columns
from ..tasks import draw_disjoint, fetch


def _cast(dtype: torch.dtype, prepare_batch: PrepareBatch) -> PrepareBatch:
    """``prepare_batch`` with floating inputs cast to ``dtype`` (token ids stay integers)."""

    def prepare(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
        x, y = prepare_batch(x, y)
        return (x.to(dtype) if x.is_floating_point() else x), y

    return prepare


@torch.no_grad()
def stream_rms(f_bot: torch.nn.Module, x: Tensor, y: Tensor, batch_size: int, prepare_batch: PrepareBatch) -> float:
    """``RMS(z) = sqrt(mean over examples and elements of z²)``, ``z = f_bot(x)``."""
    total, count = 0.0, 0
    for xb, _ in iter_batches(x, y, batch_size, prepare_batch):
        z = f_bot(xb)
        total += float((z.double() ** 2).sum())
        count += z.numel()
    return math.sqrt(total / count)


@torch.no_grad()
def shifted_losses(
    f_bot: torch.nn.Module,
    f_top: torch.nn.Module,
    model: ResidualModel,
    shifts: Sequence[Tensor],
    x: Tensor,
    y: Tensor,
    batch_size: int,
    prepare_batch: PrepareBatch,
) -> list[float]:
    """Mean pool loss of ``f_top(f_bot(x) + δ)`` for each ``δ`` in ``shifts`` (one ``f_bot`` pass per batch)."""
    totals = [0.0] * len(shifts)
    for xb, yb in iter_batches(x, y, batch_size, prepare_batch):
        z = f_bot(xb)
        for k, delta in enumerate(shifts):
            totals[k] += float(model.per_example_loss(f_top(z + delta), yb).double().sum())
    return [total / len(x) for total in totals]


def intervene(
    model: ResidualModel,
    data: Prepared,
    pool_dir: str | Path,
    keys: dict[str, Any],
    *,
    step_fractions: Sequence[float],
    views: Sequence[str],
    batch_size: int,
    device: torch.device | str,
) -> pd.DataFrame:
    """The ``intervention`` table of ``model``: ``intervene_at`` every point and view whose gradient
    pools ``measure`` stored in ``pool_dir``, on the very examples behind them (read from the
    pools' provenance), judged also on a held-out test pool of as many examples, disjoint from
    the measured one (``tasks.draw_disjoint``). The keyword arguments are the config's
    ``intervene`` section."""
    task, points = model.task(data), measured_points(pool_dir)
    train, test = (
        fetch(task, GradientPool(pool_path(pool_dir, split, points[0], views[0])).meta) for split in ("train", "test")
    )
    heldout = draw_disjoint(task, "test", len(test), derive_seed(test.seed, "heldout"), test.index)
    frames = [
        intervene_at(
            model,
            point,
            view,
            (train.x, train.y),
            (test.x, test.y),
            (heldout.x, heldout.y),
            pool_dir,
            batch_size,
            to_device(device),
            keys,
            step_fractions,
        )
        for point in points
        for view in views
    ]
    return pd.concat(frames, ignore_index=True)


def _ratio(observed: float, predicted: float) -> dict[str, float | bool]:
    return {
        "ratio": observed / predicted if predicted != 0 else math.nan,
        "sign_agree": bool(math.copysign(1, observed) == math.copysign(1, predicted)),
    }


def intervene_at(
    model: ResidualModel,
    point: str,
    view: str,
    train: tuple[Tensor, Tensor],
    test: tuple[Tensor, Tensor],
    heldout: tuple[Tensor, Tensor],
    pool_dir: str | Path,
    batch_size: int,
    prepare_batch: PrepareBatch,
    keys: dict[str, Any],
    step_fractions: Sequence[float],
    dtype: torch.dtype | None = torch.float64,
) -> pd.DataFrame:
    """The ``intervention`` rows of ``model`` at ``point`` in ``view``, one per step fraction.

    ``train``/``test`` are the examples whose gradients ``measure`` stored in ``pool_dir``
    (``intervene`` fetches them); ``heldout`` is a test pool B disjoint from ``test`` (pool A).
    The prediction ``−η μ_Mᵀ g_A`` is compared with the loss change on A (``observed``: a
    first-order consistency check, which tends to the prediction as η → 0 for any alignment) and
    on B (``observed_heldout``: the held-out test of W4). The losses are evaluated on a copy of the
    model cast to ``dtype`` (float64 by default, so the small observed changes are not rounding
    noise; ``None`` keeps the model's dtype). ``ratio = observed / predicted``; ``sign_agree``:
    equal signs.
    """
    train_pool, test_pool = (GradientPool(pool_path(pool_dir, split, point, view)) for split in ("train", "test"))
    evaluated = copy.deepcopy(model).eval()
    if dtype is not None:
        evaluated = evaluated.to(dtype)
        prepare_batch = _cast(dtype, prepare_batch)
    device = next(evaluated.parameters()).device
    param_dtype = next(evaluated.parameters()).dtype
    f_bot, f_top = evaluated.split(point)
    mu_train = train_pool.mean(device)  # (D,) float64, D = P (full) or C (pooled)
    g_test = test_pool.mean(device)
    if not float(mu_train.norm()) > 0:
        raise ValueError(
            f"the mean train gradient at {point!r} ({view} view) is {float(mu_train.norm())}; "
            f"there is no direction to step along"
        )
    stream_shape = train_pool.meta["stream_shape"]
    numel = math.prod(stream_shape)
    repeats = numel / mu_train.numel()  # elements of z that share one entry of δ
    target_norm = stream_rms(f_bot, *train, batch_size, prepare_batch) * math.sqrt(numel)
    direction = broadcast_shift(mu_train.to(param_dtype), view, stream_shape)  # (1, *stream_shape)
    etas = [phi * target_norm / (float(mu_train.norm()) * math.sqrt(repeats)) for phi in step_fractions]
    shifts = [torch.zeros_like(direction)] + [-eta * direction for eta in etas]
    losses, heldout_losses = (
        shifted_losses(f_bot, f_top, evaluated, shifts, *pool, batch_size, prepare_batch) for pool in (test, heldout)
    )
    alignment = float(mu_train @ g_test)
    rows = []
    for phi, eta, loss, heldout_loss in zip(step_fractions, etas, losses[1:], heldout_losses[1:]):
        predicted, observed, observed_heldout = -eta * alignment, loss - losses[0], heldout_loss - heldout_losses[0]
        same_pool, held_out = _ratio(observed, predicted), _ratio(observed_heldout, predicted)
        rows.append(
            {
                **keys,
                "point": point,
                "point_index": train_pool.meta["point_index"],
                "view": view,
                "step_fraction": phi,
                "eta": eta,
                "predicted": predicted,
                "observed": observed,
                **same_pool,
                "observed_heldout": observed_heldout,
                "ratio_heldout": held_out["ratio"],
                "sign_agree_heldout": held_out["sign_agree"],
            }
        )
    return pd.DataFrame(rows, columns=columns("intervention"))
