"""Growth at every insertion point, set against the certificate's prediction (E11; E8's arms).

At each chosen snapshot of a trained model (``final``: its last weights; ``signal``: the earliest E10
snapshot after step 0 whose ``‖μ‖²`` interval lies above 0 at some point, where the certificate has
something to rank), and at each insertion point:

1. the certificate is measured before growth (``certificate``: certify's columns, its verdict
   and ``certify_rank``, given by the caller, who sits above this layer);
2. one zero-initialized block is inserted there (``insert_block``: ``f_new = f_old``, checked), set
   to the training-set jumpboard and trained for ``steps`` optimizer steps (the new block only, or
   every weight), with the fallback rule: E8's arm (``experiments.arms``);
3. two controls per snapshot, trained from ``f_old`` on every weight with the same optimizer and
   the same batches: ``control_tokens`` for the same ``steps`` (equal examples), ``control_flops`` for
   ``round(FLOPs(grown) / FLOPs(control step))`` steps (equal compute, FLOPs counted by
   ``torch.utils.flop_counter``), each at the best learning rate of the same grid.

Every arm of a snapshot sees the same batches in the same order (one order seed per model and
snapshot). Held-out losses are taken on ``heldout`` test examples disjoint from the certificate's
test pool (training draws from the train split only); each gain is a paired difference over them
(``stats.paired_difference``): ``gain_old = L(old) − L(grown)``, ``gain_tokens = L(control_tokens) −
L(grown)``, ``gain_flops`` likewise, ``control_change = L(control_tokens) − L(old)``. The predicted
gain is the certificate's ``block_grad_norm``: the first-order loss decrease per unit step of the
new block's parameters along steepest descent.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from torch import Tensor
from torch.utils.flop_counter import FlopCounterMode
from tqdm.auto import tqdm

from .. import stats
from ..core.seeding import derive_seed, model_identity, seeded
from ..core.tables import columns
from ..data import Prepared
from ..gradients.batches import PrepareBatch, mean_loss, per_example_losses, to_device
from ..gradients.norms import recalibrate_batch_norm
from ..models.base import ResidualModel
from ..tasks import Task
from ..tasks.base import draw_disjoint, draw_examples
from ..training.checkpoints import snapshot_paths
from .arms import ArmConfig, best_trained, jumpboard
from .measure import select_points

SNAPSHOTS = ("final", "signal")
CERTIFICATE = ["n", "mu_sq", "mu_sq_lo", "mu_sq_hi", "d_align", "d_align_lo", "d_align_hi", "b_exact", "b_exact_ucb"]
CERTIFICATE += ["block_grad_norm", "verdict", "certify_rank"]


def signal_step(trajectory: pd.DataFrame, final_step: int) -> int | None:
    """The earliest E10 snapshot step in ``(0, final_step)`` at which the train split's ``‖μ‖²``
    interval lies above 0 at some point (either view), or None."""
    rows = trajectory[(trajectory["split"] == "train") & (trajectory["mu_sq_lo"] > 0)]
    steps = sorted(int(s) for s in rows["step"].unique() if 0 < s < final_step)
    return steps[0] if steps else None


def step_flops(model: ResidualModel, xb: Tensor, yb: Tensor) -> int:
    """FLOPs of one training step's forward and backward on ``(xb, yb)`` with the gradients the
    trainable parameters need (``torch.utils.flop_counter``); gradients cleared afterwards."""
    counter = FlopCounterMode(display=False)
    with counter:
        model.per_example_loss(model(xb), yb).mean().backward()
    model.zero_grad(set_to_none=True)
    return int(counter.get_total_flops())


def _trainable(model: ResidualModel, block_name: str | None, train_mode: str) -> list[torch.nn.Parameter]:
    """The parameters an arm trains: the new block's (``"block"``), else every one."""
    if train_mode == "block" and block_name is not None:
        return list(model.blocks[model.index(block_name)].parameters())
    return list(model.parameters())


def _flops_per_step(model: ResidualModel, params: list[torch.nn.Parameter], probe: tuple[Tensor, Tensor]) -> int:
    chosen = {id(p) for p in params}
    for p in model.parameters():
        p.requires_grad_(id(p) in chosen)
    model.eval()
    return step_flops(model, *probe)


class Controls:
    """``f_old`` trained on every weight for a number of steps (the best learning rate of the grid),
    each step count trained once per snapshot: its held-out losses and its learning rate."""

    def __init__(
        self,
        model: ResidualModel,
        task: Task,
        train_pool: tuple[Tensor, Tensor],
        heldout: tuple[Tensor, Tensor],
        config: ArmConfig,
        prepare_batch: PrepareBatch,
        order_seed: int,
    ):
        self.model, self.task, self.train_pool, self.heldout = model, task, train_pool, heldout
        self.config, self.prepare_batch, self.order_seed = config, prepare_batch, order_seed
        self.trained: dict[int, tuple[Tensor, float]] = {}

    def __call__(self, steps: int) -> tuple[Tensor, float]:
        if steps not in self.trained:
            config = dataclasses.replace(self.config, steps=steps)
            best, lr, _ = best_trained(
                self.model, lambda m: m.parameters(), self.task, self.train_pool, config, self.prepare_batch,
                self.order_seed,
            )  # fmt: skip
            losses = per_example_losses(best, *self.heldout, config.eval_batch_size, self.prepare_batch)
            self.trained[steps] = (losses, lr)
        return self.trained[steps]


def _paired(a: Tensor, b: Tensor) -> stats.PairedDifference:
    return stats.paired_difference(a.cpu().double().numpy(), b.cpu().double().numpy())


def grow_at(
    model: ResidualModel,
    point: str,
    task: Task,
    train_pool: tuple[Tensor, Tensor],
    heldout: tuple[Tensor, Tensor],
    old_heldout: Tensor,
    controls: Controls,
    config: ArmConfig,
    prepare_batch: PrepareBatch,
    seed: int,
) -> dict[str, Any]:
    """The arms' columns of one insertion point (module doc): insert, jumpboard, train, fall back;
    the controls at equal steps and equal FLOPs; held-out losses and paired gains."""
    model.eval()
    with seeded(derive_seed(seed, "new_block")):
        expanded, block = model.insert_block(point)
    probe = prepare_batch(*(t[: config.batch_size] for t in train_pool))
    with torch.no_grad():
        reference = model(probe[0])
        gap = float((expanded.eval()(probe[0]) - reference).abs().max())
    if gap > 1e-5 * max(1.0, float(reference.abs().max())):
        raise RuntimeError(f"inserting a block at {point!r} changed the model's output by {gap:.3g}")
    new_name = f"{point}+new"
    jump_model = copy.deepcopy(expanded)
    jump_step, jump_train, jump_interior = jumpboard(
        jump_model, jump_model.blocks[jump_model.index(new_name)], train_pool, config, prepare_batch
    )
    trained, lr_selected, train_grown = best_trained(
        expanded, lambda m: _trainable(m, new_name, config.train_mode), task, train_pool, config, prepare_batch,
        controls.order_seed,
    )  # fmt: skip
    fallback = not train_grown <= jump_train  # also when the trained loss is nan
    grown = jump_model if fallback else trained
    grown_flops = config.steps * _flops_per_step(expanded, _trainable(expanded, new_name, config.train_mode), probe)
    control_step_flops = _flops_per_step(model, list(model.parameters()), probe)
    steps_flops = round(grown_flops / control_step_flops)
    losses = {
        "jump": per_example_losses(jump_model, *heldout, config.eval_batch_size, prepare_batch),
        "grown": per_example_losses(grown, *heldout, config.eval_batch_size, prepare_batch),
    }
    (losses["control_tokens"], lr_tokens), (losses["control_flops"], lr_flops) = (
        controls(config.steps),
        controls(steps_flops),
    )
    gains = {
        "gain_old": _paired(old_heldout, losses["grown"]),
        "gain_tokens": _paired(losses["control_tokens"], losses["grown"]),
        "gain_flops": _paired(losses["control_flops"], losses["grown"]),
        "control_change": _paired(losses["control_tokens"], old_heldout),
    }
    return {
        "point": point,
        "point_index": model.index(point),
        "steps": config.steps,
        "train_mode": config.train_mode,
        "jump_step": jump_step,
        "jump_interior": jump_interior,
        "fallback": fallback,
        "lr_selected": lr_selected,
        "lr_control_tokens": lr_tokens,
        "lr_control_flops": lr_flops,
        "steps_control_flops": steps_flops,
        "flops_grown": grown_flops,
        "flops_control_tokens": config.steps * control_step_flops,
        "flops_control_flops": steps_flops * control_step_flops,
        "train_loss_jump": jump_train,
        "train_loss_grown": jump_train if fallback else train_grown,
        **{f"test_loss_{name}": float(values.mean()) for name, values in losses.items()},
        "n_heldout": len(old_heldout),
        **{name: g.mean for name, g in gains.items()},
        **{f"{name}_se": g.se for name, g in gains.items()},
    }


def growth(
    model: ResidualModel,
    data: Prepared,
    snapshot_dir: str | Path,
    trajectory: pd.DataFrame | None,
    keys: dict[str, Any],
    certificate: Callable[[ResidualModel, list[str]], pd.DataFrame],
    *,
    points: str | int | Sequence[str],
    snapshots: Sequence[str],
    pool: int,
    heldout: int,
    device: torch.device | str,
    **config: Any,
) -> pd.DataFrame:
    """The ``growth`` table of ``model`` (module doc): one row per snapshot × point of ``points``.

    ``snapshot_dir`` holds training's weight snapshots (``signal``); ``trajectory`` is the model's E10
    table (None: no ``signal`` snapshot). ``certificate(model, names)`` returns certify's table of a
    model at those points (``CERTIFICATE`` columns) with ``attrs["pools"]["test"]``, its test pool's index.
    The jumpboard and the fallback use a train pool of ``pool`` examples. ``config`` holds the
    ``ArmConfig`` fields."""
    settings = ArmConfig(**config)
    identity, prepare_batch = model_identity(keys), to_device(device)
    model = model.to(device).eval()
    task = model.task(data)
    kept = snapshot_paths(Path(snapshot_dir))
    final_step = max(kept, default=None)
    weights = {"final": (final_step, None)}  # the model as given: its final weights
    if "signal" in snapshots and trajectory is not None and final_step is not None:
        step = signal_step(trajectory, final_step)
        if step is not None:
            weights["signal"] = (step, kept[step])
    rows = []
    for snapshot, (step, path) in weights.items():
        if snapshot not in snapshots:
            continue
        grown_from = copy.deepcopy(model)
        if path is not None:
            grown_from.load_state_dict(torch.load(path, map_location=device, weights_only=True))
        recalibrate_batch_norm(grown_from, task, identity, device)
        rows += _snapshot_rows(grown_from, snapshot, step, task, points, certificate, pool, heldout, settings,
                               prepare_batch, identity)  # fmt: skip
    frame = pd.DataFrame([{**keys, **row} for row in rows])
    return frame.reindex(columns=columns("growth"))


def _snapshot_rows(
    model: ResidualModel,
    snapshot: str,
    step: int | None,
    task: Task,
    points: str | int | Sequence[str],
    certificate: Callable[[ResidualModel, list[str]], pd.DataFrame],
    pool: int,
    heldout: int,
    config: ArmConfig,
    prepare_batch: PrepareBatch,
    identity: str,
) -> list[dict[str, Any]]:
    """The rows of one snapshot: its certificate, then ``grow_at`` every point."""
    seed = derive_seed(config.seed, identity, snapshot)
    chosen = select_points(model, points)
    certified = certificate(model, chosen).set_index("point")
    exclude = torch.as_tensor(certified.attrs["pools"]["test"], dtype=torch.int64)
    held = draw_disjoint(task, "test", min(heldout, task.count("test") - len(exclude)), derive_seed(seed, "heldout"),
                         exclude)  # fmt: skip
    train = draw_examples(task, "train", pool, derive_seed(seed, "pool"))
    train_pool, heldout_pool = (train.x, train.y), (held.x, held.y)
    old_heldout = per_example_losses(model, *heldout_pool, config.eval_batch_size, prepare_batch)
    old_train = mean_loss(model, *train_pool, config.eval_batch_size, prepare_batch)
    controls = Controls(model, task, train_pool, heldout_pool, config, prepare_batch, derive_seed(seed, "order"))
    rows = []
    for point in tqdm(chosen, desc=f"growth ({snapshot})"):
        cert = certified.loc[point]
        rows.append(
            {
                "snapshot": snapshot,
                "snapshot_step": step,
                **{name: cert[name] for name in CERTIFICATE},
                "predicted_gain": cert["block_grad_norm"],
                "train_loss_old": old_train,
                "test_loss_old": float(old_heldout.mean()),
                **grow_at(
                    model,
                    point,
                    task,
                    train_pool,
                    heldout_pool,
                    old_heldout,
                    controls,
                    config,
                    prepare_batch,
                    derive_seed(seed, point),
                ),  # fmt: skip
            }
        )
    return rows
