"""Depth expansion with a jumpboard and the fallback rule (E8, Paper D).

At an insertion point, ``f_new(x) = f_top(z + h_θ(z))`` with ``h_0 = 0`` (``insert_block``), so
``f_new = f_old`` at ``θ = 0`` (checked). Then:

1. training-set jumpboard: ``θ_J = −s·∇_θ L_train(θ = 0)``, with ``s = t / ‖∇_θ L_train‖`` and the
   step length ``t`` picked from ``ExpandConfig.jump_lengths`` by the lowest train-pool loss;
2. training: ``steps`` optimizer steps on the train split from ``θ = 0``, either the new block only
   (``train_mode="block"``) or every parameter (``"all"``), at each learning rate ``lr·f`` for ``f`` in
   ``lr_factors``; the one with the lowest train-pool loss is kept (``lr_selected``; ``f = 0`` keeps
   the model as it started);
3. Condition 2 (fallback): if trained ``f_new`` has a higher train-pool loss than the jumpboard
   (or a non-finite one), the jumpboard is selected instead;
4. control: the old model, trained with the same optimizer, steps and data order, on every
   parameter (``"all"``) or on the old block at the point (``"block"``: the same place in the
   network and about the same number of parameters as the new block), with its learning rate
   chosen the same way from the same grid (``lr_control``): the grid holds ``0``, so the control
   never ends above ``f_old``'s train-pool loss, and a gain of ``f_new`` over the control is a gain
   from depth, not from extra optimization nor from a recipe that damages ``f_old``.

Norm statistics stay frozen throughout: ``f_old``'s BatchNorm statistics are first recomputed at
its weights (``norms.recalibrate_batch_norm``, as in every measurement), then every model runs in
eval mode, so BatchNorm uses those running statistics and only parameters change (a fine-tuning
of a trained model, and the setting in which the jumpboard's first-order argument holds).

Columns: ``delta_r_test = L_test(f_old) − L_test(jumpboard)`` (Paper D's ``Δ^R_test``),
``delta_erm = L_train(jumpboard) − L_train(selected) >= 0`` (``Δ_ERM``). Evaluation noise of the
test losses, from the per-example losses ``ℓ_i`` of each model on the same ``n`` test examples:
``se_test_a_minus_b = sd_i(ℓ_i(a) − ℓ_i(b)) / √n`` (paired, sd with ddof 1) for (selected, old),
(control, old) and (selected, control). The old model is evaluated once per model, not per point.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from torch import Tensor, nn

from .. import stats
from ..core.seeding import derive_seed, model_identity, seeded
from ..core.tables import columns
from ..data import Prepared
from ..gradients.batches import PrepareBatch, mean_loss, per_example_losses, to_device
from ..gradients.norms import recalibrate_batch_norm
from ..gradients.pools import measured_points
from ..gradients.signal import block_grad
from ..models.base import ResidualModel
from ..tasks import Task
from ..training.train import optimizer_for
from .measure import draw_pools, select_points

TRAIN_MODES = ("block", "all")
MAX_WIDENINGS = 6  # extensions of the jumpboard's line search by 10x past an end of its grid
OPTIMIZERS = ("sgd", "adam")


@dataclass
class ExpandConfig:
    """How to expand; built from the config's ``expand`` section, whose schema holds the defaults."""

    steps: int  # optimizer steps after insertion (the same for the control)
    train_mode: str  # "block": the new block only; "all": every parameter
    optimizer: str  # "sgd" (with momentum) or "adam"
    lr: float  # learning rate
    lr_factors: Sequence[float]  # the grid lr·f both f_new and the control choose from by train-pool loss
    momentum: float  # SGD momentum
    weight_decay: float  # decoupled for adam (AdamW), L2 for sgd
    batch_size: int  # training batch size
    eval_batch_size: int  # batch size of loss evaluations
    jump_lengths: Sequence[float]  # candidate ‖θ_J‖ of the jumpboard
    seed: int  # new block's weights and data order (shared by expanded model and control)

    def __post_init__(self) -> None:
        if self.train_mode not in TRAIN_MODES:
            raise ValueError(f"train_mode {self.train_mode!r}; allowed: {TRAIN_MODES}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer {self.optimizer!r}; allowed: {OPTIMIZERS}")
        if self.steps < 0 or not self.jump_lengths or min(self.jump_lengths) <= 0:
            raise ValueError(f"need steps >= 0 and positive jump_lengths; got {self.steps}, {self.jump_lengths}")
        if not self.lr_factors or min(self.lr_factors) < 0:
            raise ValueError(f"need a non-empty grid of lr_factors >= 0; got {self.lr_factors}")


@dataclass(frozen=True)
class Evaluated:
    """One model's losses: mean over the train pool, and per-example on the test examples (float64)."""

    train: float
    test: Tensor  # (n,)

    @property
    def test_mean(self) -> float:
        return float(self.test.mean())


def paired_se(a: Tensor, b: Tensor) -> float:
    """Standard error of ``mean(a) − mean(b)`` over the same examples (``stats.paired_difference``)."""
    return stats.paired_difference(a.detach().cpu().double().numpy(), b.detach().cpu().double().numpy()).se


def evaluate(
    model: ResidualModel,
    train_pool: tuple[Tensor, Tensor],
    test_pool: tuple[Tensor, Tensor],
    config: ExpandConfig,
    prepare_batch: PrepareBatch,
    train_loss: float | None = None,
) -> Evaluated:
    """``model``'s mean train-pool loss (``train_loss`` if already known) and per-example test losses."""
    if train_loss is None:
        train_loss = mean_loss(model, *train_pool, config.eval_batch_size, prepare_batch)
    return Evaluated(train_loss, per_example_losses(model, *test_pool, config.eval_batch_size, prepare_batch))


def train_params(
    model: ResidualModel,
    params: Iterable[nn.Parameter],
    task: Task,
    config: ExpandConfig,
    prepare_batch: PrepareBatch,
    order_seed: int,
    lr: float | None = None,
) -> None:
    """``config.steps`` steps at ``lr`` (default ``config.lr``) on the mean batch loss, updating ``params``
    only, model in eval mode.

    Batches are drawn from the whole train split of ``task`` (``Task.sample``) by a generator
    seeded with ``order_seed``: the same seed, the same batches in the same order.
    """
    params = list(params)
    chosen = {id(p) for p in params}
    for p in model.parameters():
        p.requires_grad_(id(p) in chosen)
    generator = torch.Generator().manual_seed(order_seed)
    groups = [{"params": params, "weight_decay": config.weight_decay}]
    optimizer = optimizer_for(groups, config.optimizer, config.lr if lr is None else lr, config.momentum)
    model.eval()
    for _ in range(config.steps):
        xb, yb = prepare_batch(*task.examples("train", task.sample("train", config.batch_size, generator)))
        loss = model.per_example_loss(model(xb), yb).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()


def best_trained(
    model: ResidualModel,
    params_of: Callable[[ResidualModel], Iterable[nn.Parameter]],
    task: Task,
    train_pool: tuple[Tensor, Tensor],
    config: ExpandConfig,
    prepare_batch: PrepareBatch,
    order_seed: int,
) -> tuple[ResidualModel, float, float]:
    """``(model, lr, train-pool loss)`` of the copy of ``model`` trained (``train_params`` on ``params_of(copy)``,
    batches from ``order_seed``) at the ``lr = config.lr·f``, ``f`` in ``config.lr_factors``, with the lowest
    train-pool loss (non-finite counts as worst; ties: the first). ``f = 0`` is ``model`` untouched."""
    best: tuple[ResidualModel, float, float] | None = None  # only the best copy so far stays in memory
    for factor in config.lr_factors:
        candidate, lr = copy.deepcopy(model), config.lr * factor
        if lr > 0:
            train_params(candidate, params_of(candidate), task, config, prepare_batch, order_seed, lr)
        loss = mean_loss(candidate, *train_pool, config.eval_batch_size, prepare_batch)
        loss = loss if math.isfinite(loss) else math.inf
        if best is None or loss < best[2]:
            best = (candidate, lr, loss)
    return best


def jumpboard(
    expanded: ResidualModel,
    block: nn.Module,
    pool: tuple[Tensor, Tensor],
    config: ExpandConfig,
    prepare_batch: PrepareBatch,
) -> tuple[float, float, bool]:
    """Set ``block`` to ``θ_J = −s·∇_θ L_pool(0)`` with the best ``s`` of a line search; return
    ``(s, L_pool, interior)``.

    The search starts from the step lengths ``‖θ_J‖ ∈ jump_lengths`` and widens the grid by
    factors of 10 past whichever end holds the best loss, at most ``MAX_WIDENINGS`` times, so
    that the optimum is bracketed (``interior``: it has a worse neighbour on both sides).
    ``s = 0`` (the old model) when the gradient vanishes (Condition 1 fails).
    """
    grads = block_grad(expanded, block, *pool, config.eval_batch_size, prepare_batch)
    norm = math.sqrt(sum(float((g**2).sum()) for g in grads))
    start = [p.detach().clone() for p in block.parameters()]

    def set_step(s: float) -> None:
        with torch.no_grad():
            for p, p0, g in zip(block.parameters(), start, grads):
                p.copy_(p0 - s * g.to(p.dtype))

    def step_to(s: float) -> float:
        set_step(s)
        return mean_loss(expanded, *pool, config.eval_batch_size, prepare_batch)

    if norm == 0:
        return 0.0, step_to(0.0), False
    lengths = sorted(config.jump_lengths)
    losses = {t: step_to(t / norm) for t in lengths}

    def best() -> float:
        return min(losses, key=lambda t: losses[t] if math.isfinite(losses[t]) else math.inf)

    for _ in range(MAX_WIDENINGS):
        lengths = sorted(losses)
        if best() == lengths[-1]:
            losses[lengths[-1] * 10] = step_to(lengths[-1] * 10 / norm)
        elif best() == lengths[0]:
            losses[lengths[0] / 10] = step_to(lengths[0] / 10 / norm)
        else:
            break
    chosen, lengths = best(), sorted(losses)
    set_step(chosen / norm)
    return chosen / norm, losses[chosen], lengths[0] < chosen < lengths[-1]


def expand(
    model: ResidualModel,
    data: Prepared,
    pool_dir: str | Path,
    keys: dict[str, Any],
    *,
    points: str | int | Sequence[str] | None = None,
    pool: int,
    test_examples: int | None,
    device: torch.device | str,
    **config: Any,
) -> pd.DataFrame:
    """The ``expansion`` table of ``model``: ``expand_at`` each of ``points`` (default: the points
    measured in ``pool_dir``). Training draws batches from the whole train split; the jumpboard
    and the fallback use a train pool of ``pool`` examples, and test losses are taken on
    ``test_examples`` of the test split (None: all of it), both drawn for this model
    (``draw_pools``). ``config`` holds the ``ExpandConfig`` fields. The keyword arguments are
    the config's ``expand`` section."""
    settings = ExpandConfig(**config)
    chosen = measured_points(pool_dir) if points is None else select_points(model, points)
    task = model.task(data)
    recalibrate_batch_norm(model.to(device), task, model_identity(keys), device)
    n_test = task.count("test") if test_examples is None else min(test_examples, task.count("test"))
    pools = draw_pools(model, data, {"train": pool, "test": n_test}, settings.seed, model_identity(keys))
    train_pool, test = (pools["train"].x, pools["train"].y), (pools["test"].x, pools["test"].y)
    return expand_points(model, chosen, task, train_pool, test, settings, to_device(device), keys)


def expand_points(
    model: ResidualModel,
    points: Sequence[str],
    task: Task,
    train_pool: tuple[Tensor, Tensor],
    test_pool: tuple[Tensor, Tensor],
    config: ExpandConfig,
    prepare_batch: PrepareBatch,
    keys: dict[str, Any],
) -> pd.DataFrame:
    """``expand_at`` each of ``points``, the old model evaluated once for all of them."""
    old = evaluate(model, train_pool, test_pool, config, prepare_batch)
    return pd.concat(
        [expand_at(model, p, task, train_pool, test_pool, config, prepare_batch, keys, old) for p in points],
        ignore_index=True,
    )


def expand_at(
    model: ResidualModel,
    point: str,
    task: Task,
    train_pool: tuple[Tensor, Tensor],
    test_pool: tuple[Tensor, Tensor],
    config: ExpandConfig,
    prepare_batch: PrepareBatch,
    keys: dict[str, Any],
    old: Evaluated | None = None,
) -> pd.DataFrame:
    """The one-row ``expansion`` table of inserting a block at ``point`` of ``model``.

    Training batches come from ``task``'s whole train split, the same for the expanded model
    and the control; losses are measured on ``train_pool`` and ``test_pool``. ``old``: the old
    model's losses on them (None: evaluated here).
    """

    def losses(m: ResidualModel, train_loss: float | None = None) -> Evaluated:
        return evaluate(m, train_pool, test_pool, config, prepare_batch, train_loss)

    identity = model_identity(keys)
    order_seed = derive_seed(config.seed, identity, point, "order")  # the same batches for f_new and the control
    model.eval()
    with seeded(derive_seed(config.seed, identity, point, "new_block")):
        expanded, block = model.insert_block(point)
    with torch.no_grad():
        probe = prepare_batch(*(t[: config.eval_batch_size] for t in test_pool))[0]
        reference = model(probe)
        gap = float((expanded.eval()(probe) - reference).abs().max())
    if gap > 1e-5 * max(1.0, float(reference.abs().max())):
        raise RuntimeError(
            f"inserting a block at {point!r} changed the model's output by {gap:.3g}; "
            f"new_block must return z at initialization"
        )
    old = losses(model) if old is None else old

    jump_model = copy.deepcopy(expanded)
    jump_step, jump_train, jump_interior = jumpboard(
        jump_model, jump_model.blocks[jump_model.index(f"{point}+new")], train_pool, config, prepare_batch
    )
    jump = losses(jump_model, jump_train)

    def trained(start: ResidualModel, block_name: str) -> tuple[Evaluated, float]:
        def params_of(m: ResidualModel) -> Iterable[nn.Parameter]:
            return m.blocks[m.index(block_name)].parameters() if config.train_mode == "block" else m.parameters()

        best, lr, train_loss = best_trained(start, params_of, task, train_pool, config, prepare_batch, order_seed)
        return losses(best, train_loss), lr

    new, lr_selected = trained(expanded, f"{point}+new")
    fallback = not new.train <= jump.train  # also when the trained loss is nan
    selected = jump if fallback else new
    control_losses, lr_control = trained(model, point)

    models = {"old": old, "jump": jump, "new": new, "selected": selected, "control": control_losses}
    row = {
        **keys,
        "point": point,
        "point_index": model.index(point),
        "steps": config.steps,
        "train_mode": config.train_mode,
        "jump_step": jump_step,
        "jump_interior": jump_interior,
        **{f"train_loss_{name}": m.train for name, m in models.items()},
        **{f"test_loss_{name}": m.test_mean for name, m in models.items()},
        "delta_r_test": old.test_mean - jump.test_mean,
        "delta_erm": jump.train - selected.train,
        "fallback": fallback,
        "lr_selected": lr_selected,
        "lr_control": lr_control,
        "se_test_selected_minus_old": paired_se(selected.test, old.test),
        "se_test_control_minus_old": paired_se(control_losses.test, old.test),
        "se_test_selected_minus_control": paired_se(selected.test, control_losses.test),
    }
    return pd.DataFrame([row], columns=columns("expansion"))
