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

from ..core.seeding import derive_seed, model_identity
from ..core.tables import columns
from ..data import Prepared
from ..data.store import SPLITS
from ..gradients.batches import PrepareBatch, batch_losses, iter_batches, to_device
from ..gradients.norms import recalibrate_batch_norm
from ..gradients.pools import GradientPool, measured_points, pool_path
from ..gradients.views import broadcast_shift
from ..models.base import ResidualModel
from ..tasks import draw_disjoint, fetch


@torch.no_grad()
def streams(
    f_bot: torch.nn.Module, x: Tensor, y: Tensor, batch_size: int, prepare_batch: PrepareBatch
) -> list[tuple[Tensor, Tensor]]:
    """The pool's streams ``z = f_bot(x)`` batch by batch, with their labels (in ``f_bot``'s dtype)."""
    return [(f_bot(xb), yb) for xb, yb in iter_batches(x, y, batch_size, prepare_batch)]


def stream_rms(batches: Sequence[tuple[Tensor, Tensor]]) -> float:
    """``RMS(z) = sqrt(mean over examples and elements of z²)`` over the batches of ``streams``."""
    total = sum(float((z.double() ** 2).sum()) for z, _ in batches)
    return math.sqrt(total / sum(z.numel() for z, _ in batches))


@torch.no_grad()
def shifted_losses(
    f_top: torch.nn.Module, model: ResidualModel, shifts: Sequence[Tensor], batches: Sequence[tuple[Tensor, Tensor]]
) -> list[float]:
    """Mean pool loss of ``f_top(z + δ)`` for each ``δ`` in ``shifts``, ``z`` from ``streams``, cast
    to the shifts' dtype (``model`` holds the loss; ``f_top`` is one of its parts)."""
    n, dtype = sum(len(yb) for _, yb in batches), shifts[0].dtype
    totals = [
        sum(float(losses.sum()) for losses in batch_losses(model, lambda z, d=delta: f_top(z.to(dtype) + d), batches))
        for delta in shifts
    ]
    return [total / n for total in totals]


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
    """The ``intervention`` table of ``model``: ``intervene_at`` every point whose gradient pools
    ``measure`` stored in ``pool_dir``, in each of ``views``, on the very examples behind them
    (read from the pools' provenance), judged also on a held-out test pool of as many examples,
    disjoint from the measured one (``tasks.draw_disjoint``). The keyword arguments are the
    config's ``intervene`` section."""
    task, points = model.task(data), measured_points(pool_dir)
    recalibrate_batch_norm(model.to(device), task, model_identity(keys), device)  # the model measure measured
    train, test = (fetch(task, GradientPool(pool_path(pool_dir, split, points[0], views[0])).meta) for split in SPLITS)
    heldout = draw_disjoint(task, "test", len(test), derive_seed(test.seed, "heldout"), test.index)
    pools = {"train": (train.x, train.y), "test": (test.x, test.y), "heldout": (heldout.x, heldout.y)}
    frames = [
        intervene_at(model, point, views, pools, pool_dir, batch_size, to_device(device), keys, step_fractions)
        for point in points
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
    views: Sequence[str],
    pools: dict[str, tuple[Tensor, Tensor]],
    pool_dir: str | Path,
    batch_size: int,
    prepare_batch: PrepareBatch,
    keys: dict[str, Any],
    step_fractions: Sequence[float],
    dtype: torch.dtype | None = torch.float64,
) -> pd.DataFrame:
    """The ``intervention`` rows of ``model`` at ``point``, one per view and step fraction.

    ``pools["train"]``/``pools["test"]`` are the examples whose gradients ``measure`` stored in
    ``pool_dir`` (``intervene`` fetches them); ``pools["heldout"]`` is a test pool B disjoint from
    the test pool A. The prediction ``−η μ_Mᵀ g_A`` is compared with the loss change on A
    (``observed``: a first-order consistency check, which tends to the prediction as η → 0 for any
    alignment) and on B (``observed_heldout``: the held-out test of W4). Each pool's streams
    ``z = f_bot(x)`` are computed once, by the model as it is, and shared by every view and step;
    ``f_top`` runs on a copy cast to ``dtype`` (float64 by default, so the small observed changes
    are not rounding noise; ``None`` keeps the model's dtype). ``ratio = observed / predicted``;
    ``sign_agree``: equal signs.
    """
    evaluated = copy.deepcopy(model).eval()
    top_model = evaluated if dtype is None else copy.deepcopy(evaluated).to(dtype)
    f_bot, _ = evaluated.split(point)
    _, f_top = top_model.split(point)
    batches = {name: streams(f_bot, *pool, batch_size, prepare_batch) for name, pool in pools.items()}
    rms = stream_rms(batches["train"])
    param = next(top_model.parameters())
    no_shift = torch.zeros((1, *batches["test"][0][0].shape[1:]), dtype=param.dtype, device=param.device)
    unshifted = {pool: shifted_losses(f_top, top_model, [no_shift], batches[pool])[0] for pool in ("test", "heldout")}
    frames = [
        _intervene_in_view(top_model, f_top, point, view, batches, unshifted, rms, pool_dir, keys, step_fractions)
        for view in views
    ]
    return pd.concat(frames, ignore_index=True)


def _intervene_in_view(
    top_model: ResidualModel,
    f_top: torch.nn.Module,
    point: str,
    view: str,
    batches: dict[str, list[tuple[Tensor, Tensor]]],
    unshifted: dict[str, float],
    rms: float,
    pool_dir: str | Path,
    keys: dict[str, Any],
    step_fractions: Sequence[float],
) -> pd.DataFrame:
    """``intervene_at``'s rows in one ``view``, from the pools' streams ``batches``, their losses at
    ``δ = 0`` (``unshifted``, the same in every view) and ``RMS(z)``."""
    train_pool, test_pool = (GradientPool(pool_path(pool_dir, split, point, view)) for split in SPLITS)
    param = next(top_model.parameters())
    mu_train = train_pool.mean(param.device)  # (D,) float64, D = P (full) or C (pooled)
    g_test = test_pool.mean(param.device)
    if not float(mu_train.norm()) > 0:
        raise ValueError(
            f"the mean train gradient at {point!r} ({view} view) is {float(mu_train.norm())}; "
            f"there is no direction to step along"
        )
    stream_shape = train_pool.meta["stream_shape"]
    numel = math.prod(stream_shape)
    repeats = numel / mu_train.numel()  # elements of z that share one entry of δ
    direction = broadcast_shift(mu_train.to(param.dtype), view, stream_shape)  # (1, *stream_shape)
    etas = [phi * rms * math.sqrt(numel) / (float(mu_train.norm()) * math.sqrt(repeats)) for phi in step_fractions]
    shifts = [-eta * direction for eta in etas]
    losses, heldout_losses = (shifted_losses(f_top, top_model, shifts, batches[pool]) for pool in ("test", "heldout"))
    alignment = float(mu_train @ g_test)
    rows = []
    for phi, eta, loss, heldout_loss in zip(step_fractions, etas, losses, heldout_losses):
        predicted = -eta * alignment
        observed, observed_heldout = loss - unshifted["test"], heldout_loss - unshifted["heldout"]
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
