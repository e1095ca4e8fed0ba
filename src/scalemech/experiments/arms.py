"""The arms of growth (E11, with Paper D's E8): the jumpboard of an inserted block, and training
at a grid of learning rates.

At an insertion point, ``f_new(x) = f_top(z + h_θ(z))`` with ``h_0 = 0`` (``insert_block``), so
``f_new = f_old`` at ``θ = 0``. Then:

1. training-set jumpboard (``jumpboard``): ``θ_J = −s·∇_θ L_train(θ = 0)``, with ``s = t / ‖∇_θ L_train‖``
   and the step length ``t`` picked from ``ArmConfig.jump_lengths`` by the lowest train-pool loss;
2. training (``best_trained``): ``steps`` optimizer steps on the train split, of the parameters an
   arm trains, at each learning rate ``lr·f`` for ``f`` in ``lr_factors``; the one with the lowest
   train-pool loss is kept (``f = 0`` keeps the model as it started, so a control never ends above
   ``f_old``'s train-pool loss);
3. Condition 2 (fallback, in ``growth.grow_at``): if the trained ``f_new`` has a higher train-pool loss
   than the jumpboard (or a non-finite one), the jumpboard is kept instead.

Norm statistics stay frozen throughout: ``f_old``'s BatchNorm statistics are first recomputed at
its weights (``norms.recalibrate_batch_norm``, as in every measurement), then every model runs in
eval mode, so BatchNorm uses those running statistics and only parameters change (a fine-tuning
of a trained model, and the setting in which the jumpboard's first-order argument holds).

Every arm trains through the engine ``grow``'s arms train in (``training.continued.train_arm``: its
precision, resume states, batches copied to the device 50 steps at a time, one host sync per
``SYNC_EVERY`` steps), with this protocol as its recipe (``ArmConfig.recipe``, ``train_params``).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import Tensor, nn

from ..core.recipe import Recipe
from ..gradients.batches import PrepareBatch, mean_loss
from ..gradients.signal import block_grad
from ..models.base import ResidualModel
from ..tasks import Task
from ..training import continued
from ..training.engine import PRECISIONS

TRAIN_MODES = ("block", "all")
MAX_WIDENINGS = 6  # extensions of the jumpboard's line search by 10x past an end of its grid
OPTIMIZERS = ("sgd", "adam")
CHECKPOINT_EVERY = 250  # steps between an arm's resume states (and one on SIGTERM)


@dataclass
class ArmConfig:
    """How the arms train; built from the config's ``grow`` section, whose schema holds the defaults."""

    steps: int  # optimizer steps of the grown arm (and of the equal-steps control)
    train_mode: str  # "block": the new block only; "all": every parameter
    optimizer: str  # "sgd" (with momentum) or "adam"
    lr: float  # learning rate
    lr_factors: Sequence[float]  # the grid lr·f both f_new and the control choose from by train-pool loss
    momentum: float  # SGD momentum
    weight_decay: float  # decoupled for adam (AdamW), L2 for sgd
    batch_size: int  # training batch size
    eval_batch_size: int  # batch size of loss evaluations
    jump_lengths: Sequence[float]  # candidate ‖θ_J‖ of the jumpboard
    seed: int  # new blocks' weights, data order (shared by every arm of a snapshot) and pools
    precision: str = "fp32"  # of the training steps (PRECISIONS); evaluations stay float32
    activation_checkpointing: bool = False  # recompute each block's activations in the backward: the same steps

    def __post_init__(self) -> None:
        if self.train_mode not in TRAIN_MODES:
            raise ValueError(f"train_mode {self.train_mode!r}; allowed: {TRAIN_MODES}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer {self.optimizer!r}; allowed: {OPTIMIZERS}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision {self.precision!r}; allowed: {PRECISIONS}")
        if self.steps < 0 or not self.jump_lengths or min(self.jump_lengths) <= 0:
            raise ValueError(f"need steps >= 0 and positive jump_lengths; got {self.steps}, {self.jump_lengths}")
        if not self.lr_factors or min(self.lr_factors) < 0:
            raise ValueError(f"need a non-empty grid of lr_factors >= 0; got {self.lr_factors}")

    def recipe(self, lr: float, steps: int) -> Recipe:
        """Paper D's arm as the engine's ``Recipe``: ``steps`` steps at the constant ``lr`` (no warmup, a
        floor of 1), SGD with ``momentum`` (not Nesterov) or AdamW (betas 0.9, 0.999), ``weight_decay`` on
        weight matrices only (``train.make_optimizer``), no clipping."""
        sgd = self.optimizer == "sgd"
        return Recipe(
            optimizer="sgd" if sgd else "adamw", lr=lr, momentum=self.momentum if sgd else 0.9, beta2=0.999,
            weight_decay=self.weight_decay, nesterov=False, batch_size=self.batch_size, steps=steps,
            min_lr_fraction=1.0, eval_batch_size=self.eval_batch_size,
        )  # fmt: skip


@dataclass(frozen=True)
class ArmData:
    """What every arm of one model trains and is judged on: batches of ``task``'s train split, each
    made ready by ``prepare_batch``, in the order ``order_seed`` draws (the same for every arm); the
    ``train_pool`` that picks an arm's learning rate and jumpboard; the ``heldout_pool`` its gains are
    measured on."""

    task: Task
    train_pool: tuple[Tensor, Tensor]
    heldout_pool: tuple[Tensor, Tensor]
    prepare_batch: PrepareBatch
    order_seed: int


def train_only(model: ResidualModel, params: Iterable[nn.Parameter]) -> list[nn.Parameter]:
    """Let ``params`` alone of ``model`` require grad; returns them as a list."""
    params = list(params)
    chosen = {id(p) for p in params}
    for p in model.parameters():
        p.requires_grad_(id(p) in chosen)
    return params


def ranked(loss: float) -> float:
    """A loss as arms are ranked by it: ``inf`` when not finite (the lowest wins; a diverged run never does)."""
    return loss if math.isfinite(loss) else math.inf


def train_loss(
    model: ResidualModel, pool: tuple[Tensor, Tensor], config: ArmConfig, prepare_batch: PrepareBatch
) -> float:
    """``model``'s mean loss on the train ``pool``, ``ranked``: what an arm's learning rate is chosen by."""
    return ranked(mean_loss(model, *pool, config.eval_batch_size, prepare_batch))


def arm_loss(model: ResidualModel, x: Tensor, y: Tensor) -> Tensor:
    """The batch's mean loss ``(1/B) Σ_i ℓ(f(x_i), y_i)``, reduced in float32 (under autocast too)."""
    return model.per_example_loss(model(x).float(), y).mean()


def train_params(
    model: ResidualModel,
    params: Iterable[nn.Parameter],
    data: ArmData,
    config: ArmConfig,
    lr: float | None = None,
    steps: int | None = None,
    directory: Path | None = None,
    visit: Callable[[int], None] | None = None,
) -> None:
    """Train ``params`` only of ``model`` for ``steps`` (default ``config.steps``) steps at the constant
    ``lr`` (default ``config.lr``) through the engine ``grow``'s arms train in (``continued.train_arm``) with
    Paper D's recipe (``ArmConfig.recipe``): eval mode throughout (norm statistics frozen), ``arm_loss``,
    ``config.precision``. Batches are drawn from the whole train split of ``data.task`` by a generator
    seeded with ``data.order_seed``: the same seed, the same batches in the same order, so a run of ``k``
    steps is the first ``k`` steps of a longer one. With ``directory`` the arm keeps resume states there
    and a finished one is loaded; ``visit(done)`` after every step (``train_arm``). ``ArmDiverged`` when
    the loss stops being finite."""
    steps, lr = config.steps if steps is None else steps, config.lr if lr is None else lr
    train_only(model, params)
    if steps == 0 or lr == 0:
        return
    recipe = config.recipe(lr, steps)
    identity = {"arm": "E11", "recipe": asdict(recipe), "precision": config.precision, "order_seed": data.order_seed}
    name = "E11 arm" if directory is None else f"E11 {directory.parent.name}/{directory.name}"
    continued.train_arm(
        name, model, data.task, recipe, data.order_seed, directory, identity, checkpoint_every=CHECKPOINT_EVERY,
        progress=False, loss=arm_loss, prepare=data.prepare_batch, frozen_norms=True, precision=config.precision,
        recompute=config.activation_checkpointing, visit=visit,
    )  # fmt: skip


def best_trained(
    model: ResidualModel,
    params_of: Callable[[ResidualModel], Iterable[nn.Parameter]],
    data: ArmData,
    config: ArmConfig,
    directory: Path | None = None,
) -> tuple[ResidualModel, float, float]:
    """``(model, lr, train-pool loss)`` of the copy of ``model`` trained (``train_params`` on ``params_of(copy)``,
    batches in ``data``'s order, resume states in ``directory/lr-<i>`` for the grid's ``i``-th factor) at the
    ``lr = config.lr·f``, ``f`` in ``config.lr_factors``, with the lowest train-pool loss (diverged or
    non-finite counts as worst; ties: the first). ``f = 0`` is ``model`` untouched."""
    best: tuple[ResidualModel, float, float] | None = None  # only the best copy so far stays in memory
    for i, factor in enumerate(config.lr_factors):
        candidate, lr = copy.deepcopy(model), config.lr * factor
        try:
            if lr > 0:
                train_params(
                    candidate, params_of(candidate), data, config, lr, directory=directory and directory / f"lr-{i}"
                )
            loss = train_loss(candidate, data.train_pool, config, data.prepare_batch)
        except continued.ArmDiverged:
            loss = math.inf
        if best is None or loss < best[2]:
            best = (candidate, lr, loss)
    return best


def jumpboard(
    expanded: ResidualModel,
    block: nn.Module,
    pool: tuple[Tensor, Tensor],
    config: ArmConfig,
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
        return min(losses, key=lambda t: ranked(losses[t]))

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
